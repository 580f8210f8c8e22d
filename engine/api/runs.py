"""Batch runs, their evaluation and their report, as functions.

    done = batch("data/indexes/demo", "data/demo/questions.jsonl", ["io", "tog"], "data/runs/demo",
                 llm="smollm2-135m", options={"tog.depth": 1})
    scores = evaluate("data/runs/demo")
    report("data/runs/demo", "data/runs/demo/report.html")
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.api.options import method_list, settings_of

if TYPE_CHECKING:
    from engine.report.html_report import ReportStats
    from engine.runs.batch import BatchReport


def batch(index: str | Path, questions: str | Path, methods: str | Sequence[str], out: str | Path, *,
          llm: str | Path | None = None, options: Mapping[str, Any] | None = None, settings: Iterable[str] = (),
          fmt: str = "auto", limit: int | None = None, sample: int | None = None, seed: int = 0,
          workers: int = 1, cache: bool = True, force_config: bool = False, restart: bool = False,
          retry_errors: bool = False, kg_endpoint: str | None = None, plugins: Iterable[str] = (),
          shard: str | None = None, ray: str | None = None, command: list[str] | None = None) -> BatchReport:
    """Answer every selected question of `questions` with each method into `out` (`cli.py batch`):
    resumable, one record per question and method. `methods`: "io,tog" or a list; `options`:
    {"KEY" or "METHOD.KEY": value}, `settings`: `--set` strings; both checked before any question
    runs. `command` is what run.json records (default: this process's argv)."""
    from engine.runs.batch import BatchOptions, run_batch

    return run_batch(BatchOptions(
        index=Path(index), questions=Path(questions), methods=method_list(methods), out=Path(out),
        llm=None if llm is None else str(llm), fmt=fmt, limit=limit, sample=sample, seed=seed,
        workers=workers, settings=settings_of(options, settings), cache=cache, force_config=force_config,
        restart=restart, retry_errors=retry_errors, command=command, kg_endpoint=kg_endpoint,
        plugins=list(plugins), shard=shard, ray=ray,
    ))


def evaluate(run_dir: str | Path, *more_runs: str | Path, write: bool = True) -> dict[str, Any]:
    """Score batch runs (`cli.py eval --json`): one run (a run folder, or a folder of shard
    folders) gives its summary, several give {"runs": [summary, ...]}. `write`: also write each
    RUN/eval.json."""
    from engine.runs.shards import evaluate_paths

    summaries = evaluate_paths([Path(run_dir), *map(Path, more_runs)], write=write)
    return summaries[0] if len(summaries) == 1 else {"runs": summaries}


def format_evaluation(result: dict[str, Any], metrics: Iterable[str] | None = None) -> str:
    """What `cli.py eval` prints: one run's Markdown table, or several runs side by side per
    metric (`metrics`; default hits1, em, f1_tok, abstained, llm_calls, prompt_tokens)."""
    from engine.runs.eval_tables import format_comparison, format_markdown

    if "runs" in result:
        return format_comparison(result["runs"], list(metrics) if metrics else None)
    return format_markdown(result)


def report(run_dirs: str | Path | Sequence[str | Path], out: str | Path, *, prompt_chars: int = 6000,
           with_calls: bool = True) -> ReportStats:
    """Write one self-contained HTML report of batch runs (each one dataset) to `out`."""
    from engine.report.html_report import write_report

    paths = [Path(run_dirs)] if isinstance(run_dirs, str | Path) else [Path(p) for p in run_dirs]
    return write_report(paths, Path(out), prompt_chars=prompt_chars, with_calls=with_calls)


def show(run_dir: str | Path, question_id: str, method: str | None = None, *, prompts: bool = False) -> None:
    """Print one question of a run in the terminal: prediction, evidence tree, LLM calls."""
    from engine.report.terminal import show_question

    show_question(Path(run_dir), question_id, method, prompts=prompts)


def check_scores(subsets: Iterable[str] = (), ids: Iterable[str] = (), *, run: bool = True,
                 fresh: bool = False, list_only: bool = False, file: str | Path | None = None) -> int:
    """Re-run the README's evaluation numbers (bench/expected_scores.json) and compare them:
    prints OK / FAIL / MISSING per row; returns the exit status (0 only when all are OK)."""
    from engine.runs.expected_scores import check_scores as check

    return check(list(subsets), list(ids), file=None if file is None else Path(file), run=run,
                 fresh=fresh, list_only=list_only)
