"""Sentence-aware chunking: pack whole sentences into chunks of at most `size` characters, with
about `overlap` characters of trailing sentences repeated at the start of the next chunk."""

from __future__ import annotations

import re
from dataclasses import dataclass

# A sentence ends at ., ! or ? (optionally followed by closing quotes/brackets) before whitespace,
# at CJK full stops, and at line breaks, except a single break that only wraps a line of prose
# (see `_wraps`).
_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]]*\s+|(?<=[。！？])|\n+")
# The start of a list item or a heading line: "- ", "* ", "• ", "1. ", "2) ", "(a) ", "a) ", "# ", "> ".
_ITEM_START = re.compile(r"(?:[-*•·–—>#]|\(?(?:\d{1,3}|[a-zA-Z]|[ivxIVX]{1,4})[.)])(?:\s|$)")
# A row of a table or of aligned columns: a tab, a pipe, or a run of spaces inside the line.
_TABLE_ROW = re.compile(r"\t|\||\S {2,}\S")
# A line of prose shorter than this that ends in a content word may be a heading ("Outlook").
WRAP_MIN_LINE = 40
# A line that ends in one of these words runs on to the next ("Group revenue was").
_RUN_ON_TEXT = """a an the of in on at to for from by with as and or but nor that which who whose whom than
    was were is are be been has have had its their our his her this these those into onto over under
    between about against per via not no"""
_RUN_ON_WORDS = frozenset(_RUN_ON_TEXT.split())
# Words before a full stop that do not end a sentence (nor does a stop before a lower-case word).
_ABBREVIATIONS = frozenset(
    ["mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "cf", "al", "fig", "no", "vol", "inc", "ltd", "co", "corp", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "gen", "col", "lt", "sgt", "rev", "u.s", "u.k", "mt", "ft"]
)


@dataclass(frozen=True)
class ChunkSpan:
    """A chunk as character offsets [start, end) into its document's text."""

    start: int
    end: int


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """[start, end) of each sentence, whitespace trimmed; abbreviations do not end sentences,
    nor does a line break that only wraps a line of prose (a blank line always does)."""
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        end = match.start()
        line_break = "\n" in match.group(0)
        if line_break and not _wraps(text, match):
            pass  # a paragraph break, or a line of a list, a table or a heading: an end
        elif line_break and text[end - 1] not in ".!?":
            continue  # a wrapped line of prose: the break is a space inside a sentence
        elif _ends_with_abbreviation(text, start, end) or text[match.end():match.end() + 1].islower():
            continue  # (also after a wrapped line that ends in "e.g." or "Mr.")
        _add_trimmed(text, start, end, spans)
        start = match.end()
    _add_trimmed(text, start, len(text), spans)
    return spans


def _wraps(text: str, match: re.Match[str]) -> bool:
    """Whether the line break in `match` only wraps a line of prose (hard-wrapped text, PDF
    extracts): one line break between two non-blank lines, neither a list item, a table row nor
    a heading, the first not ending in ":". A short first line that ends in a content word
    before a capitalised second line reads as a heading ("Outlook" / "The Group expects ...").
    """
    gap = match.group(0)
    if gap.count("\n") != 1:
        return False  # a blank line: a paragraph break
    line_start = text.rfind("\n", 0, match.start()) + 1
    line_end = text.find("\n", match.end())
    before = text[line_start:match.start()].strip()
    after = text[match.end():len(text) if line_end < 0 else line_end].strip()
    if not before or not after or before.endswith(":") or before.startswith("#"):
        return False
    if _ITEM_START.match(after) or _TABLE_ROW.search(before) or _TABLE_ROW.search(after):
        return False
    if _is_heading(before):
        return False
    words = before.lower().split()
    # A lower-case start continues a line of a few words; a one- or two-word line before it is
    # more likely an item of an unmarked list ("apples" / "pears").
    return (after[0].islower() and len(words) >= 3) or words[-1] in _RUN_ON_WORDS or len(before) >= WRAP_MIN_LINE


def _is_heading(line: str) -> bool:
    """An all-capitals line, or a title-case one (every word of four letters or more capitalised)."""
    letters = [c for c in line if c.isalpha()]
    if len(letters) >= 2 and all(c.isupper() for c in letters):
        return True
    words = [w for w in re.findall(r"[^\W\d_]+", line) if len(w) >= 4]
    return len(words) >= 2 and all(w[0].isupper() for w in words)


def _ends_with_abbreviation(text: str, start: int, end: int) -> bool:
    if end <= start or text[end - 1] != ".":
        return False
    word = text[start:end - 1].rsplit(None, 1)[-1].lower() if text[start:end - 1].strip() else ""
    return len(word) == 1 or word in _ABBREVIATIONS


def _add_trimmed(text: str, start: int, end: int, spans: list[tuple[int, int]]) -> None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if end > start:
        spans.append((start, end))


def _split_long(text: str, start: int, end: int, size: int) -> list[tuple[int, int]]:
    """Cut a sentence longer than `size` at whitespace (or hard, when it has none)."""
    pieces: list[tuple[int, int]] = []
    while end - start > size:
        cut = text.rfind(" ", start + size // 2, start + size)
        cut = cut if cut > start else start + size
        _add_trimmed(text, start, cut, pieces)
        start = cut
    _add_trimmed(text, start, end, pieces)
    return pieces


def chunk_spans(text: str, size: int = 1000, overlap: int = 150) -> list[ChunkSpan]:
    """Chunks of `text` as offsets: whole sentences, at most `size` characters each (a longer
    sentence is cut at spaces), consecutive chunks sharing up to `overlap` characters."""
    if size <= 0:
        raise ValueError("chunk size must be positive")
    if not 0 <= overlap < size:
        raise ValueError("chunk overlap must be at least 0 and less than the chunk size")
    units: list[tuple[int, int]] = []
    for start, end in sentence_spans(text):
        units.extend(_split_long(text, start, end, size) if end - start > size else [(start, end)])
    chunks: list[ChunkSpan] = []
    first = 0
    while first < len(units):
        last = first
        while last + 1 < len(units) and units[last + 1][1] - units[first][0] <= size:
            last += 1
        chunks.append(ChunkSpan(units[first][0], units[last][1]))
        if last + 1 >= len(units):
            break
        # Start the next chunk at the earliest trailing sentence that fits in the overlap budget,
        # but always after this chunk's first sentence so that every step makes progress.
        nxt = last + 1
        while nxt - 1 > first and units[last][1] - units[nxt - 1][0] <= overlap:
            nxt -= 1
        first = nxt
    return chunks
