"""No prompt example can become an answer.

A small model that is unsure copies the answer of its prompt's example (`hydra` answered
"Tokyo", its example's answer, 4 times on AdvHotpotQA). So every name in the examples of every
prompt module (`engine/methods/*prompts*.py`) is listed in `prompts.example_answers()`, and
`prompts.is_prompt_example` flags an answer that is one of them while the evidence does not hold
it (engine/runs/answer.py refuses such a prediction of a retrieval method). The test reads every system message and builds every user
message (with dummy inputs), pulls the example answers and example entities out of the
examples' text, and checks them against the registry; other method modules hold no prompt text.
"""

from __future__ import annotations

import ast
import collections.abc
import importlib
import inspect
import json
import re
import typing
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from engine.methods.shared.prompts import example_answers, is_prompt_example

REPO = Path(__file__).resolve().parents[1]
METHODS = REPO / "engine" / "methods"
PROMPT_MODULES = sorted(".".join(p.relative_to(METHODS).with_suffix("").parts) for p in METHODS.rglob("*prompts*.py"))
ANSWER_KEYS = ("answer", "entities")  # reply fields that name an answer (or an entity chosen as one)


def prompt_modules() -> list[ModuleType]:
    return [importlib.import_module(f"engine.methods.{name}") for name in PROMPT_MODULES]


def system_prompts() -> dict[str, str]:
    """Every fixed system message: the `*_SYSTEM` strings of the prompt modules."""
    return {f"{m.__name__}.{name}": value for m in prompt_modules() for name, value in vars(m).items()
            if name.endswith("_SYSTEM") and isinstance(value, str)}


DUMMY_BY_NAME: dict[str, Any] = {"sources": ["kg", "wiki", "web"]}  # hydra shows known source names


def _dummy(annotation: Any, name: str) -> Any:
    """A dummy value of a builder parameter's type (str, int, bool, sequences, tuples)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if name in DUMMY_BY_NAME:
        return DUMMY_BY_NAME[name]
    if annotation is str:
        return f"input {name}"
    if annotation is bool:
        return True
    if annotation is int:
        return 2
    if origin is tuple:
        return tuple(_dummy(a, name) for a in args)
    if origin in (list, collections.abc.Sequence):
        return [_dummy(args[0], f"{name} {i}") for i in (1, 2)]
    raise TypeError(f"no dummy value for {name}: {annotation}")


def user_prompts() -> dict[str, str]:
    """Every user message the prompt modules build (`*_user`), from dummy inputs."""
    built = {}
    for module in prompt_modules():
        for name, fn in vars(module).items():
            if name.endswith("_user") and inspect.isfunction(fn) and fn.__module__ == module.__name__:
                hints = typing.get_type_hints(fn)
                kwargs = {p: _dummy(hints[p], p) for p in inspect.signature(fn).parameters}
                built[f"{module.__name__}.{name}"] = fn(**kwargs)
    return built


def _example_part(text: str) -> str:
    """The text of a prompt from its first example on ("" when it has none)."""
    found = re.search(r"^Examples?\.", text, re.MULTILINE)
    return text[found.start():] if found else ""


def _answer_values(reply: Any) -> list[str]:
    """The strings an example reply puts in an answer field, at any depth."""
    found: list[str] = []
    if isinstance(reply, dict):
        for key, value in reply.items():
            if key in ANSWER_KEYS:
                found.extend(v for v in ([value] if isinstance(value, str) else value) if isinstance(v, str))
            else:
                found.extend(_answer_values(value))
    elif isinstance(reply, list):
        for item in reply:
            found.extend(_answer_values(item))
    return found


def example_replies(text: str) -> list[Any]:
    """The example replies of a prompt: the JSON lines of its example part."""
    return [json.loads(line) for line in _example_part(text).splitlines() if line.startswith("{")]


def example_names(text: str) -> set[str]:
    """The entity names an example's input shows: triple heads and tails, the {sets} of a path,
    the ends of a chain, and the lines of an entity list."""
    names: set[str] = set()
    lines = [line for line in _example_part(text).splitlines() if not line.startswith("{")]
    listing = False  # inside an "Entities:" list, one name a line
    for line in lines:
        for head, _, tail in re.findall(r"\(([^(),]+), ([^(),]+), ([^(),]+)\)", line):
            names.update(n for n in (head, tail) if n != "?")
        for group in re.findall(r"\{([^{}]+)\}", line):
            names.update(group.split(", "))
        if " -> " in line:
            steps = line.split(" -> ")
            names.add(steps[0].removeprefix("Chains:").strip())
            names.update(s.strip() for s in steps[-1].split(";"))
        entity = re.match(r"Entit(?:y|ies)(?: \d+)?: (.+)", line)
        if entity:
            names.update(n.strip() for n in entity.group(1).split(","))
        if ":" in line:
            listing = line == "Entities:"
        elif listing and line[:1].isupper():  # a concept such as "island" is no name
            names.add(line.strip())
    return {n for n in names if n}


def example_answers_in(text: str) -> set[str]:
    return {a for reply in example_replies(text) for a in _answer_values(reply) if a}


def stray_names(text: str) -> list[str]:
    """Capitalised words inside the example's sentences once the registered names are taken out
    (a word that starts a line, a JSON string, a sentence or a labelled field is no name): the
    names of free text (reasoning, facts, clues, passages) that the structured reads miss."""
    part = _example_part(text)
    for name in sorted(example_answers(), key=len, reverse=True):  # "Inter Miami" before "Miami"
        part = part.replace(name, "")
    found = []
    for word in re.finditer(r"\b[A-Z][A-Za-z]+\b", part):
        before = part[: word.start()].rstrip(" ")
        if not before or before[-1] in '\n".:{[(' or re.search(r"\b[SP]\d$|\]$", before):
            continue
        found.append(word.group())
    return found


# ---- the registry covers every example --------------------------------------------------------


def test_every_example_answer_and_name_is_registered() -> None:
    registry = example_answers()
    assert registry and all(isinstance(n, str) and n for n in registry)
    answers: set[str] = set()
    for key, text in system_prompts().items():
        if _example_part(text):
            assert example_replies(text), f"{key}: an example without a JSON reply"
        found = example_answers_in(text)
        assert found <= registry, f"{key}: example answers not in prompts.EXAMPLE_NAMES: {found - registry}"
        shown = example_names(text)
        assert shown <= registry, f"{key}: example entities not in prompts.EXAMPLE_NAMES: {shown - registry}"
        assert stray_names(text) == [], f"{key}: names in the example text not in prompts.EXAMPLE_NAMES"
        answers |= found | shown
    # the walk really read the examples: the hydra/ToG/CoT answers and their evidence
    assert {"Tokyo", "Frankenstein", "Indonesia", "David Beckham", "Leonardo da Vinci"} <= answers
    assert len(system_prompts()) >= 19


def test_the_extraction_sees_a_real_example_answer() -> None:
    """The registry check can fail: an example with names nobody registered is caught by each of
    the three reads."""
    leaky = ('You answer.\nExample.\nP1 {Casablanca} -directed by-> {Michael Curtiz}\n'
             'Question: where was the director of Casablanca born\n'
             '{"facts": "Casablanca was directed by Michael Curtiz, born in Budapest.", "answer": "Budapest"}')
    assert example_answers_in(leaky) == {"Budapest"}
    assert example_names(leaky) == {"Casablanca", "Michael Curtiz"}
    assert {"Casablanca", "Curtiz", "Budapest"} <= set(stray_names(leaky))
    assert not (example_answers_in(leaky) | example_names(leaky)) <= example_answers()


def test_user_messages_carry_only_their_inputs() -> None:
    """Every user message builder runs, and none adds an example of its own."""
    built = user_prompts()
    assert len(built) >= 16 and "engine.methods.hydra.prompts.answer_user" in built
    for key, text in built.items():
        assert isinstance(text, str) and "input " in text, key
        assert not [n for n in example_answers() if n in text], key


def test_no_other_method_module_holds_a_prompt() -> None:
    """Prompts live in the prompt modules only, where the checks above see them."""
    paths = sorted(METHODS.rglob("*.py"))
    assert len(paths) > 40  # the walk reaches the families' sub-packages
    for path in paths:
        if ".".join(path.relative_to(METHODS).with_suffix("").parts) in PROMPT_MODULES:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert "Reply with JSON" not in node.value and "Example." not in node.value, path.name


# ---- the prediction filter --------------------------------------------------------------------


def test_a_copied_example_is_flagged_unless_the_evidence_holds_it() -> None:
    tokyo = {"Tokyo"}  # the measured case: hydra's old example answer
    assert is_prompt_example("Tokyo", ["Akira Kurosawa was born in Shinagawa."], tokyo)
    assert is_prompt_example("tokyo.", [], tokyo)
    assert is_prompt_example("Tokyo, Japan", ["born in Japan"], tokyo)
    assert is_prompt_example("Kyoto and Tokyo", ["Kyoto"], tokyo)
    assert not is_prompt_example("Tokyo", ["Akira Kurosawa was born in Tokyo."], tokyo)
    assert not is_prompt_example("Kyoto", ["nothing"], tokyo)
    assert not is_prompt_example("Tokyo Tower", [], tokyo)  # another name, not the example


@pytest.mark.parametrize("name", sorted(example_answers()))
def test_every_registered_example_is_flagged_without_support(name: str) -> None:
    assert is_prompt_example(name, ["The page is about something else."])
    assert is_prompt_example(f"the {name.lower()}", [])
    assert not is_prompt_example(name, [f"The page says {name} here."])


def test_real_answers_pass_the_filter() -> None:
    for answer in ("Paris", "Kyoto", "1951", "", "Leonardo", "Japanese", "Tokyo Tower"):
        assert not is_prompt_example(answer, []), answer


# ---- the filter at the one error boundary (engine/runs/answer.py) -----------------------------


def _record(predictions: list[str], sentences: list[str]) -> Any:
    from engine.access.graph import EvidencePath
    from engine.questions.record import AnswerRecord

    paths = [EvidencePath(source="wiki", sentences=sentences, chunk_ids=["c1"], titles=["Some Page"])]
    return AnswerRecord("q", "where?", ["Osaka"], "rag", prediction=predictions[0] if predictions else "",
                        predictions=list(predictions), answer_source="doc", paths=paths)


def test_a_retrieval_method_never_answers_an_unsupported_example() -> None:
    from engine.runs.answer import refuse_prompt_examples

    record = _record(["Tokyo", "Osaka"], ["The studio moved to Osaka in 1961."])
    refuse_prompt_examples(record)
    assert record.prediction == "Osaka" and record.extra["refused_prompt_examples"] == ["Tokyo"]
    alone = _record(["Tokyo"], ["The studio moved to Osaka in 1961."])
    refuse_prompt_examples(alone)
    assert alone.abstained and alone.prediction == "" and alone.answer_source == "none"
    held = _record(["Tokyo"], ["The studio moved to Tokyo in 1961."])
    refuse_prompt_examples(held)
    assert held.prediction == "Tokyo" and not held.abstained
    no_evidence = _record(["Tokyo"], [])
    no_evidence.paths = []  # io / cot: the model's own knowledge, kept
    refuse_prompt_examples(no_evidence)
    assert no_evidence.prediction == "Tokyo"
