"""Two small ingest holes (issue 24, item 7).

- A JSONL document whose `text` (or id/title/entity) is a list or an object was indexed as its
  Python text ("['a', 'b']"); it is now rejected with file, line and the field's name.
- A TSV line of delimiters only ("\\t\\t") was dropped without a count; it is now a rejected
  line like any other malformed one, in rejects.jsonl and in the build summary.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli import main
from index.build import build_index
from index.kg_stage import KgSource
from ingest.base.progress import NullReporter
from ingest.documents import read_documents
from ingest.rejects import RejectLog
from ingest.tsv import read_tsv


def _read_jsonl(path: Path, tmp_path: Path) -> tuple[list[tuple[str, str]], list[dict[str, object]]]:
    log = RejectLog(tmp_path / "rejects.jsonl")
    docs = [(d.id, d.text) for d in read_documents(path, "jsonl", log, NullReporter())]
    log.close()
    rejects = [json.loads(line) for line in log.path.read_text().splitlines()] if log.path.exists() else []
    return docs, rejects


def test_jsonl_text_that_is_a_list_is_rejected_with_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text(
        '{"id": "a", "title": "Alpha", "text": "Alpha is first."}\n'
        '{"id": "b", "title": "Beta", "text": ["Beta is", "second."]}\n'
        '{"id": "c", "title": "Gamma", "text": {"body": "x"}}\n'
        '{"id": "d", "title": ["Delta"], "text": "Delta is fourth."}\n'
        '{"id": 5, "title": 1984, "text": "A number is a fine id or title."}\n'
        '{"id": "f", "text": "An entity list is refused.", "entity": ["Q1", "Q2"]}\n',
        encoding="utf-8",
    )
    docs, rejects = _read_jsonl(path, tmp_path)
    assert docs == [("a", "Alpha is first."), ("5", "A number is a fine id or title.")]
    assert not any("['" in text for _, text in docs)  # never the Python text of a list
    assert [(r["file"], r["line"], r["reason"]) for r in rejects] == [
        (str(path), 2, "field 'text' must be a string, got a list"),
        (str(path), 3, "field 'text' must be a string, got an object"),
        (str(path), 4, "field 'title' must be a string or a number, got a list"),
        (str(path), 6, "field 'entity' must be a string or a number, got a list"),
    ]


@pytest.mark.parametrize("line", ["\t\t", "\t", " \t \t "])
def test_a_tsv_line_of_tabs_only_is_counted_as_rejected(tmp_path: Path, line: str) -> None:
    path = tmp_path / "kb.tsv"
    path.write_text(f"a\tr\tb\n{line}\n\nb\tr\tc\n", encoding="utf-8")
    batches = list(read_tsv(path))
    rejects = [r for batch in batches for r in batch.rejects]
    assert sum(len(batch.facts) for batch in batches) == 2
    assert [(r.line, r.reason) for r in rejects] == [(2, "only empty fields")]  # the blank line 3 is no record


def test_the_build_summary_counts_the_line_of_tabs(tmp_path: Path) -> None:
    kb = tmp_path / "kb.tsv"
    kb.write_text("a\tr\tb\n\t\t\nb\tr\tc\n", encoding="utf-8")
    out = tmp_path / "ix"
    report = build_index(out, [KgSource(kb, "tsv")], [])
    assert report.rejects == 1
    assert report.stage_counts["kg"]["sources"][0]["rejects"] == 1
    rejected = [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines()]
    assert [(r["line"], r["reason"]) for r in rejected] == [(2, "only empty fields")]
    result = CliRunner().invoke(main, ["kg", "stats", "--index", str(out)])
    assert result.exit_code == 0, result.output
    assert "1 rejects" in result.output and "only empty fields" in result.output
