"""Sentence-aware chunking: pack whole sentences into chunks of at most `size` characters, with
about `overlap` characters of trailing sentences repeated at the start of the next chunk."""

from __future__ import annotations

import re
from dataclasses import dataclass

# A sentence ends at ., ! or ? (optionally followed by closing quotes/brackets) before whitespace,
# at CJK full stops, and at every line break.
_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]]*\s+|(?<=[。！？])|\n+")
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
    """[start, end) of each sentence, whitespace trimmed; abbreviations do not end sentences."""
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        end = match.start()
        if "\n" not in match.group(0) and (
            _ends_with_abbreviation(text, start, end) or text[match.end():match.end() + 1].islower()
        ):
            continue
        _add_trimmed(text, start, end, spans)
        start = match.end()
    _add_trimmed(text, start, len(text), spans)
    return spans


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
