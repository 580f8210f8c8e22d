"""The index swap, lock and temp folders (issue 10, the crash holes of `index`).

- Readers always find a complete index at the path: the swap exchanges the two folders in one
  call (Linux renameat2), and where it cannot, a kill between its two renames leaves the
  previous index at `.NAME.old`, which readers open (before the fix: exit 2 "no such index").
- A failed build leaves no temp folder and no lock file; what a killed build left (its owner
  process is gone) is removed by the next build in the same folder; a live build's are kept.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import index.build
from cli import main
from engine.access.oxigraph_kg import OxigraphKG
from index.build import build_index
from index.entities import EntityTable
from index.kg_stage import KgSource
from index.manifest import read_manifest
from index.paths import IndexPaths

KB = "a\tr\tb\nb\tr\tc\nc\ts\td\n"


def _triples(out: Path) -> int:
    return int(read_manifest(IndexPaths(out))["stages"]["kg"]["counts"]["triples"])


def _built(tmp_path: Path) -> tuple[Path, Path]:
    kb = tmp_path / "kb.tsv"
    kb.write_text(KB, encoding="utf-8")
    out = tmp_path / "ix"
    build_index(out, [KgSource(kb, "tsv")], [])
    kb.write_text(KB + "x\ty\tz\n", encoding="utf-8")  # the next build has work to do
    return kb, out


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_swap_is_one_exchange_where_supported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not index.build._exchange(tmp_path, tmp_path):  # probe: exchanging a folder with itself
        pytest.skip("renameat2(RENAME_EXCHANGE) is not supported here")
    kb, out = _built(tmp_path)
    real_rename = os.rename

    def no_rename_of_the_index(src: object, dst: object, *args: object, **kwargs: object) -> None:
        if out in (Path(str(src)), Path(str(dst))):
            raise AssertionError("the live index was renamed away: a reader could find nothing")
        real_rename(src, dst, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "rename", no_rename_of_the_index)
    build_index(out, [KgSource(kb, "tsv")], [])
    assert _triples(out) == 4
    assert _leftovers(tmp_path) == []  # no .ix.old, no temp folder, no lock file


def test_a_kill_between_the_two_renames_leaves_a_readable_index(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    kb, out = _built(tmp_path)
    monkeypatch.setattr(index.build, "_exchange", lambda a, b: False)  # the two-rename fallback
    real_rename = os.rename
    calls: list[str] = []

    def crash_on_the_second(src: object, dst: object, *args: object, **kwargs: object) -> None:
        calls.append(str(src))
        if len(calls) == 2:
            raise KeyboardInterrupt("killed between the two renames of the swap")
        real_rename(src, dst, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "rename", crash_on_the_second)
    with pytest.raises(KeyboardInterrupt):
        build_index(out, [KgSource(kb, "tsv")], [])
    monkeypatch.setattr(os, "rename", real_rename)
    assert not out.exists()
    # every reader finds the previous index, complete: the CLI, the KG, a method context
    stats = CliRunner().invoke(main, ["kg", "stats", "--index", str(out)])
    assert stats.exit_code == 0, stats.output
    assert _triples(out) == 3
    facts = OxigraphKG.open(IndexPaths(out)).sparql("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
    assert int(next(iter(facts))["n"].value) == 3
    assert len(EntityTable.open(IndexPaths(out))) > 0  # what open_context opens first
    # the next build finishes the job
    build_index(out, [KgSource(kb, "tsv")], [])
    assert out.is_dir() and _triples(out) == 4
    assert _leftovers(tmp_path) == []


def test_a_failed_build_leaves_no_temp_folder_and_no_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kb, out = _built(tmp_path)

    def crash(*args: object, **kwargs: object) -> None:
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(index.build, "_hardlink_copy", crash)  # fails before any stage runs
    with pytest.raises(OSError, match="disk full"):
        build_index(out, [KgSource(kb, "tsv")], [])
    assert _leftovers(tmp_path) == []
    assert _triples(out) == 3


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_leftovers_of_killed_builds_are_removed_and_live_ones_kept(tmp_path: Path) -> None:
    kb, out = _built(tmp_path)
    dead = _dead_pid()
    for name in ("ix", "other"):  # a killed build of this index and of another one
        (tmp_path / f".{name}.tmp-{dead}" / "kg").mkdir(parents=True)
        (tmp_path / f".{name}.lock").write_text(f"pid {dead} on here\n")
    foreign = tmp_path / ".tool.lock"
    foreign.write_text("another program's lock file")  # not ours: never removed
    busy_lock = tmp_path / ".busy.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'a'); "
         "fcntl.flock(f, fcntl.LOCK_EX); print('locked', flush=True); time.sleep(60)", str(busy_lock)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        busy_tmp = tmp_path / f".busy.tmp-{holder.pid}"
        busy_tmp.mkdir()
        build_index(out, [KgSource(kb, "tsv")], [])
        assert _leftovers(tmp_path) == sorted([busy_lock.name, busy_tmp.name, foreign.name])  # live + foreign
    finally:
        holder.kill()
        holder.wait()


def test_a_second_build_is_refused_and_names_the_holder(tmp_path: Path) -> None:
    kb, out = _built(tmp_path)
    with index.build._build_lock(out.resolve()), pytest.raises(Exception, match=rf"another build .*pid {os.getpid()}"):
        build_index(out, [KgSource(kb, "tsv")], [])
    assert _leftovers(tmp_path) == []
