"""Terminal helpers of the command line that a notebook may use too: the rich rendering of an
answer, a printer of LLM calls as they end, and the repair of text typed in a terminal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.api.answers import Answer


def print_answer(answer: Answer) -> None:
    """Print an answer for a person: the answer first, then how it was found, then its cost."""
    from engine.questions.render import render_record

    render_record(answer.record)


def call_printer() -> Callable[[Any], None]:
    """An `on_call` callback that prints each LLM call (messages, raw reply) to stderr."""
    from engine.questions.render import call_printer as printer

    return printer()


def repair_argument(text: str) -> tuple[str, Any]:
    """A command-line argument as clean UTF-8 text, and what was repaired (falsy when nothing)."""
    from engine.questions.text import repair_argument as repair

    return repair(text)
