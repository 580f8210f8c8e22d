"""Sentence-aware chunking: whole sentences, size limit, overlap, exact offsets."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from index.chunking import chunk_spans, sentence_spans

TEXT = (
    "Dr. Smith went to Washington in 1990. He met Mr. Jones at 5 p.m. on a Friday! Was it fun? "
    "Yes, it was.\n\nA new paragraph starts here, e.g. with an example. The U.S. economy grew. "
    "Finally, the story ends."
)


def test_sentences_respect_abbreviations_and_lines() -> None:
    sentences = [TEXT[s:e] for s, e in sentence_spans(TEXT)]
    assert sentences == [
        "Dr. Smith went to Washington in 1990.",
        "He met Mr. Jones at 5 p.m. on a Friday!",
        "Was it fun?",
        "Yes, it was.",
        "A new paragraph starts here, e.g. with an example.",
        "The U.S. economy grew.",
        "Finally, the story ends.",
    ]


@pytest.mark.parametrize(("size", "overlap"), [(60, 0), (80, 30), (120, 50), (1000, 150)])
def test_chunks_are_whole_sentences_within_size(size: int, overlap: int) -> None:
    sentences = {TEXT[s:e] for s, e in sentence_spans(TEXT)}
    chunks = chunk_spans(TEXT, size, overlap)
    assert chunks[0].start == 0 and chunks[-1].end == len(TEXT)
    covered = set()
    for chunk in chunks:
        text = TEXT[chunk.start:chunk.end]
        assert len(text) <= size or text in sentences  # only a single over-long sentence may exceed
        assert text == text.strip()
        inner = [text[s:e] for s, e in sentence_spans(text)]
        assert all(s in sentences for s in inner), inner
        covered.update(range(chunk.start, chunk.end))
    assert all(i in covered for i, ch in enumerate(TEXT) if not ch.isspace())
    for previous, current in itertools.pairwise(chunks):
        assert current.start > previous.start
        assert previous.end - current.start <= max(overlap, 0) or current.start >= previous.end


def test_overlap_repeats_trailing_sentences() -> None:
    chunks = chunk_spans(TEXT, 100, 40)
    overlapping = [(a, b) for a, b in itertools.pairwise(chunks) if b.start < a.end]
    assert overlapping, "some consecutive chunks should share a trailing sentence"
    for a, b in overlapping:
        assert TEXT[b.start:a.end] in TEXT[a.start:a.end]


def test_long_sentence_is_cut_at_spaces() -> None:
    text = " ".join(["word"] * 500)
    chunks = chunk_spans(text, 100, 20)
    assert all(c.end - c.start <= 100 for c in chunks)
    assert all(text[c.start:c.end].split() == ["word"] * len(text[c.start:c.end].split()) for c in chunks)


def test_text_without_spaces_is_cut_hard() -> None:
    chunks = chunk_spans("x" * 2500, 1000, 100)
    assert [(c.start, c.end) for c in chunks] == [(0, 1000), (1000, 2000), (2000, 2500)]


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="overlap"):
        chunk_spans(TEXT, 100, 100)
    with pytest.raises(ValueError, match="size"):
        chunk_spans(TEXT, 0, 0)


def test_real_hotpot_paragraphs_fit_one_chunk(shared_data: Path) -> None:
    questions = json.loads((shared_data / "paper_questions" / "tog2" / "hotpotadv_dev.json").read_text())
    paragraphs = [p["context"] for q in questions[:50] for p in q["paragraphs"]]
    assert all(len(chunk_spans(p, 1000, 150)) == 1 for p in paragraphs)
    long_text = " ".join(paragraphs)
    chunks = chunk_spans(long_text, 500, 100)
    assert len(chunks) > len(long_text) // 500
    assert all(c.end - c.start <= 500 for c in chunks)
