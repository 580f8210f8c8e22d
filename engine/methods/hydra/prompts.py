"""Prompts and reply schemas of `hydra` / `hydra-e` (HydraRAG §4, Appendix E), written for this
project in the spirit of the paper's appendix (not copied).

Same layout as `prompts.py`: per stage one fixed system message (instructions first, a tiny
example), identical in every call of that stage so the llama.cpp prefix cache pays for it once
per run; everything that depends on the question goes into the one user message, question and
request last. Candidate paths and sentences are shown with short ids ("P3", "S2") and chosen
through enums, so the model can only pick what was shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.llm.protocol import enum_array
from engine.methods.shared.prompts import ANSWER_MAX_CHARS

SKYLINE_MAX_CHARS = 200
SKYLINE_ITEM_MAX_CHARS = 60
SUB_QUESTION_MAX_CHARS = 120
FACTS_MAX_CHARS = 300
PATH_MAX_CHARS = 200
MAX_SUB_QUESTIONS = 3
SOURCE_NAMES = {"kg": "kg (knowledge graph facts)", "wiki": "wiki (documents about the entities)",
                "web": "web (pages searched by the question)"}

_ANSWER = {"type": "string", "maxLength": ANSWER_MAX_CHARS}
_SKYLINE = {"type": "string", "minLength": 1, "maxLength": SKYLINE_MAX_CHARS}

# ------------------------------------------------------------------------------------------
# question analysis (§4.1): sub-questions, skyline indicator, sources: one call
# ------------------------------------------------------------------------------------------

ANALYSIS_SYSTEM = """You plan how to answer a question from a knowledge graph and documents. You get the entities found in the question, the sources you may search and the question.
Split the question into short sub-questions, each joining one entity of the question to the answer. Write the skyline: one chain from the entities of the question to the answer, entity, relation, entity, relation, ..., unknown entities as a short description, the answer as "answer". Choose the sources to search first.
Reply with JSON {"sub_questions": [...], "skyline": [...], "sources": [...]}.
Example.
Entities: Rashomon
Sources: kg (knowledge graph facts), wiki (documents about the entities)
Question: in which country was the director of Rashomon born
{"sub_questions": ["who directed Rashomon", "in which country was that director born"], "skyline": ["Rashomon", "directed by", "director", "born in", "answer"], "sources": ["kg"]}"""


def analysis_user(question: str, entities: Sequence[str], sources: Sequence[str]) -> str:
    shown = ", ".join(SOURCE_NAMES[s] for s in sources)
    return f"Entities: {', '.join(entities) or 'none'}\nSources: {shown}\nQuestion: {question}"


def analysis_schema(sources: Sequence[str], d_max: int) -> dict[str, Any]:
    """Sub-questions (1..3), the skyline as a chain of items (an entity and the answer at
    least; room for D_max hops on each side of the answer) and at least one available source.
    A list, not a string: the grammar then makes even a small model write a chain."""
    return {"type": "object",
            "properties": {"sub_questions": {"type": "array", "minItems": 1, "maxItems": MAX_SUB_QUESTIONS,
                                             "items": {"type": "string", "maxLength": SUB_QUESTION_MAX_CHARS}},
                           "skyline": {"type": "array", "minItems": 3, "maxItems": 4 * d_max + 1,
                                       "items": {"type": "string", "minLength": 1,
                                                 "maxLength": SKYLINE_ITEM_MAX_CHARS}},
                           "sources": enum_array(list(sources), max_items=len(sources), min_items=1)},
            "required": ["sub_questions", "skyline", "sources"]}


# ------------------------------------------------------------------------------------------
# unstructured retrieval (§4.2.1): sentences -> knowledge paths, one call for all sources
# ------------------------------------------------------------------------------------------

DOC_PATHS_SYSTEM = """You turn sentences into knowledge paths. You get numbered sentences, the entities of a question and its skyline (the chain from those entities to the answer). For each sentence that states a fact on the way to the answer, write it as a path of entities and relations joined by " - ", such as "A - relation - B" or "A - relation - B - relation - C", using the names the sentence uses, and give the sentence number. Skip sentences that do not help.
Reply with JSON {"paths": [{"sentence": "S1", "path": "..."}]}.
Example.
Sentences:
S1 Rashomon is a 1950 film directed by Akira Kurosawa.
S2 The film won the Golden Lion.
Entities: Rashomon
Skyline: Rashomon - directed by - director - born in - answer
{"paths": [{"sentence": "S1", "path": "Rashomon - directed by - Akira Kurosawa"}]}"""


def doc_paths_user(sentences: Sequence[str], entities: Sequence[str], skyline: str) -> str:
    numbered = "\n".join(f"S{i} {s}" for i, s in enumerate(sentences, 1))
    return f"Sentences:\n{numbered}\nEntities: {', '.join(entities)}\nSkyline: {skyline}"


def doc_paths_schema(n: int) -> dict[str, Any]:
    item = {"type": "object",
            "properties": {"sentence": {"type": "string", "enum": [f"S{i}" for i in range(1, n + 1)]},
                           "path": {"type": "string", "minLength": 1, "maxLength": PATH_MAX_CHARS}},
            "required": ["sentence", "path"]}
    return {"type": "object", "properties": {"paths": {"type": "array", "items": item, "maxItems": n}},
            "required": ["paths"]}


# ------------------------------------------------------------------------------------------
# LLM-aware selection (Algorithm 4 step 3): the top W_max of the W2 by id
# ------------------------------------------------------------------------------------------

SELECT_SYSTEM = """You choose evidence for a question. You get numbered paths, the skyline (the chain from the entities of the question to the answer) and the question. A path follows relations from an entity; {...} lists the entities reached at a step; "(reverse)" means the relation is followed backwards. Choose as many paths as asked, those most likely to contain the answer, best first.
Reply with JSON {"paths": ["P1", ...]}.
Example.
P1 {Rashomon} -release year-> {1950}
P2 {Rashomon} -directed by-> {Akira Kurosawa} -place of birth-> {Tokyo}
Skyline: Rashomon - directed by - director - born in - answer
Question: where was the director of Rashomon born
Choose 1 path.
{"paths": ["P2"]}"""


def select_user(paths: Sequence[str], skyline: str, question: str, k: int) -> str:
    numbered = "\n".join(f"P{i} {p}" for i, p in enumerate(paths, 1))
    return f"{numbered}\nSkyline: {skyline}\nQuestion: {question}\nChoose {k} path{'s' if k > 1 else ''}."


def select_schema(n: int, k: int) -> dict[str, Any]:
    ids = [f"P{i}" for i in range(1, n + 1)]
    return {"type": "object", "properties": {"paths": enum_array(ids, max_items=k, min_items=min(k, n))},
            "required": ["paths"]}


# ------------------------------------------------------------------------------------------
# answering (§4.4): path refinement (the facts that matter) and the {Yes}/{No} answer, one call
# ------------------------------------------------------------------------------------------

ANSWER_SYSTEM = """You answer a question from evidence paths. A path follows relations from an entity; {...} lists the entities reached at a step; "(reverse)" means the relation is followed backwards. First write the facts of the paths that answer the question, in one or two short sentences. Then say whether the paths are enough to answer: "Yes" or "No". If Yes, give the short answer only: an entity of the paths, never the entity the question names. If No, give "".
Reply with JSON {"facts": "...", "enough": "Yes", "answer": "..."}.
Example.
P1 {Rashomon} -directed by-> {Akira Kurosawa} -place of birth-> {Tokyo}
Skyline: Rashomon - directed by - director - born in - answer
Question: where was the director of Rashomon born
{"facts": "Rashomon was directed by Akira Kurosawa, who was born in Tokyo.", "enough": "Yes", "answer": "Tokyo"}"""

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"facts": {"type": "string", "maxLength": FACTS_MAX_CHARS},
                   "enough": {"type": "string", "enum": ["Yes", "No"]}, "answer": _ANSWER},
    "required": ["facts", "enough", "answer"],
}


# `answer_prompt: short` (ours): the verdict and the answer only, no facts written first and no
# worked example (a small model copies an example's answer and restates the question's entity)
SHORT_ANSWER_SYSTEM = """You answer a question from the evidence given with it: paths in a knowledge graph ({...} lists the entities reached at a step; "(reverse)" means the relation is followed backwards) and sentences from documents ("title: sentence"). Say whether the evidence is enough to answer: "Yes" or "No". If Yes, give the short answer only, as written in the evidence: a name, a title, a date or a number, or yes or no. If No, give "".
Reply with JSON {"enough": "Yes", "answer": "..."}."""

SHORT_ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"enough": {"type": "string", "enum": ["Yes", "No"]}, "answer": _ANSWER},
    "required": ["enough", "answer"],
}


def answer_schema(names: Sequence[str] = (), short: bool = False) -> dict[str, Any]:
    """The answer reply (`short`: without the facts); with `names` the answer is one of them or ""
    (with {No})."""
    base = SHORT_ANSWER_SCHEMA if short else ANSWER_SCHEMA
    if not names:
        return base
    return {**base, "properties": {**base["properties"], "answer": {"type": "string", "enum": [*names, ""]}}}


def answer_user(paths: Sequence[str], skyline: str, question: str,
                sub_questions: Sequence[str] = ()) -> str:
    """The evidence, the skyline (left out when empty), the sub-questions and the question."""
    numbered = "\n".join(f"P{i} {p}" for i, p in enumerate(paths, 1)) or "(no paths)"
    sky = f"\nSkyline: {skyline}" if skyline else ""
    subs = f"\nSub-questions: {'; '.join(sub_questions)}" if sub_questions else ""
    return f"{numbered}{sky}{subs}\nQuestion: {question}"


# the last answer (Algorithm 3 line 28): the paths plus the model's own knowledge, never empty
FALLBACK_SYSTEM = """You answer a question from evidence paths and what you know. A path follows relations from an entity; {...} lists the entities reached at a step; "(reverse)" means the relation is followed backwards. Give your best short answer: a name, a title, a date or a number, never the entity the question names. Say where it comes from: "paths" or "own knowledge".
Reply with JSON {"answer": "...", "from": "paths"}.
Example.
P1 {Rashomon} -release year-> {1950}
Question: where was the director of Rashomon born
{"answer": "Tokyo", "from": "own knowledge"}"""

FALLBACK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string", "minLength": 1, "maxLength": ANSWER_MAX_CHARS},
                   "from": {"type": "string", "enum": ["paths", "own knowledge"]}},
    "required": ["answer", "from"],
}

# ------------------------------------------------------------------------------------------
# refined exploration (§4.2.2): a follow-up question and a new skyline
# ------------------------------------------------------------------------------------------

REFINE_SYSTEM = """You help search for the answer to a question. The evidence paths found so far do not answer it. Write one short follow-up question for the fact that is still missing, and a new skyline for it: the chain from the entities of the question to the answer, entities and relations joined by " - ", the answer last as "answer".
Reply with JSON {"question": "...", "skyline": "..."}.
Example.
P1 {Rashomon} -release year-> {1950}
Skyline: Rashomon - directed by - director - born in - answer
Question: where was the director of Rashomon born
{"question": "who directed Rashomon and where was he born", "skyline": "Rashomon - director - person - place of birth - answer"}"""

REFINE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"question": {"type": "string", "minLength": 1, "maxLength": SUB_QUESTION_MAX_CHARS},
                   "skyline": _SKYLINE},
    "required": ["question", "skyline"],
}

# ------------------------------------------------------------------------------------------
# predicted exploration (§4.2.3): the model's candidate answers, each with its own skyline
# ------------------------------------------------------------------------------------------

PREDICT_SYSTEM = """You guess the answer to a question from evidence paths and what you know. Give up to as many likely answers as asked, best first, each a short name, with a skyline that ends at it: the chain from the entities of the question to that answer, entities and relations joined by " - ".
Reply with JSON {"predictions": [{"answer": "...", "skyline": "..."}]}.
Example.
P1 {Rashomon} -release year-> {1950}
Question: where was the director of Rashomon born
Give up to 1 answer.
{"predictions": [{"answer": "Tokyo", "skyline": "Rashomon - directed by - Akira Kurosawa - born in - Tokyo"}]}"""


def predict_user(paths: Sequence[str], question: str, k: int) -> str:
    numbered = "\n".join(f"P{i} {p}" for i, p in enumerate(paths, 1)) or "(no paths)"
    return f"{numbered}\nQuestion: {question}\nGive up to {k} answer{'s' if k > 1 else ''}."


def predict_schema(k: int) -> dict[str, Any]:
    item = {"type": "object",
            "properties": {"answer": {"type": "string", "minLength": 1, "maxLength": ANSWER_MAX_CHARS},
                           "skyline": _SKYLINE},
            "required": ["answer", "skyline"]}
    return {"type": "object",
            "properties": {"predictions": {"type": "array", "items": item, "minItems": 1, "maxItems": k}},
            "required": ["predictions"]}


def refine_user(paths: Sequence[str], skyline: str, question: str) -> str:
    return answer_user(paths, skyline, question)
