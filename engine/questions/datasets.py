"""Question files of every benchmark the project uses, read into `Question`s.

Formats (`detect_format` picks one from the file; `--format` overrides):

- `metaqa`: `question with [topic entity]<TAB>ans1|ans2|...`. A sibling `<stem>_qtype.txt`
  (MetaQA's `qa_dev_qtype.txt`) gives each line's path type (`director_to_movie_to_language`),
  turned into gold relations (`directed_by`, `in_language`). Answers are distinct answers.
- `pathquestion`: `question<TAB>answer(a1/a2/)<TAB>s#r1#e1#r2#...#<end>#answer`; the topic
  entity is `s`, the gold relation path `r1, r2, ...`.
- `json`: a JSON list of objects (or an object holding such a list): ToG's, ToG-2's and
  HydraRAG's files. Fields are found by name; see `question_from_object`.
- `jsonl`: one such object per line, e.g. `{id, question, answers, topic_entities?}`.

Ids: the file's own id field when present, else `<file stem>-<line number>` (text files and
JSONL: the 1-based line; a JSON list: the 1-based position). MetaQA's files are all named
`qa_dev.txt`, so their ids carry the hop folder too: `2-hop-qa_dev-17`. Ids are stable across
runs and unique within a file (a clash is an error).

Topic entities are given as names (they resolve in any index); the ids the file pairs them with
(Freebase MIDs, Wikidata QIDs) are kept in `extra["topic_entity_ids"]` as {id: name}.
Alias groups (ToG's `alias` lists, CWQ's `{answer, aliases}`) go to `extra["answer_groups"]`;
`answers` is always the flat list of every accepted name.

Text faults are repaired, not refused, so one bad question never stops the others: bytes that
are not UTF-8, lone surrogates (a JSON `"\\ud800"` escape) and control characters other than tab,
newline and carriage return become U+FFFD (`engine/questions/text.py`), in every field (ids,
answers, topic entities too). Each repair is a warning on stderr naming the file and line (in a
JSON list, bad bytes by line, the rest by item; the first 5 of a file, then a count) and is noted
in the question's `extra["text_repaired"]`. JSON strings may hold raw control characters (they are
read, then repaired). Lines end at \\n, \\r\\n or \\r, as in Python's text mode. What stays an
error (an `InputError` naming the file and line, or item): a line of the wrong shape (fields,
invalid JSON, no question text), an empty question, an id twice.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

from engine.questions.record import Question
from engine.questions.text import Repairs, decode_lines, repair_strings, repair_text
from ingest.base.errors import InputError
from ingest.base.progress import console

FORMATS = ("metaqa", "pathquestion", "json", "jsonl")

# Field names, in order of preference.
_QUESTION_KEYS = ("question", "sentence", "claim", "input", "RawQuestion", "ProcessedQuestion", "query")
_ID_KEYS = ("id", "ID", "qid", "qas_id", "ex_id", "QuestionId", "question_id")
_TOPIC_KEYS = ("topic_entities", "topic_entity", "qid_topic_entity", "topic_entity_ids", "QID", "entities")
_EXTRA_KEYS = (
    "hops", "needs", "relation", "compositionality_type", "level", "function", "wikipedia_title",
    "template_questions", "webqsp_ID", "verifiable", "entity", "machine_question",
)
# MetaQA path types: an entity-type pair -> the KB relation between them.
_METAQA_RELATION = {
    "director": "directed_by",
    "actor": "starred_actors",
    "writer": "written_by",
    "genre": "has_genre",
    "language": "in_language",
    "year": "release_year",
    "tags": "has_tags",
    "tag": "has_tags",
    "imdbrating": "has_imdb_rating",
    "imdbvotes": "has_imdb_votes",
}
_BRACKETED = re.compile(r"\[([^\[\]]+)\]")
_FREEBASE_RELATION = re.compile(r"(?<![\w.])(?:ns)?:([a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+)")
_WIKIDATA_RELATION = re.compile(r"\b(?:wdt|p|ps|pq|psn|psv|pqv|pr):(P\d+)\b")
_HOP_FOLDER = re.compile(r"\d+-hop")
_SHOWN_REPAIRS = 5  # warnings printed per file; the rest are counted

# What a reader yields: where the question is ("FILE:LINE" or "FILE: item N"), the question as
# read, and the text repairs its bytes needed so far.
_Read = tuple[str, Question, Repairs]


def detect_format(path: Path | str) -> str:
    """The format of a question file, from its name and first line."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path}: expected a question file, got a folder")
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    first = _first_line(path)
    if suffix == ".json" or first.startswith("{") or (first.startswith("[") and not _bracketed_text_line(first)):
        if first.startswith("{") and _is_jsonl(path):
            return "jsonl"
        return "json"
    fields = first.split("\t")
    if len(fields) == 3 and "#" in fields[2] and fields[1].endswith(")"):
        return "pathquestion"
    if len(fields) == 2:
        return "metaqa"
    raise InputError(
        f"{path}: cannot tell the question format from its first line; "
        f"give one of {', '.join(FORMATS)} (--format)"
    )


def read_questions(path: Path | str, fmt: str = "auto") -> list[Question]:
    """Every question of a file, in file order; errors name the file and line. Text faults (bytes
    that are not UTF-8, lone surrogates, control characters) are repaired with a warning naming
    the file and line; see the module docstring."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such question file")
    fmt = detect_format(path) if fmt == "auto" else fmt
    readers = {"metaqa": _read_metaqa, "pathquestion": _read_pathquestion, "json": _read_json, "jsonl": _read_jsonl}
    if fmt not in readers:
        raise InputError(f"unknown question format {fmt!r}; use auto or one of {', '.join(FORMATS)}")
    notes: list[str] = []
    questions = [_repaired(where, question, repairs, notes) for where, question, repairs in readers[fmt](path, notes)]
    _warn(path, notes)
    seen: dict[str, int] = {}
    for position, question in enumerate(questions, 1):
        if question.id in seen:
            raise InputError(f"{path}: question id {question.id!r} appears twice (items {seen[question.id]} and {position})")
        seen[question.id] = position
        question.extra.setdefault("format", fmt)
    return questions


def _repaired(where: str, question: Question, repairs: Repairs, notes: list[str]) -> Question:
    """`question` with every string field repaired (`repair_text`); a repair becomes a note."""
    fixed = Question(
        id=repair_text(question.id, repairs),
        question=repair_text(question.question, repairs),
        answers=[repair_text(a, repairs) for a in question.answers],
        topic_entities=[repair_text(t, repairs) for t in question.topic_entities],
        gold_relations=None if question.gold_relations is None else
        [repair_text(r, repairs) for r in question.gold_relations],
        extra=repair_strings(question.extra, repairs),
    )
    if repairs:
        fixed.extra["text_repaired"] = str(repairs)
        notes.append(f"{where}: {repairs}")
    return fixed


def _warn(path: Path, notes: list[str]) -> None:
    """The first repairs of a file on stderr, then how many more there were."""
    for note in notes[:_SHOWN_REPAIRS]:
        console.print(f"warning: {note}", style="yellow", markup=False, highlight=False, soft_wrap=True)
    if len(notes) > _SHOWN_REPAIRS:
        console.print(f"warning: {path}: {len(notes) - _SHOWN_REPAIRS} more lines or items repaired the same way",
                      style="yellow", markup=False, highlight=False, soft_wrap=True)


# ---- text formats --------------------------------------------------------------------------


def _first_line(path: Path) -> str:
    with path.open("r", encoding="utf-8", errors="replace") as handle:
        for line in handle:
            text = line.strip("\r\n").lstrip("\ufeff").lstrip()
            if text.strip():
                return text
    raise InputError(f"{path}: empty question file")


def _is_jsonl(path: Path) -> bool:
    """A file of several lines that each parse as a JSON object."""
    with path.open("r", encoding="utf-8", errors="replace") as handle:
        lines = [line for line in (next(handle, "") for _ in range(3)) if line.strip()]
    try:
        return len(lines) > 1 and all(isinstance(json.loads(line, strict=False), dict) for line in lines)
    except (ValueError, RecursionError):
        return False


def _bracketed_text_line(line: str) -> bool:
    """A MetaQA line whose question starts with its topic entity (`[Claire Skinner] appears in
    which movies<TAB>Life Is Sweet`; 432 of the 1-hop dev questions): it has a tab, a `[...]`
    pair before the first tab, and is not JSON itself."""
    head, tab, _ = line.partition("\t")
    if not tab or not _BRACKETED.search(head):
        return False
    try:
        json.loads(line, strict=False)
    except (ValueError, RecursionError):
        return True
    return False


def _lines(path: Path) -> Iterator[tuple[int, str, Repairs]]:
    """Non-blank lines with their 1-based numbers and the repairs their bytes needed (bytes
    that are not UTF-8 become U+FFFD: the line is still read)."""
    for number, (text, repairs) in enumerate(decode_lines(path.read_bytes()), 1):
        if number == 1:
            text = text.lstrip("\ufeff")
        if text.strip():
            yield number, text, repairs


def _id_prefix(path: Path, fmt: str) -> str:
    if fmt == "metaqa" and _HOP_FOLDER.fullmatch(path.parent.name):
        return f"{path.parent.name}-{path.stem}"
    return path.stem


def metaqa_relations(qtype: str) -> list[str]:
    """Gold relation path of a MetaQA path type: `movie_to_director_to_movie_to_genre` ->
    [directed_by, directed_by, has_genre] (direction is not kept)."""
    kinds = qtype.strip().split("_to_")
    relations = []
    for a, b in pairwise(kinds):
        other = b if a == "movie" else a
        relation = _METAQA_RELATION.get(other)
        if relation is None:
            raise ValueError(f"unknown MetaQA path step {a}_to_{b}")
        relations.append(relation)
    return relations


def _read_qtypes(path: Path) -> dict[int, str]:
    qtype_path = path.with_name(f"{path.stem}_qtype{path.suffix}")
    if not qtype_path.exists():
        return {}
    return {number: text for number, text, _ in _lines(qtype_path)}


def _read_metaqa(path: Path, notes: list[str]) -> Iterator[_Read]:
    qtypes = _read_qtypes(path)
    prefix = _id_prefix(path, "metaqa")
    for number, text, repairs in _lines(path):
        fields = text.split("\t")
        if len(fields) != 2:
            raise InputError(f"{path}:{number}: expected 'question<TAB>answers', got {len(fields)} fields")
        question, answer_field = fields[0].strip(), fields[1]
        if not question:
            raise InputError(f"{path}:{number}: empty question")
        extra: dict[str, Any] = {"task": "qa"}
        gold_relations = None
        if number in qtypes:
            extra["qtype"] = qtypes[number].strip()
            try:
                gold_relations = metaqa_relations(extra["qtype"])
            except ValueError as exc:
                raise InputError(f"{path.with_name(path.stem + '_qtype' + path.suffix)}:{number}: {exc}") from None
        yield f"{path}:{number}", Question(
            id=f"{prefix}-{number}",
            question=question,
            answers=[a.strip() for a in answer_field.split("|") if a.strip()],
            topic_entities=[m.strip() for m in _BRACKETED.findall(question) if m.strip()],
            gold_relations=gold_relations,
            extra=extra,
        ), repairs


def _pathquestion_answers(field: str, final: str) -> list[str]:
    """`name(alt1/alt2/)` -> [name, alt1, alt2] (names may hold parentheses themselves)."""
    field = field.strip()
    if field.endswith(")"):
        for i, char in enumerate(field):
            if char != "(":
                continue
            primary, rest = field[:i], field[i + 1 : -1]
            alternatives = [a for a in rest.split("/") if a]
            if primary and (primary in alternatives or primary == final):
                return list(dict.fromkeys([primary, *alternatives]))
    return [field] if field else [final]


def _read_pathquestion(path: Path, notes: list[str]) -> Iterator[_Read]:
    prefix = _id_prefix(path, "pathquestion")
    for number, text, repairs in _lines(path):
        fields = text.split("\t")
        if len(fields) != 3:
            raise InputError(f"{path}:{number}: expected 'question<TAB>answer(...)<TAB>path', got {len(fields)} fields")
        question, answer_field, path_field = (f.strip() for f in fields)
        steps = path_field.split("#")
        if "<end>" in steps:
            steps = steps[: steps.index("<end>")]
        if len(steps) < 3 or len(steps) % 2 == 0:
            raise InputError(f"{path}:{number}: path {path_field[:80]!r} is not subject#relation#entity#...")
        if not question:
            raise InputError(f"{path}:{number}: empty question")
        answers = _pathquestion_answers(answer_field, steps[-1])
        yield f"{path}:{number}", Question(
            id=f"{prefix}-{number}",
            question=question,
            answers=answers,
            topic_entities=[steps[0]],
            gold_relations=steps[1::2],
            extra={"task": "qa", "gold_path": steps},
        ), repairs


# ---- JSON formats --------------------------------------------------------------------------


def _load_json(path: Path, notes: list[str]) -> list[Any]:
    lines = decode_lines(path.read_bytes(), keepends=True)
    notes.extend(f"{path}:{number}: {repairs}" for number, (_, repairs) in enumerate(lines, 1) if repairs)
    try:
        data = json.loads("".join(text for text, _ in lines).lstrip("\ufeff"), strict=False)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None
    if isinstance(data, dict):  # {"Questions": [...]} (WebQSP) or {"data": [...]}
        lists = [v for v in data.values() if isinstance(v, list) and v and all(isinstance(x, dict) for x in v)]
        if len(lists) != 1:
            raise InputError(f"{path}: expected a JSON list of questions (or an object holding one list of them)")
        data = lists[0]
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a JSON list of questions, got {type(data).__name__}")
    return data


# A JSON object of an unexpected shape (a string where a list of edges belongs...) raises one
# of these in `question_from_object`: the item's error, naming the file and line.
_SHAPE_ERRORS = (ValueError, TypeError, AttributeError, KeyError, RecursionError)


def _read_json(path: Path, notes: list[str]) -> Iterator[_Read]:
    for position, item in enumerate(_load_json(path, notes), 1):
        if not isinstance(item, dict):
            raise InputError(f"{path}: item {position} is {type(item).__name__}, not an object")
        try:
            question = question_from_object(item, f"{path.stem}-{position}")
        except _SHAPE_ERRORS as exc:
            raise InputError(f"{path}: item {position}: {exc}") from None
        yield f"{path}: item {position}", question, Repairs()


def _read_jsonl(path: Path, notes: list[str]) -> Iterator[_Read]:
    for number, text, repairs in _lines(path):
        try:
            item = json.loads(text, strict=False)
        except (ValueError, RecursionError) as exc:
            raise InputError(f"{path}:{number}: not valid JSON ({exc})") from None
        if not isinstance(item, dict):
            raise InputError(f"{path}:{number}: expected a JSON object, got {type(item).__name__}")
        try:
            question = question_from_object(item, f"{path.stem}-{number}")
        except _SHAPE_ERRORS as exc:
            raise InputError(f"{path}:{number}: {exc}") from None
        yield f"{path}:{number}", question, repairs


def question_from_object(item: dict[str, Any], default_id: str) -> Question:
    """One question from a JSON object of any of the supported files.

    question: `question` | `sentence` (Creak) | `claim` (FEVER) | `input` (T-REx, Zero-Shot RE,
    as ToG uses it) | `RawQuestion`; id: `id` | `ID` | `qid` | `qas_id` | `ex_id` | ...;
    answers: `answers` / `answer` as string, list, {id: name} dict or list of objects
    (GrailQA `entity_name`/`answer_argument`, CWQ `{answer, aliases}`, WebQSP `Parses`), plus
    ToG's `alias` list; a claim's `label` is its answer. Topic entities: `topic_entities` |
    `topic_entity` | `qid_topic_entity` | `topic_entity_ids` | `QID` | `entities`.
    """
    text = next((item[k] for k in _QUESTION_KEYS if isinstance(item.get(k), str) and item[k].strip()), None)
    if text is None:
        raise ValueError(f"no question text (looked for {', '.join(_QUESTION_KEYS)})")
    raw_id = next((item[k] for k in _ID_KEYS if item.get(k) not in (None, "")), None)
    groups = _answer_groups(item)
    names = list(dict.fromkeys(name for group in groups for name in group))
    topic_names, topic_ids = _topic_entities(item)
    extra: dict[str, Any] = {"task": _task(item)}
    if topic_ids:
        extra["topic_entity_ids"] = topic_ids
    if any(len(g) > 1 for g in groups):
        extra["answer_groups"] = groups
    extra.update({k: item[k] for k in _EXTRA_KEYS if k in item and item[k] not in (None, "", [], {})})
    return Question(
        id=str(raw_id) if raw_id is not None else default_id,
        question=text.strip(),
        answers=names,
        topic_entities=topic_names,
        gold_relations=_gold_relations(item),
        extra=extra,
    )


def _task(item: dict[str, Any]) -> str:
    if "label" in item and not any(k in item for k in ("answer", "answers")):
        return "claim"  # fact checking: the answer is the label
    if isinstance(item.get("input"), str) and "[SEP]" in item["input"]:
        return "slot"  # slot filling: "subject [SEP] relation"
    return "qa"


def _names(value: Any) -> list[list[str]]:
    """Answer groups from one answer value of any shape."""
    if value is None:
        return []
    if isinstance(value, str | int | float | bool):
        text = str(value).strip()
        return [[text]] if text else []
    if isinstance(value, list):
        return [group for element in value for group in _names(element)]
    if isinstance(value, dict):
        if "answer" in value or "aliases" in value:  # CWQ: {answer, aliases}
            group = [str(value.get("answer") or "").strip(), *(str(a).strip() for a in value.get("aliases") or [])]
            return [[n for n in group if n]] if any(group) else []
        for name_key, id_key in (("entity_name", "answer_argument"), ("EntityName", "AnswerArgument")):
            if name_key in value or id_key in value:  # GrailQA / WebQSP answer objects
                return _names(value.get(name_key) or value.get(id_key))
        if "Answers" in value:  # a WebQSP parse
            return _names(value["Answers"])
        return [group for v in value.values() for group in _names(v)]  # {id: name} (QALD)
    raise ValueError(f"unsupported answer value of type {type(value).__name__}")


def _answer_groups(item: dict[str, Any]) -> list[list[str]]:
    if "answers" in item:
        groups = _names(item["answers"])
    elif "answer" in item:
        groups = _names(item["answer"])
    elif "Parses" in item:
        groups = _names(item["Parses"])
    elif "label" in item:
        groups = _names(item["label"])
    else:
        groups = []
    aliases = [str(a).strip() for a in item.get("alias") or [] if str(a).strip()]
    if aliases and len(groups) == 1:  # ToG's T-REx / Zero-Shot RE: aliases of the one answer
        groups = [list(dict.fromkeys([*groups[0], *aliases]))]
    unique: list[list[str]] = []
    seen: set[tuple[str, ...]] = set()
    for group in groups:
        group = list(dict.fromkeys(group))
        if tuple(group) not in seen:
            seen.add(tuple(group))
            unique.append(group)
    return unique


def _topic_entities(item: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    names: list[str] = []
    ids: dict[str, str] = {}
    for key in _TOPIC_KEYS:
        value = item.get(key)
        if isinstance(value, dict):
            for entity_id, name in value.items():
                ids.setdefault(str(entity_id), str(name))
                names.append(str(name or entity_id))
        elif isinstance(value, list):
            names.extend(str(v) for v in value if str(v).strip())
        elif isinstance(value, str) and value.strip():
            names.append(value.strip())
    return list(dict.fromkeys(n.strip() for n in names if n.strip())), ids


def _gold_relations(item: dict[str, Any]) -> list[str] | None:
    relations: list[str] = []
    if isinstance(item.get("gold_relations"), list):
        relations = [str(r) for r in item["gold_relations"]]
    elif isinstance(item.get("graph_query"), dict):  # GrailQA
        relations = [e["relation"] for e in item["graph_query"].get("edges", []) if e.get("relation")]
    else:
        sparql = next((item[k] for k in ("sparql", "sparql_query") if isinstance(item.get(k), str)), "")
        if sparql:
            found = [r for r in _FREEBASE_RELATION.findall(sparql) if not r.startswith(("m.", "g."))]
            found += _WIKIDATA_RELATION.findall(sparql)
            relations = found
        elif isinstance(item.get("relation"), str) and item["relation"].strip():
            relations = [item["relation"].strip()]  # SimpleQA, T-REx, Zero-Shot RE: one relation
    relations = list(dict.fromkeys(relations))
    return relations or None
