"""The docs hook's benchmark cells: a list item by its index, and the unit change of a FORMAT
(`*1000:.0f`, `/GiB:.2f`) that shows a measured value in the table's unit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import docs_hooks
from bench.docs_hooks import DocsTableError, render


@pytest.fixture
def results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data = {"seconds": 0.196, "bytes": 2300993536, "size": 39076835, "share": 0.075, "count": 1835,
            "runs": [{"s": 2.771}, {"s": 0.042}], "ok": True, "name": "x"}
    (tmp_path / "t.json").write_text(json.dumps(data), encoding="utf-8")
    monkeypatch.setattr(docs_hooks, "RESULTS", tmp_path)
    monkeypatch.setattr(docs_hooks, "ROOT", tmp_path.parent)
    return tmp_path


def _cell(cell: str) -> str:
    return render(f"<!-- table\n| x |\n|---|\n| {cell} |\n-->", entries=[]).splitlines()[-1]


def test_values_are_printed_as_the_json_holds_them_or_formatted(results: Path) -> None:
    assert _cell("{@t/seconds}") == "| 0.196 |"
    assert _cell("{@t/count:,}") == "| 1,835 |"
    assert _cell("{@t/runs/1/s}") == "| 0.042 |"


def test_a_unit_change_scales_before_the_format(results: Path) -> None:
    assert _cell("{@t/seconds:*1000:.0f} ms") == "| 196 ms |"
    assert _cell("{@t/runs/0/s:*1000:,.0f}") == "| 2,771 |"
    assert _cell("{@t/bytes:/GiB:.2f} GiB") == "| 2.14 GiB |"
    assert _cell("{@t/size:/MB:.1f} MB") == "| 39.1 MB |"
    assert _cell("{@t/share:*100:.1f}%") == "| 7.5% |"
    assert _cell("{@t/size:/1e6:.1f}") == "| 39.1 |"


def test_a_unit_change_of_no_number_is_refused(results: Path) -> None:
    with pytest.raises(DocsTableError, match="not a number to scale"):
        _cell("{@t/name:*1000:.0f}")
    with pytest.raises(DocsTableError, match="not a number to scale"):
        _cell("{@t/ok:*2:.0f}")
    with pytest.raises(DocsTableError, match="has no runs/2/s"):
        _cell("{@t/runs/2/s:*1000:.0f}")


def test_a_plain_format_spec_with_a_fill_is_not_a_unit_change(results: Path) -> None:
    assert _cell("{@t/count:*>6}") == "| **1835 |"
