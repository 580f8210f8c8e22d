"""Where names may be in a question's text, for entity linking: its tokens and n-gram spans,
capitalised runs, function words, and how name-like a span looks."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Function words and question vocabulary: never a mention on their own.
_STOPWORD_TEXT = """a an the of in on at to for from by with about as into onto over under after before between
    during without within and or but nor not no yes is are was were be been being am do does did done
    has have had having can could will would shall should may might must it its it's this that these
    those there here what which who whom whose when where why how whats who's i me my we our you your
    he him his she her they them their one ones some any all each every other another such same than
    then so too very just also only also both either neither if else s t did also much many more most
    less least few film films movie movies show shows book books year years release released releases
    star stars starred starring act acted acts actor actors actress direct directed director directors
    write wrote written writer writers genre genres language languages type types tag tags describe
    described person people name names known famous kind sort main whose also appear appeared appears
    work works working worked play played plays"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_TOKEN = re.compile(r"\w+(?:[-'’.&]\w+)*\.?|[^\w\s]", re.UNICODE)
_BRACKETED = re.compile(r"\[([^\[\]]+)\]")
_NAME_RUN = re.compile(r"[A-Z0-9][\w'’.&-]*(?:\s+(?:(?:of|the|de|du|da|van|von|der|la|le|and|&)\s+)*[A-Z0-9][\w'’.&-]*)*")


@dataclass(frozen=True)
class _Span:
    start: int
    end: int
    tokens: int
    text: str


def _spans(question: str, max_ngram: int) -> list[_Span]:
    tokens = [(m.start(), m.end()) for m in _TOKEN.finditer(question)]
    spans = []
    for i in range(len(tokens)):
        for j in range(i, min(len(tokens), i + max_ngram)):
            start, end = tokens[i][0], tokens[j][1]
            text = question[start:end]
            if not (text[0].isalnum() and (text[-1].isalnum() or text[-1] in ".)!?'")):
                continue
            spans.append(_Span(start, end, j - i + 1, text))
            bare = text.rstrip(".!?'")  # "Motors?" at the end of a question; "Inc." stays too
            if bare != text and bare and bare[-1].isalnum():
                spans.append(_Span(start, start + len(bare), j - i + 1, bare))
    return spans


def _words(text: str) -> list[str]:
    return re.findall(r"\w+(?:['’]\w+)?", text.lower())


def _is_stop_span(text: str) -> bool:
    words = _words(text)
    return not words or all(w in STOPWORDS for w in words) or (len(words) == 1 and len(words[0]) < 2)


def _shape_weight(text: str) -> float:
    """Names are usually capitalised or numeric, though they may hold short lower-case words
    ("van", "of", "de"); a lone lower-case word rarely is a name."""
    words = re.findall(r"\w+(?:['’]\w+)*", text)
    content = [w for w in words if not (w.islower() and (len(w) <= 3 or w in STOPWORDS))]
    if content and all(w[0].isupper() or w[0].isdigit() for w in content):
        return 1.0
    return 0.7 if len(words) > 1 else 0.4


def _capitalised_runs(question: str) -> list[_Span]:
    """Runs of capitalised words (joined by "of", "the", "de", ...), without leading or trailing
    function words: the name-like parts of a question."""
    spans = []
    for match in _NAME_RUN.finditer(question):
        words = list(re.finditer(r"\S+", match.group(0)))
        while words and _is_stop_span(words[0].group(0)):
            words.pop(0)
        while words and _is_stop_span(words[-1].group(0)):
            words.pop()
        if not words:
            continue
        start, end = match.start() + words[0].start(), match.start() + words[-1].end()
        text = question[start:end].rstrip(".,;:!?")
        spans.append(_Span(start, start + len(text), len(words), text))
    return spans


def _overlaps_not_within(match: _Span, span: _Span) -> bool:
    """Whether `match` overlaps `span` other than strictly inside it (the same span, a wider
    one, or across an edge)."""
    inside = span.start <= match.start and match.end <= span.end and (match.start, match.end) != (span.start, span.end)
    return match.start < span.end and span.start < match.end and not inside


def _cuts(span: _Span, run: _Span) -> bool:
    """Whether `span` takes part of `run` but not all of it."""
    return span.start < run.end and run.start < span.end and not (span.start <= run.start and run.end <= span.end)
