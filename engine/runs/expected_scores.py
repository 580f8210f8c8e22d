"""Expected scores: every evaluation number the README quotes, as data, re-run and checked.

As Pyserini does with its regression files, `bench/expected_scores.json` holds, for each number
the README states, the commands that produce it, the run folder they write, and the value.
`make check-scores` (this module's `main`) runs each distinct command list once (with the LLM
response cache, a replay takes seconds when the cache holds the replies), scores every run
folder with `evaluate_run` and prints one line per entry: OK, FAIL or MISSING.

The file is a JSON list of entries; every field is required unless marked optional:

- `id` (str, unique): the row's name, e.g. `eval-tog-metaqa-1hop-hits1`.
- `what` (str): one line saying what the number is.
- `commands` (list of str, not empty): shell commands run from the repository root, in order
  (`make eval`, `.venv/bin/python cli.py batch ...`). Entries with the same list share one run.
- `run` (str, or list of str): the run folder(s) the commands write, relative to the root.
- `aggregate` (optional; required when `run` is a list, not allowed otherwise): `min` or `max`
  over the runs, for the README's ranges ("LLM calls/q 2.4–3.7" is a `min` row of 2.4 and a
  `max` row of 3.7 over the four datasets).
- `method` (str): the method whose records are scored (`tog`, `rag`, ...).
- `metric` (str): a key of the per-method object of `cli.py eval RUN --json` (`hits1`, `em`,
  `f1`, `paper_em`, `llm_calls`, `prompt_tokens`, `errors`, ...); a dotted key reads inside a
  nested object (`path_overlap.mean_correct`, `answer_source.kg`).
- `expected` (number): the README's value in the units of the eval JSON, i.e. **rates as
  fractions in [0, 1]** (the README's "80.0%" is stored as 0.8), means per question as printed.
- `tolerance` (number >= 0): the largest accepted |got - expected|. Replays of recorded runs use
  half a unit of the README's printed precision (0.0005 for "80.0%", 0.05 for "2.5 calls", 0.5
  for "566 tokens"); rows computed afresh on another machine (CI) allow a few points.
- `subset` (list of str, not empty): the groups the row belongs to, e.g. `ci` (fast, needs no
  response cache), `demo`, `eval`, `experiments`.
- `readme` (str): the text the row backs (whitespace aside, a verbatim excerpt) of its page.
- `page` (optional, default `README.md`): the page that holds that text: `README.md` or a page
  of the documentation site, `docs/<name>.md` (or deeper under `docs/`). Tables that the site
  renders from this file (`bench/docs_hooks.py`) are read as rendered.

`batch` resumes a run folder, so commands over a complete run only score it again; `--fresh`
removes the selected entries' run folders first and every answer is computed again (from the
response cache where it holds the reply: a replay under new code). The `ci` entries remove their
own run folder in their commands.

An entry is OK when its value is within tolerance, FAIL when not, MISSING when there is nothing
to compare: no run folder, no records of the method, a run with questions still unanswered
(`missing` > 0), or a metric without a value. Exit status of `main`: 0 when every selected row
is OK, 1 when a row is FAIL or MISSING, 2 for a bad file or selection, 3 when a command failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TextIO

from engine.runs.evaluate import evaluate_run
from engine.runs.method_scores import MethodScores
from ingest.base.errors import LocalkgError

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_FILE = ROOT / "bench" / "expected_scores.json"
AGGREGATES = ("min", "max")
OK, FAIL, MISSING = "OK", "FAIL", "MISSING"
EXIT_OK, EXIT_MISMATCH, EXIT_USAGE, EXIT_COMMAND = 0, 1, 2, 3
# Float noise only: a tolerance of 0 still accepts 0.1 + 0.2 == 0.3.
EPSILON = 1e-9
# What the Makefile exports: the embedding model is read from disk, never fetched.
COMMAND_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
REQUIRED = ("id", "what", "commands", "run", "method", "metric", "expected", "tolerance", "subset", "readme")
OPTIONAL = ("aggregate", "page")
DEFAULT_PAGE = "README.md"
# The per-method keys of the eval JSON that hold numbers (or objects of numbers).
METRICS = frozenset(f.name for f in fields(MethodScores)) - {"method", "config_hashes", "missing_ids", "problems"}

Evaluator = Callable[..., dict[str, Any]]


class ExpectedScoresError(LocalkgError):
    """The file of expected scores is unreadable, an entry is malformed, or a selection is empty."""


class CommandFailed(LocalkgError):
    """A command of an entry exited with a non-zero status."""

    def __init__(self, command: str, returncode: int) -> None:
        super().__init__(f"command failed (exit {returncode}): {command}")
        self.command = command
        self.returncode = returncode


@dataclass(frozen=True)
class Entry:
    """One checked number: how to produce it, where to read it, what it must be."""

    id: str
    what: str
    commands: tuple[str, ...]
    runs: tuple[str, ...]
    aggregate: str | None
    method: str
    metric: str
    expected: float
    tolerance: float
    subset: tuple[str, ...]
    readme: str
    page: str = DEFAULT_PAGE


@dataclass(frozen=True)
class Result:
    """The outcome of one entry: OK / FAIL / MISSING, the value found and why it is missing."""

    entry: Entry
    status: str
    got: float | None = None
    note: str = ""


# ---- loading and validation ------------------------------------------------------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _text(where: str, name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ExpectedScoresError(f"{where}: field {name!r} must be a non-empty string, not {value!r}")
    return value


def _texts(where: str, name: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise ExpectedScoresError(f"{where}: field {name!r} must be a non-empty list of strings, not {value!r}")
    return tuple(_text(where, name, item) for item in value)


def _number(where: str, name: str, value: Any, *, minimum: float | None = None) -> float:
    if not _is_number(value) or value != value or value in (float("inf"), float("-inf")):
        raise ExpectedScoresError(f"{where}: field {name!r} must be a finite number, not {value!r}")
    if minimum is not None and value < minimum:
        raise ExpectedScoresError(f"{where}: field {name!r} must be >= {minimum}, not {value!r}")
    return float(value)


def _runs_and_aggregate(where: str, raw: dict[str, Any]) -> tuple[tuple[str, ...], str | None]:
    run, aggregate = raw["run"], raw.get("aggregate")
    if isinstance(run, list):
        runs = _texts(where, "run", run)
        if aggregate not in AGGREGATES:
            raise ExpectedScoresError(
                f"{where}: field 'aggregate' must be one of {', '.join(AGGREGATES)} when 'run' is a list, "
                f"not {aggregate!r}")
        return runs, aggregate
    if aggregate is not None:
        raise ExpectedScoresError(f"{where}: field 'aggregate' is only allowed when 'run' is a list of runs")
    return (_text(where, "run", run),), None


def _metric(where: str, value: Any) -> str:
    metric = _text(where, "metric", value)
    if metric.split(".", 1)[0] not in METRICS:
        raise ExpectedScoresError(
            f"{where}: field 'metric' is {metric!r}, not a key of the eval JSON; known: {', '.join(sorted(METRICS))}")
    return metric


def _page(where: str, value: Any) -> str:
    page = _text(where, "page", value)
    parts = page.split("/")
    if not (page == DEFAULT_PAGE or (len(parts) > 1 and parts[0] == "docs" and page.endswith(".md")
                                     and ".." not in parts and "" not in parts)):
        raise ExpectedScoresError(f"{where}: field 'page' must be {DEFAULT_PAGE} or docs/<name>.md, not {page!r}")
    if not (ROOT / page).is_file():
        raise ExpectedScoresError(f"{where}: field 'page' names {page}, which does not exist")
    return page


def parse_entry(raw: Any, index: int) -> Entry:
    """One entry of the file, checked field by field; errors name the entry and the field."""
    if not isinstance(raw, dict):
        raise ExpectedScoresError(f"entry {index}: must be an object, not {type(raw).__name__}")
    label = raw.get("id")
    where = f"entry {index} ({label})" if isinstance(label, str) and label else f"entry {index}"
    missing = [name for name in REQUIRED if name not in raw]
    if missing:
        raise ExpectedScoresError(f"{where}: missing field {', '.join(repr(m) for m in missing)}")
    unknown = sorted(set(raw) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise ExpectedScoresError(f"{where}: unknown field {', '.join(repr(u) for u in unknown)}")
    runs, aggregate = _runs_and_aggregate(where, raw)
    return Entry(
        id=_text(where, "id", raw["id"]),
        what=_text(where, "what", raw["what"]),
        commands=_texts(where, "commands", raw["commands"]),
        runs=runs,
        aggregate=aggregate,
        method=_text(where, "method", raw["method"]),
        metric=_metric(where, raw["metric"]),
        expected=_number(where, "expected", raw["expected"]),
        tolerance=_number(where, "tolerance", raw["tolerance"], minimum=0.0),
        subset=_texts(where, "subset", raw["subset"]),
        readme=_text(where, "readme", raw["readme"]),
        page=_page(where, raw.get("page", DEFAULT_PAGE)),
    )


def parse_entries(data: Any) -> list[Entry]:
    """Every entry of a decoded file; ids must be unique."""
    if not isinstance(data, list) or not data:
        raise ExpectedScoresError("the file must hold a non-empty JSON list of entries")
    entries = [parse_entry(raw, index) for index, raw in enumerate(data)]
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        if entry.id in seen:
            raise ExpectedScoresError(f"entry {index} ({entry.id}): field 'id' repeats an earlier entry's id")
        seen.add(entry.id)
    return entries


def load_entries(path: Path) -> list[Entry]:
    """Read and validate a file of expected scores."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ExpectedScoresError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise ExpectedScoresError(f"{path}: not valid JSON: {exc}") from None
    try:
        return parse_entries(data)
    except ExpectedScoresError as exc:
        raise ExpectedScoresError(f"{path}: {exc}") from None


def select(entries: Sequence[Entry], subsets: Iterable[str] = (), ids: Iterable[str] = ()) -> list[Entry]:
    """The entries in any of `subsets` (all when none) and with one of `ids` (all when none)."""
    subsets, ids = list(subsets), list(ids)
    known_subsets = {s for entry in entries for s in entry.subset}
    unknown = [s for s in subsets if s not in known_subsets]
    if unknown:
        raise ExpectedScoresError(f"unknown subset {', '.join(unknown)}; known: {', '.join(sorted(known_subsets))}")
    known_ids = {entry.id for entry in entries}
    unknown = [i for i in ids if i not in known_ids]
    if unknown:
        raise ExpectedScoresError(f"unknown id {', '.join(unknown)}")
    chosen = [e for e in entries
              if (not subsets or set(e.subset) & set(subsets)) and (not ids or e.id in ids)]
    if not chosen:
        raise ExpectedScoresError("no entry matches the given --subset and --id together")
    return chosen


# ---- running the commands --------------------------------------------------------------------


def command_lists(entries: Iterable[Entry]) -> list[tuple[str, ...]]:
    """The distinct command lists of `entries`, in the order they first appear."""
    return list(dict.fromkeys(entry.commands for entry in entries))


def run_commands(commands: Sequence[str], root: Path, out: TextIO = sys.stdout) -> None:
    """Run shell commands in `root` one after the other; output streams through. Raises CommandFailed."""
    env = {**os.environ, **{k: os.environ.get(k, v) for k, v in COMMAND_ENV.items()}}
    shell = shutil.which("bash")
    for command in commands:
        print(f"$ {command}", file=out, flush=True)
        returncode = subprocess.run(command, shell=True, cwd=root, env=env, executable=shell, check=False).returncode
        if returncode != 0:
            raise CommandFailed(command, returncode)


# ---- scoring ---------------------------------------------------------------------------------


def _lookup(scores: dict[str, Any], metric: str) -> Any:
    value: Any = scores
    for key in metric.split("."):
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def _read_run(run: str, root: Path, evaluate: Evaluator, summaries: dict[str, Any]) -> dict[str, Any] | str:
    """A run's eval summary (memoised in `summaries`), or why there is none."""
    if run not in summaries:
        folder = root / run
        if not folder.is_dir():
            summaries[run] = f"no run folder {run}"
        else:
            try:
                summaries[run] = evaluate(folder, write=False)
            except LocalkgError as exc:
                summaries[run] = f"{run}: {exc}"
    return summaries[run]


def _value(entry: Entry, run: str, root: Path, evaluate: Evaluator,
           summaries: dict[str, Any]) -> tuple[float | None, str]:
    """One run's value of the entry's metric, or (None, why it is missing)."""
    summary = _read_run(run, root, evaluate, summaries)
    if isinstance(summary, str):
        return None, summary
    scores = (summary.get("methods") or {}).get(entry.method)
    if scores is None:
        return None, f"{run}: no {entry.method} records"
    if scores.get("missing"):
        return None, f"{run}: {entry.method} incomplete, {scores['missing']} of {scores.get('expected')} questions without a record"
    value = _lookup(scores, entry.metric)
    if not _is_number(value):
        return None, f"{run}: {entry.method} has no {entry.metric} value ({value!r})"
    return float(value), ""


def score_entry(entry: Entry, root: Path, evaluate: Evaluator = evaluate_run,
                summaries: dict[str, Any] | None = None) -> Result:
    """Compare one entry with its run(s); `summaries` memoises evaluations across entries."""
    summaries = {} if summaries is None else summaries
    values: list[tuple[float, str]] = []
    for run in entry.runs:
        value, why = _value(entry, run, root, evaluate, summaries)
        if value is None:
            return Result(entry, MISSING, None, why)
        values.append((value, run))
    note = ""
    if entry.aggregate is None:
        got = values[0][0]
    else:
        got, at = (min if entry.aggregate == "min" else max)(values, key=lambda pair: pair[0])
        note = f"{entry.aggregate} of {len(values)} runs, at {at}"
    within = abs(got - entry.expected) <= entry.tolerance + EPSILON * max(1.0, abs(entry.expected))
    return Result(entry, OK if within else FAIL, got, note)


def score_entries(entries: Iterable[Entry], root: Path, evaluate: Evaluator = evaluate_run) -> list[Result]:
    """Every entry's result; each run folder is evaluated once."""
    summaries: dict[str, Any] = {}
    return [score_entry(entry, root, evaluate, summaries) for entry in entries]


# ---- report ----------------------------------------------------------------------------------


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4f}".rstrip("0").rstrip(".") if value != int(value) else str(int(value))


def format_results(results: Sequence[Result]) -> list[str]:
    """One aligned line per result, then a count line."""
    width = max((len(r.entry.id) for r in results), default=0)
    metric_width = max((len(r.entry.metric) for r in results), default=0)
    lines = []
    for r in results:
        line = (f"{r.status:<7} {r.entry.id:<{width}}  {r.entry.metric:<{metric_width}}  "
                f"expected {_fmt(r.entry.expected):<8} got {_fmt(r.got):<8} tol {_fmt(r.entry.tolerance)}")
        lines.append(f"{line}  ({r.note})" if r.note else line)
    counts = {status: sum(r.status == status for r in results) for status in (OK, FAIL, MISSING)}
    lines.append(f"{len(results)} entries: " + ", ".join(f"{n} {status}" for status, n in counts.items()))
    return lines


def exit_code(results: Sequence[Result]) -> int:
    """0 when every result is OK, else 1."""
    return EXIT_OK if results and all(r.status == OK for r in results) else EXIT_MISMATCH


def remove_runs(entries: Iterable[Entry], root: Path, out: TextIO = sys.stdout) -> None:
    """Delete the entries' run folders (inside `root` only), so their commands answer afresh."""
    base = root.resolve()
    for run in dict.fromkeys(run for entry in entries for run in entry.runs):
        folder = (root / run).resolve()
        if folder == base or base not in folder.parents:
            raise ExpectedScoresError(f"run folder {run} is not inside {root}: not removed")
        if folder.is_dir():
            print(f"removing {run} (--fresh)", file=out, flush=True)
            shutil.rmtree(folder)


def check(entries: Sequence[Entry], root: Path = ROOT, *, run: bool = True, fresh: bool = False,
          out: TextIO = sys.stdout, evaluate: Evaluator = evaluate_run) -> int:
    """Run each distinct command list once (unless `run` is false), score, print; the exit status.

    Commands resume a run folder that is already complete (`batch` answers only what is missing),
    so without `fresh` an existing run is scored as it is; `fresh` removes the entries' run
    folders first, and every answer is computed again (from the response cache where it can).
    """
    if run:
        if fresh:
            remove_runs(entries, root, out)
        for commands in command_lists(entries):
            try:
                run_commands(commands, root, out)
            except CommandFailed as exc:
                print(f"check-scores: {exc}; stopped before scoring", file=out, flush=True)
                return EXIT_COMMAND
    results = score_entries(entries, root, evaluate)
    for line in format_results(results):
        print(line, file=out, flush=True)
    return exit_code(results)


# ---- command line ----------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The options of `make check-scores` / `python -m engine.runs.expected_scores`."""
    parser = argparse.ArgumentParser(
        prog="check-scores",
        description="Re-run the README's evaluation numbers (bench/expected_scores.json) and compare them.")
    parser.add_argument("--file", type=Path, default=DEFAULT_FILE, help="entries file (default: %(default)s)")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="repository root: commands run and run folders are read there (default: %(default)s)")
    parser.add_argument("--subset", action="append", default=[], metavar="NAME",
                        help="only entries of this subset (repeatable: any of them), e.g. ci, demo, eval, experiments")
    parser.add_argument("--id", action="append", default=[], dest="ids", metavar="ID",
                        help="only this entry (repeatable)")
    when = parser.add_mutually_exclusive_group()
    when.add_argument("--no-run", action="store_true", help="do not run the commands; score the run folders as they are")
    when.add_argument("--fresh", action="store_true",
                      help="remove the selected entries' run folders first, so every answer is computed again "
                           "(from the LLM response cache where it holds the reply); without it a complete run is "
                           "only scored again")
    parser.add_argument("--list", action="store_true", help="list the selected entries and their commands, run nothing")
    return parser


def _list(entries: Sequence[Entry], out: TextIO) -> None:
    for entry in entries:
        runs = ", ".join(entry.runs)
        where = f"{entry.aggregate} over {runs}" if entry.aggregate else runs
        print(f"{entry.id} [{','.join(entry.subset)}] {entry.method} {entry.metric} = {_fmt(entry.expected)} "
              f"± {_fmt(entry.tolerance)} in {where}: {entry.what}", file=out)
    for commands in command_lists(entries):
        print("commands: " + " && ".join(commands), file=out)


def check_scores(subsets: Iterable[str] = (), ids: Iterable[str] = (), *, file: Path | None = None,
                 root: Path = ROOT, run: bool = True, fresh: bool = False, list_only: bool = False,
                 out: TextIO = sys.stdout) -> int:
    """Select entries of `file` (default bench/expected_scores.json), then list them, or run their
    commands (unless `run` is false) and score them; the exit status (0 only when all are OK).
    A bad file or selection is printed to stderr and gives EXIT_USAGE."""
    if fresh and not run:
        print("check-scores: --fresh and --no-run exclude each other", file=sys.stderr)
        return EXIT_USAGE
    try:
        entries = select(load_entries(DEFAULT_FILE if file is None else file), subsets, ids)
    except ExpectedScoresError as exc:
        print(f"check-scores: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if list_only:
        _list(entries, out)
        return EXIT_OK
    try:
        return check(entries, root, run=run, fresh=fresh, out=out)
    except ExpectedScoresError as exc:
        print(f"check-scores: {exc}", file=sys.stderr)
        return EXIT_USAGE


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout) -> int:
    """Command line entry; returns the exit status (0 only when every selected entry is OK)."""
    args = build_parser().parse_args(argv)
    return check_scores(args.subset, args.ids, file=args.file, root=args.root, run=not args.no_run,
                        fresh=args.fresh, list_only=args.list, out=out)


if __name__ == "__main__":
    raise SystemExit(main())
