"""The run folder's format (engine/runs/run_folder.py): layout, records, run.json, eval.json."""

from __future__ import annotations

import json
from pathlib import Path

from engine.runs.run_folder import (
    RUN_FILE,
    RecordWriter,
    has_run,
    latest_records,
    read_records,
    read_run,
    record_files,
    record_path,
    write_eval,
    write_run,
)


def test_record_path_follows_run_json_and_defaults_to_method_jsonl(tmp_path: Path) -> None:
    assert record_path(tmp_path, "tog") == tmp_path / "tog.jsonl"
    run = {"methods": {"tog": {"file": "tog-old.jsonl"}}}
    assert record_path(tmp_path, "tog", run) == tmp_path / "tog-old.jsonl"
    assert record_path(tmp_path, "io", run) == tmp_path / "io.jsonl"


def test_a_torn_last_line_is_reported_by_readers_and_cut_by_the_writer(tmp_path: Path) -> None:
    path = tmp_path / "io.jsonl"
    path.write_bytes(b'{"id": "q1", "answers": ["a"]}\n{"id": "q1", "answers": ["b"]}\n{"id": "q2", "ans')
    records, problems = read_records(path)
    assert [r["answers"] for r in records] == [["a"], ["b"]]
    assert problems and "torn" in problems[0]
    assert path.read_bytes().endswith(b'"ans')  # reading never modifies the file
    assert latest_records(path)["q1"]["answers"] == ["b"]  # the last record of an id

    writer = RecordWriter(path)
    assert writer.torn_bytes > 0 and writer.done == {"q1"}
    writer.append({"id": "q2", "answers": ["c"]})
    writer.close()
    assert read_records(path) == ([*records, {"id": "q2", "answers": ["c"]}], [])
    assert record_files(tmp_path) == [path]


def test_run_json_and_eval_json_round_trip(tmp_path: Path) -> None:
    assert read_run(tmp_path) is None and not has_run(tmp_path)
    write_run(tmp_path, {"localkg_run": 1, "status": "running"})
    assert has_run(tmp_path) and read_run(tmp_path) == {"localkg_run": 1, "status": "running"}
    assert not list(tmp_path.glob("*.tmp"))
    write_eval(tmp_path, {"methods": {}})
    assert json.loads((tmp_path / "eval.json").read_text(encoding="utf-8")) == {"methods": {}}
    assert (tmp_path / RUN_FILE).is_file()
