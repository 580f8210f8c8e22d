"""Handing questions out to workers that may die: what local worker processes (`batch --workers`)
and Ray actors (`batch --ray`) share.

The batch's parent (or Ray driver) is the only writer of records; it gives each worker one
question at a time, so when a worker dies it knows which question was lost. `DeathRule` decides
what follows: the question is handed out again, and a question that has killed two workers is
recorded as an error (`died_record`) so that the run ends; `--retry-errors` tries it again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.methods import registry
from engine.methods.context import Context
from engine.methods.shared.common import new_record
from engine.questions.record import Question
from engine.runs.answer import answer_question, stamp_gold
from ingest.base.errors import LocalkgError
from ingest.base.progress import console

# Where a finished record goes: (method, record) -> appended to RUN/<method>.jsonl by the writer.
Sink = Callable[[str, dict[str, Any]], None]

# A question is recorded as an error once this many workers died while answering it.
DEATHS_PER_QUESTION = 2


@dataclass(frozen=True)
class WorkerSetup:
    """What every worker opens for itself: plugins, then a context over the index and the model."""

    plugins: list[str]
    index: str
    llm: str | None
    cache: bool
    kg_endpoint: str | None


class BatchError(LocalkgError):
    """A batch that cannot start or go on (config mismatch, a busy run folder, dead workers)."""


def answer_one(method: str, question: Question, ctx: Context, config: dict[str, Any]) -> dict[str, Any]:
    """One record as a dict (question-level failures are in it; fatal errors raise)."""
    return answer_question(method, question, ctx, config).to_dict()


def died_record(method: str, question: Question, config: dict[str, Any], codes: list[Any]) -> dict[str, Any]:
    """The error record of a question whose worker died twice while answering it (so that the
    run ends; `--retry-errors` tries it again). `codes`: exit codes or a word on each death."""
    record = new_record(question, method)
    record.error = (f"WorkerDied: the worker process died while answering this question, twice "
                    f"({'; '.join(_death(c) for c in codes)})")
    record.config_hash = registry.config_hash(method, config)
    record.extra["config"] = config
    return stamp_gold(record, question).to_dict()


def _death(code: Any) -> str:
    """An exit code (a local process) or the cause a cluster gave (a Ray actor), as words."""
    return f"exit code {code}" if code is None or isinstance(code, int) else str(code)


@dataclass
class DeathRule:
    """Bookkeeping of worker deaths over one batch's `pending` (method, question) list."""

    pending: list[tuple[str, Question]]
    configs: dict[str, dict[str, Any]]
    workers: int
    deaths: dict[int, list[Any]] = field(default_factory=dict)  # position -> exit codes
    idle_deaths: list[Any] = field(default_factory=list)  # deaths while holding no question
    requeued: int = 0

    def died_holding(self, position: int, code: Any, sink: Sink) -> bool:
        """A worker died while answering `pending[position]`. Returns True when the question is
        to be handed out again; False when it was recorded as an error through `sink`."""
        method, question = self.pending[position]
        self.deaths.setdefault(position, []).append(code)
        if len(self.deaths[position]) >= DEATHS_PER_QUESTION:
            console.print(f"[red]{method} {question.id}[/]: a worker died on it twice; recorded as an error")
            sink(method, died_record(method, question, self.configs[method], self.deaths[position]))
            return False
        console.print(f"[yellow]{method} {question.id}[/]: its worker died ({_death(code)}); answering it again")
        self.requeued += 1
        return True

    def died_idle(self, code: Any) -> None:
        """A worker died holding no question (while loading, say): fail once more of them died
        than there are workers, since then they would die forever."""
        self.idle_deaths.append(code)
        if len(self.idle_deaths) > self.workers:
            raise BatchError(f"workers keep dying before they answer anything (exit codes "
                             f"{', '.join(str(c) for c in self.idle_deaths)}); rerun to resume")
