"""Expected scores (`make check-scores`): the entries file, its validation, and OK / FAIL / MISSING."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from bench.docs_hooks import DocsTableError, options_table, render, render_file
from engine.methods.registry import get as get_method
from engine.runs.expected_scores import (
    DEFAULT_FILE,
    DEFAULT_PAGE,
    EXIT_COMMAND,
    EXIT_MISMATCH,
    EXIT_OK,
    EXIT_USAGE,
    FAIL,
    MISSING,
    OK,
    ROOT,
    ExpectedScoresError,
    check,
    command_lists,
    load_entries,
    main,
    parse_entries,
    score_entries,
    select,
)

EVALUATION_PAGE = "docs/evaluation.md"  # the evaluation table, rendered from this file by bench/docs_hooks.py
DATASETS = {"MetaQA 1-hop": "metaqa-1hop", "MetaQA 2-hop": "metaqa-2hop", "MetaQA 3-hop": "metaqa-3hop",
            "PQ-3H": "pq3h"}


# ---- helpers -----------------------------------------------------------------------------------


def _entry(**changes: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": "tog-hits1", "what": "tog Hits@1 on the tiny run", "commands": ["true"], "run": "runs/a",
        "method": "tog", "metric": "hits1", "expected": 0.5, "tolerance": 0.0, "subset": ["unit"],
        "readme": "Hits@1 50.0%",
    }
    entry.update(changes)
    return {k: v for k, v in entry.items() if v is not None}


def _record(rid: str, prediction: str, answers: list[str], calls: int = 1) -> dict[str, Any]:
    return {"id": rid, "question": f"q {rid}", "answers": answers, "method": "tog", "prediction": prediction,
            "predictions": [prediction] if prediction else [], "answer_source": "kg", "paths": [],
            "llm_calls": [{"stage": "answer", "prompt_tokens": 100, "cached_tokens": 0, "completion_tokens": 5,
                           "seconds": 0.1, "cache_hit": False}] * calls,
            "seconds": 1.0, "config_hash": "h", "error": None, "extra": {}}


def _write_run(folder: Path, ids: list[str], records: dict[str, list[dict[str, Any]]]) -> None:
    """A run folder as `batch` leaves it: run.json with the question ids, one <method>.jsonl each."""
    folder.mkdir(parents=True, exist_ok=True)
    run = {"questions": {"path": "q.jsonl", "count": len(ids), "ids": ids},
           "methods": {m: {"config": {}} for m in records}, "status": "complete"}
    (folder / "run.json").write_text(json.dumps(run), encoding="utf-8")
    for method, lines in records.items():
        (folder / f"{method}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """runs/a: tog 2 of 4 right (Hits@1 0.5), 1 call a question; runs/b: tog 3 of 4, 2 calls; rag 1 of 4."""
    ids = ["q1", "q2", "q3", "q4"]
    _write_run(tmp_path / "runs" / "a", ids, {"tog": [
        _record("q1", "Paris", ["Paris"]), _record("q2", "Rome", ["Rome"]),
        _record("q3", "Oslo", ["Bern"]), _record("q4", "", ["Riga"])]})
    _write_run(tmp_path / "runs" / "b", ids, {
        "tog": [_record(i, "x", ["x"] if i != "q4" else ["y"], calls=2) for i in ids],
        "rag": [_record(i, "x", ["x"] if i == "q1" else ["y"]) for i in ids]})
    return tmp_path


def _write_entries(folder: Path, entries: list[dict[str, Any]]) -> Path:
    path = folder / "expected.json"
    path.write_text(json.dumps(entries), encoding="utf-8")
    return path


def _norm(text: str) -> str:
    return " ".join(text.split())


# ---- the checked-in file -----------------------------------------------------------------------


def test_checked_in_file_is_valid_and_has_every_subset() -> None:
    entries = load_entries(DEFAULT_FILE)
    subsets = {s for e in entries for s in e.subset}
    assert {"ci", "demo", "eval", "experiments"} <= subsets
    ci = [e for e in entries if "ci" in e.subset]
    assert ci and all("smollm2-135m" in " ".join(e.commands) for e in ci)
    assert all(e.tolerance > 0 for e in ci if e.metric != "errors"), "CI runs on another machine: it needs a tolerance"
    assert all(not c.startswith(("python ", "cli.py")) for e in entries for c in e.commands), \
        "commands call .venv/bin/python or make, from the repo root"


def test_every_readme_phrase_is_in_its_page() -> None:
    """Each row's phrase is in its page (README.md unless `page` says which docs/ page), read as
    the docs site renders it: a number shown only in a generated table is checked there."""
    pages: dict[str, str] = {}
    entries = load_entries(DEFAULT_FILE)
    assert {e.page for e in entries} > {DEFAULT_PAGE}, "the phrases moved to docs/ pages have their page"
    for entry in entries:
        if entry.page not in pages:
            pages[entry.page] = _norm(render_file(entry.page))
        assert _norm(entry.readme) in pages[entry.page], f"{entry.id}: its phrase is not in {entry.page}"


def _table_rows() -> dict[str, list[str]]:
    """The evaluation table (docs/evaluation.md as rendered): method -> cells (bold marks removed)."""
    text = render_file(EVALUATION_PAGE)
    rows: dict[str, list[str]] = {}
    for line in text.splitlines():
        cells = [c.strip().replace("*", "") for c in line.strip().strip("|").split("|")]
        if line.startswith("| method |"):
            header = cells
        elif line.startswith("| ") and len(cells) > 1 and not line.startswith("|---"):
            rows[cells[0]] = cells
        elif rows:
            break
    assert header[1:8] == [*DATASETS, "LLM calls/q", "prompt tok/q", "LLM s/q"]
    return rows


def _bounds(cell: str) -> tuple[float, float]:
    parts = [float(p) for p in re.split("[–-]", cell)]
    return parts[0], parts[-1]


def test_every_cell_of_the_evaluation_table_has_an_entry() -> None:
    by_id = {e.id: e for e in load_entries(DEFAULT_FILE)}
    rows = _table_rows()
    assert set(rows) == {"io", "cot", "rag", "tog", "tog-r"}
    for method, cells in rows.items():
        for column, short in enumerate(DATASETS.values(), start=1):
            entry = by_id[f"eval-{method}-{short}-hits1"]
            assert entry.expected == pytest.approx(float(cells[column]) / 100), entry.id
            assert (entry.metric, entry.method, entry.aggregate) == ("hits1", method, None)
        for column, metric in ((5, "llm-calls"), (6, "prompt-tokens")):
            low, high = _bounds(cells[column])
            for bound, value in (("min", low), ("max", high)):
                entry = by_id[f"eval-{method}-{metric}-{bound}"]
                assert entry.expected == pytest.approx(value) and entry.aggregate == bound, entry.id
                assert len(entry.runs) == 4


def test_expected_values_are_written_in_their_readme_phrase() -> None:
    forms = {"hits1": lambda v: {f"{100 * v:.1f}", f"{100 * v:.0f}"}, "llm_calls": lambda v: {f"{v:.1f}"},
             "prompt_tokens": lambda v: {f"{v:.0f}"}, "llm_seconds": lambda v: {f"{v:.1f}"},
             "em_tok": lambda v: {f"{100 * v:.1f}"}, "f1_tok": lambda v: {f"{100 * v:.1f}"},
             "errors": lambda v: {f"{v:.0f} errors"}, "abstained": lambda v: {f"| {v:.0f} |"},
             "path_overlap.mean_all": lambda v: {f"{100 * v:.1f}"},
             "path_overlap.mean_correct": lambda v: {f"{100 * v:.1f}"}}
    counts = lambda v: {f"{v:.0f} of", f"{v:.0f} runs", f"({v:.0f}", f"{v:.0f} ("}  # noqa: E731 - "14 of the 50", "32 (22)"
    for entry in load_entries(DEFAULT_FILE):
        if "ci" in entry.subset:
            continue  # the tiny model's numbers are not quoted in the README
        if entry.metric == "cache_hit_rate":  # the README gives the calls ("1,597 of its 1,598"), rows the rates
            assert "cache hits" in entry.readme, entry.id
            continue
        metric = entry.metric.rsplit(".", 1)[-1] if entry.metric.startswith("by.") else entry.metric
        form_of = forms.get(metric) or (counts if entry.metric == "ungrounded_rejected"
                                              or entry.metric.startswith("stops.") else None)
        assert form_of is not None, f"{entry.id}: no README form known for {entry.metric}"
        assert any(form in " ".join(entry.readme.split()) for form in form_of(entry.expected)), entry.id


# ---- validation --------------------------------------------------------------------------------


@pytest.mark.parametrize(("changes", "message"), [
    ({"expected": "0.5"}, "'expected' must be a finite number"),
    ({"expected": True}, "'expected' must be a finite number"),
    ({"tolerance": -0.1}, "'tolerance' must be >= 0"),
    ({"commands": []}, "'commands' must be a non-empty list"),
    ({"commands": "make eval"}, "'commands' must be a non-empty list"),
    ({"subset": ["ci", ""]}, "'subset' must be a non-empty string"),
    ({"metric": "hits@1"}, "'metric' is 'hits@1', not a key of the eval JSON"),
    ({"run": ["runs/a", "runs/b"]}, "'aggregate' must be one of min, max"),
    ({"run": ["runs/a"], "aggregate": "mean"}, "'aggregate' must be one of min, max"),
    ({"aggregate": "min"}, "'aggregate' is only allowed when 'run' is a list"),
    ({"method": None}, "missing field 'method'"),
    ({"expectd": 1}, "unknown field 'expectd'"),
    ({"page": "bench/results/EVAL.md"}, "'page' must be README.md or docs/<name>.md"),
    ({"page": "docs/../README.md"}, "'page' must be README.md or docs/<name>.md"),
    ({"page": "docs/no-such-page.md"}, "'page' names docs/no-such-page.md, which does not exist"),
    ({"page": ""}, "'page' must be a non-empty string"),
])
def test_a_bad_field_is_named_with_its_entry(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ExpectedScoresError) as error:
        parse_entries([_entry(id="first"), _entry(id="second", **changes)])
    assert "entry 1 (second)" in str(error.value) and message in str(error.value)


def test_file_level_errors(tmp_path: Path) -> None:
    with pytest.raises(ExpectedScoresError, match="repeats an earlier entry's id"):
        parse_entries([_entry(), _entry()])
    with pytest.raises(ExpectedScoresError, match="non-empty JSON list"):
        parse_entries({"entries": []})
    with pytest.raises(ExpectedScoresError, match="entry 0: must be an object"):
        parse_entries(["x"])
    broken = tmp_path / "broken.json"
    broken.write_text("[{", encoding="utf-8")
    with pytest.raises(ExpectedScoresError, match=re.escape("broken.json: not valid JSON")):
        load_entries(broken)
    with pytest.raises(ExpectedScoresError, match="cannot read"):
        load_entries(tmp_path / "absent.json")


def test_select_by_subset_and_id() -> None:
    entries = parse_entries([_entry(id="a", subset=["ci", "demo"]), _entry(id="b", subset=["eval"]),
                             _entry(id="c", subset=["eval"])])
    assert [e.id for e in select(entries)] == ["a", "b", "c"]
    assert [e.id for e in select(entries, ["eval"])] == ["b", "c"]
    assert [e.id for e in select(entries, ["ci", "eval"])] == ["a", "b", "c"]
    assert [e.id for e in select(entries, ["eval"], ["c"])] == ["c"]
    with pytest.raises(ExpectedScoresError, match="unknown subset nightly"):
        select(entries, ["nightly"])
    with pytest.raises(ExpectedScoresError, match="unknown id zz"):
        select(entries, ids=["zz"])
    with pytest.raises(ExpectedScoresError, match="no entry matches"):
        select(entries, ["ci"], ["b"])


def test_entries_sharing_commands_run_them_once() -> None:
    entries = parse_entries([_entry(id="a", commands=["make eval"]), _entry(id="b", commands=["make demo"]),
                             _entry(id="c", commands=["make eval"])])
    assert command_lists(entries) == [("make eval",), ("make demo",)]


# ---- scoring -----------------------------------------------------------------------------------


def test_ok_fail_and_missing_rows(runs: Path) -> None:
    entries = parse_entries([
        _entry(id="ok-hits"),                                                  # 2/4 = 0.5
        _entry(id="ok-rounded", expected=0.49, tolerance=0.01),                # within the tolerance
        _entry(id="fail-hits", expected=0.52, tolerance=0.01),                 # just outside it
        _entry(id="ok-calls", run="runs/b", metric="llm_calls", expected=2),
        _entry(id="ok-min", run=["runs/a", "runs/b"], aggregate="min", expected=0.5),
        _entry(id="ok-max", run=["runs/a", "runs/b"], aggregate="max", expected=0.75),
        _entry(id="fail-max", run=["runs/a", "runs/b"], aggregate="max", expected=0.5),
        _entry(id="missing-method", method="rag"),                             # runs/a has no rag
        _entry(id="missing-run", run="runs/nowhere"),
        _entry(id="missing-in-one", run=["runs/a", "runs/nowhere"], aggregate="min"),
        _entry(id="missing-value", metric="path_overlap.mean_correct"),        # no KG paths: None
    ])
    results = {r.entry.id: r for r in score_entries(entries, runs)}
    status = {i: r.status for i, r in results.items()}
    assert status == {"ok-hits": OK, "ok-rounded": OK, "fail-hits": FAIL, "ok-calls": OK, "ok-min": OK,
                      "ok-max": OK, "fail-max": FAIL, "missing-method": MISSING, "missing-run": MISSING,
                      "missing-in-one": MISSING, "missing-value": MISSING}
    assert results["fail-hits"].got == pytest.approx(0.5)
    assert results["ok-max"].note == "max of 2 runs, at runs/b"
    assert results["missing-method"].note == "runs/a: no rag records"
    assert results["missing-run"].note == "no run folder runs/nowhere"
    assert results["missing-run"].got is None


def test_a_run_with_unanswered_questions_is_missing(runs: Path) -> None:
    folder = runs / "runs" / "a"
    run = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    run["questions"]["ids"].append("q5")
    (folder / "run.json").write_text(json.dumps(run), encoding="utf-8")
    [result] = score_entries(parse_entries([_entry()]), runs)
    assert result.status == MISSING and "incomplete, 1 of 5 questions without a record" in result.note


def test_a_folder_without_records_is_missing(runs: Path) -> None:
    (runs / "runs" / "empty").mkdir()
    [result] = score_entries(parse_entries([_entry(run="runs/empty")]), runs)
    assert result.status == MISSING and "no record files" in result.note


def test_main_prints_a_line_per_entry_and_the_exit_code(runs: Path) -> None:
    path = _write_entries(runs, [_entry(id="good"), _entry(id="bad", expected=0.9, subset=["other"]),
                                 _entry(id="gone", run="runs/nowhere", subset=["other"])])
    out = io.StringIO()
    assert main(["--file", str(path), "--root", str(runs), "--no-run"], out=out) == EXIT_MISMATCH
    lines = out.getvalue().splitlines()
    assert [line.split()[:2] for line in lines[:3]] == [["OK", "good"], ["FAIL", "bad"], ["MISSING", "gone"]]
    assert "expected 0.9" in lines[1] and "got 0.5" in lines[1] and "tol 0" in lines[1]
    assert lines[3] == "3 entries: 1 OK, 1 FAIL, 1 MISSING"
    out = io.StringIO()
    assert main(["--file", str(path), "--root", str(runs), "--no-run", "--subset", "unit"], out=out) == EXIT_OK
    assert out.getvalue().splitlines()[-1] == "1 entries: 1 OK, 0 FAIL, 0 MISSING"
    assert main(["--file", str(path), "--root", str(runs), "--no-run", "--id", "gone"], out=io.StringIO()) == EXIT_MISMATCH
    assert main(["--file", str(path), "--root", str(runs), "--id", "nope"], out=io.StringIO()) == EXIT_USAGE
    assert main(["--file", str(runs / "absent.json")], out=io.StringIO()) == EXIT_USAGE


def test_commands_run_once_in_the_root_then_the_runs_are_scored(runs: Path) -> None:
    step = "echo step >> steps.txt"
    entries = parse_entries([_entry(id="a", commands=[step]), _entry(id="b", commands=[step], expected=0.9)])
    out = io.StringIO()
    assert check(entries, runs, out=out) == EXIT_MISMATCH
    assert (runs / "steps.txt").read_text(encoding="utf-8") == "step\n"
    assert out.getvalue().splitlines()[0] == f"$ {step}"
    assert check(entries[:1], runs, run=False, out=io.StringIO()) == EXIT_OK
    assert (runs / "steps.txt").read_text(encoding="utf-8") == "step\n"  # --no-run ran nothing


def test_a_failing_command_stops_the_check(runs: Path) -> None:
    entries = parse_entries([_entry(commands=["echo a >> log.txt", "exit 7", "echo b >> log.txt"])])
    out = io.StringIO()
    assert check(entries, runs, out=out) == EXIT_COMMAND
    assert (runs / "log.txt").read_text(encoding="utf-8") == "a\n"
    assert "command failed (exit 7): exit 7; stopped before scoring" in out.getvalue()
    assert "entries:" not in out.getvalue()


def test_fresh_removes_the_run_folders_before_the_commands(runs: Path) -> None:
    entries = parse_entries([_entry(commands=["test ! -e runs/a"])])
    assert check(entries, runs, out=io.StringIO()) == EXIT_COMMAND  # runs/a is there: the command fails
    assert (runs / "runs" / "a" / "tog.jsonl").exists()
    out = io.StringIO()
    assert check(entries, runs, fresh=True, out=out) == EXIT_MISMATCH  # removed, not made again: MISSING
    assert not (runs / "runs" / "a").exists() and "removing runs/a (--fresh)" in out.getvalue()
    assert (runs / "runs" / "b").exists()
    outside = parse_entries([_entry(run="../elsewhere")])
    with pytest.raises(ExpectedScoresError, match="not inside"):
        check(outside, runs, fresh=True, out=io.StringIO())


def test_list_runs_nothing(runs: Path) -> None:
    path = _write_entries(runs, [_entry(commands=["echo x >> listed.txt"])])
    out = io.StringIO()
    assert main(["--file", str(path), "--root", str(runs), "--list"], out=out) == EXIT_OK
    assert not (runs / "listed.txt").exists()
    assert "tog-hits1 [unit] tog hits1 = 0.5" in out.getvalue()


# ---- the CI subset, for real -------------------------------------------------------------------


@pytest.mark.slow
def test_ci_subset_reproduces_its_expected_scores() -> None:
    """What CI runs: the demo index, tog with smollm2-135m on the demo questions, compared."""
    if not (ROOT / ".venv" / "bin" / "python").exists():
        pytest.fail(f"{ROOT / '.venv'} is missing: run `make setup` first")
    out = io.StringIO()
    code = main(["--subset", "ci"], out=out)
    report = out.getvalue()
    assert code == EXIT_OK, report
    assert re.search(r"^\d+ entries: \d+ OK, 0 FAIL, 0 MISSING$", report, re.MULTILINE), report


def test_method_table_joins_run_folders_per_set(runs: Path) -> None:
    """bench.method_table: one row per set and method (first folder that has it), accuracy beside
    calls; a folder not made is listed, not fatal; an unknown metric is refused with its set."""
    from bench.method_table import format_table, method_rows, read_spec

    spec = {"title": "t", "methods": ["rag", "tog", "tog2"],
            "sets": [{"name": "S1", "metric": "hits1", "runs": [str(runs / "runs" / "a"), str(runs / "runs" / "b")]},
                     {"name": "S2", "metric": "hits1", "runs": [str(runs / "runs" / "missing")]}]}
    rows, notes = method_rows(spec)
    assert [(r["set"], r["method"], r["accuracy"], r["llm_calls"]) for r in rows] == [
        ("S1", "rag", 0.25, 1.0), ("S1", "tog", 0.5, 1.0)]  # tog from runs/a, the first that has it
    assert notes == ["S1: tog2 not run", f"S2: {runs / 'runs' / 'missing'} not run"]
    text = format_table(spec, rows, notes)
    assert "| S1 | tog | 50.0 | 1.0 |" in text and "Not run or unfinished:" in text
    bad = runs / "spec.json"
    bad.write_text(json.dumps({**spec, "sets": [{"name": "S", "metric": "f2", "runs": []}]}), encoding="utf-8")
    with pytest.raises(SystemExit, match=r"sets\[0\]\.metric 'f2'"):
        read_spec(bad)


# ---- tables the docs site renders from this file and from the method specs ---------------------


def test_a_row_without_page_is_in_the_readme_and_a_page_is_kept() -> None:
    first, second = parse_entries([_entry(id="a"), _entry(id="b", page=EVALUATION_PAGE)])
    assert (first.page, second.page) == (DEFAULT_PAGE, EVALUATION_PAGE)


def test_options_table_lists_every_key_of_the_method_spec() -> None:
    spec = get_method("tog")
    table = options_table("tog")
    for key, value in spec.defaults.items():
        assert f"| `{key}` | `{json.dumps(value)}` |" in table
    with pytest.raises(DocsTableError, match="unknown method 'nope'"):
        options_table("nope")
    for page in ("docs/methods/tog.md", "docs/methods/tog-r.md", "docs/methods/tog2.md", "docs/methods/hydra.md",
                 "docs/methods/chains.md", "docs/methods/baselines.md"):
        assert "<!-- options:" in (ROOT / page).read_text(encoding="utf-8"), page
        assert "| key | default |" in render_file(page), page


def test_table_markers_fill_cells_and_ranges_from_rows() -> None:
    entries = parse_entries([_entry(id="low", metric="llm_calls", expected=2.44), _entry(id="high", metric="llm_calls", expected=3.71),
                             _entry(id="rate", expected=0.2407), _entry(id="tokens", metric="prompt_tokens", expected=565.7)])
    page = "before\n<!-- table\n| a | b | c | d |\n|---|---|---|---|\n| {rate} | {low~high} | {low~low} | {tokens} |\n-->\nafter"
    assert render(page, entries) == "before\n| a | b | c | d |\n|---|---|---|---|\n| 24.1 | 2.4–3.7 | 2.4 | 566 |\nafter"
    assert render("no marker {rate}", entries) == "no marker {rate}"
    with pytest.raises(DocsTableError, match="no row 'gone'"):
        render("<!-- table\n| {gone} |\n-->", entries)
    with pytest.raises(DocsTableError, match="no rows nope-<set>-<method>-hits1"):
        render("<!-- method-table: nope -->", entries)


def test_method_tables_are_rendered_from_their_rows() -> None:
    text = render("<!-- method-table: table05 method=tog -->")
    lines = text.splitlines()
    assert lines[0].startswith("| set | method | accuracy (%) |")
    assert "| MetaQA 1-hop | tog | 80.0 | 2.4 | 483 | 7.2 | data/runs/eval/metaqa-1-hop |" in lines
    assert all("| tog |" in line for line in lines[2:])
