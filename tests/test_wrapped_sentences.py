"""Sentences of hard-wrapped text (PDF extracts of filings, wrapped markdown): a line break that
only wraps a line of prose does not end a sentence; paragraph breaks, list items, table rows
and headings still do."""

from __future__ import annotations

from index.chunking import chunk_spans, sentence_spans


def sentences(text: str) -> list[str]:
    return [" ".join(text[s:e].split()) for s, e in sentence_spans(text)]


FILING = """MANAGEMENT REPORT
Results of Operations
In the financial year under review, Group revenue of the Brennvald
Holdings group was
EUR 4.2 billion in 2023, an increase of 6 percent on the prior year, driven
mainly by the shipyards segment. Order intake rose to EUR 5.1 billion. The
dividend proposal, see e.g.
note 12, is EUR 1.10 per share.

Outlook
The Group expects revenue growth of 3 to 5 percent in 2024.
Key figures:
Revenue      4,200    3,960
EBIT           310      280
The main risks are:
- higher steel prices in the
  second half of the year
- delays at the Brennvald Shipyards
1. Shipbuilding
2. Steel
"""


def test_a_wrapped_filing_paragraph_keeps_its_sentences_whole() -> None:
    assert sentences(FILING) == [
        "MANAGEMENT REPORT",  # an all-capitals heading
        "Results of Operations",  # a title-case heading
        "In the financial year under review, Group revenue of the Brennvald Holdings group was EUR 4.2 billion "
        "in 2023, an increase of 6 percent on the prior year, driven mainly by the shipyards segment.",
        "Order intake rose to EUR 5.1 billion.",
        "The dividend proposal, see e.g. note 12, is EUR 1.10 per share.",  # an abbreviation at a line end
        "Outlook",  # a short line before a capitalised one: a heading
        "The Group expects revenue growth of 3 to 5 percent in 2024.",
        "Key figures:",  # a line that ends in ":" introduces a list or a table
        "Revenue 4,200 3,960",  # table rows stay one a line
        "EBIT 310 280",
        "The main risks are:",
        "- higher steel prices in the second half of the year",  # a wrapped list item is one item
        "- delays at the Brennvald Shipyards",
        "1. Shipbuilding",
        "2. Steel",
    ]


def test_the_issue_example() -> None:
    assert sentences("Group revenue was\nEUR 4.2 billion in 2023.") == ["Group revenue was EUR 4.2 billion in 2023."]


def test_blank_lines_and_sentence_ends_still_end_sentences() -> None:
    assert sentences("Revenue rose in all regions of the group\n\nwhich was expected") == [
        "Revenue rose in all regions of the group", "which was expected"]
    assert sentences("a line of prose that has no full stop\n   \nanother one") == [
        "a line of prose that has no full stop", "another one"]
    assert sentences("Revenue rose by six percent in the year under review.\nCosts fell.") == [
        "Revenue rose by six percent in the year under review.", "Costs fell."]
    assert sentences("First line of a Windows text that wraps\r\nhere. Next.") == [
        "First line of a Windows text that wraps here.", "Next."]


def test_unmarked_lists_and_short_lines_stay_apart() -> None:
    assert sentences("apples\npears\nplums") == ["apples", "pears", "plums"]
    assert sentences("Altmoor\nBrennvald\nCoralgate") == ["Altmoor", "Brennvald", "Coralgate"]
    assert sentences("# Altmoor Seed Cooperative\nHeadquartered in Altmoor.") == [
        "# Altmoor Seed Cooperative", "Headquartered in Altmoor."]
    assert sentences("| Revenue | 4,200 |\n| EBIT | 310 |") == ["| Revenue | 4,200 |", "| EBIT | 310 |"]


def test_offsets_cover_the_wrapped_text_and_chunks_keep_sentences() -> None:
    spans = sentence_spans(FILING)
    assert all(FILING[s:e] == FILING[s:e].strip() for s, e in spans)
    assert "\n" in FILING[spans[2][0]:spans[2][1]]  # offsets into the original text, breaks kept
    starts, ends = {s for s, _ in spans}, {e for _, e in spans}
    for chunk in chunk_spans(FILING, 400, 50):
        assert chunk.start in starts and chunk.end in ends
