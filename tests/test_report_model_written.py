"""The report and `show` mark a document path the model wrote as the model's.

HydraRAG rewrites a document sentence as a knowledge path ("A - relation - B"); its record keeps
[the source sentence, the model's path] in `sentences` (`written_by: "model"` says so; older
records are read by their shape). The evidence data, the HTML report and `show` keep the
source's sentence as the quote and show the model's path beside it under the label "model's
rewording", never inside quotation marks, and only the source's words link a document to the
entities it mentions. The browser check at the end is skipped where chromium is absent.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from report_runs import QUESTIONS, doc_path, kg_path, record, topic, write_run
from test_report import page_data
from test_report_browser import Opened, browser  # noqa: F401 (the fixture)

from cli import main
from engine.report.evidence import record_evidence, source_and_model_text
from engine.report.html_report import write_report

SENTENCE = "Norvale Motors was founded in 1961 by Oskar Thelling in Torvassa."
MODEL_PATH = "Norvale Motors - founded by - Oskar Thelling - born in - Caspenne"  # Caspenne: not in the source
TITLE = "Norvale Motors"
CHUNK = "wiki/norvale#3"


def hydra_doc_path(*, written_by: str | None = "model", field: bool = True,
                   text: str = MODEL_PATH) -> dict[str, Any]:
    """A hydra document path as `HydraRun.evidence` writes it: [sentence, the candidate's text]."""
    path = doc_path(CHUNK, TITLE, SENTENCE, source="wiki")
    path["sentences"] = [SENTENCE, text]
    if field:
        path["written_by"] = written_by
    return path


def hydra_record(*paths: dict[str, Any]) -> dict[str, Any]:
    return record(QUESTIONS[0], "hydra", "Oskar Thelling", answer_source="doc",
                  topic_entities=topic("Norvale Motors"),
                  paths=[kg_path(("Norvale Motors", "located in", "Torvassa")), *paths])


def quoted(text: str) -> list[str]:
    """Every “…” passage of a text (line breaks of a narrow terminal joined)."""
    return re.findall(r"“([^”]*)”", " ".join(text.split()))


# ---- the evidence data ------------------------------------------------------------------------


def test_a_model_written_path_is_kept_apart_from_the_quote() -> None:
    rec = hydra_record(hydra_doc_path())
    assert MODEL_PATH in rec["paths"][1]["sentences"]  # the record holds it: the check can fail
    graph = record_evidence(rec)
    assert graph.chunks == [[CHUNK, TITLE, SENTENCE, "wiki", [MODEL_PATH]]]
    labels = [label for label, *_ in graph.nodes]
    doc = labels.index(f"{TITLE} [{CHUNK}]")
    linked = {labels[a] for a, b, relation, _ in graph.edges if b == doc and relation == "mentions"}
    assert linked == {"Norvale Motors", "Torvassa"}  # the source's words, not the model's Caspenne
    assert "Caspenne" not in labels


def test_each_quote_keeps_its_own_rewordings() -> None:
    """Two paths the model wrote from one window share its entry; another window of the same
    chunk is an entry of its own, with its own rewording."""
    other = "Oskar Thelling was born in Caspenne."
    second = hydra_doc_path(text="Oskar Thelling - born in - Caspenne")
    third = hydra_doc_path()
    third["sentences"] = [other, "Oskar Thelling - place of birth - Caspenne"]
    graph = record_evidence(hydra_record(hydra_doc_path(), second, hydra_doc_path(), third))
    assert graph.chunks == [[CHUNK, TITLE, SENTENCE, "wiki", [MODEL_PATH, "Oskar Thelling - born in - Caspenne"]],
                            [CHUNK, TITLE, other, "wiki", ["Oskar Thelling - place of birth - Caspenne"]]]


def test_records_without_the_field_are_read_by_their_shape() -> None:
    legacy = hydra_doc_path(field=False)
    assert source_and_model_text(legacy, "hydra") == ([SENTENCE], MODEL_PATH)
    assert source_and_model_text(legacy, "hydra-e") == ([SENTENCE], MODEL_PATH)
    # `doc_evidence=sentences`: the second text is the window itself, "title: window"
    window = hydra_doc_path(field=False, text=f"{TITLE}: {SENTENCE}")
    assert source_and_model_text(window, "hydra") == ([SENTENCE, f"{TITLE}: {SENTENCE}"], "")
    # another method's two sentences are both the source's
    assert source_and_model_text(legacy, "rag") == ([SENTENCE, MODEL_PATH], "")
    # the field, when present, decides
    assert source_and_model_text(hydra_doc_path(written_by=None), "hydra") == ([SENTENCE, MODEL_PATH], "")
    assert source_and_model_text(hydra_doc_path(), "other") == ([SENTENCE], MODEL_PATH)


# ---- the HTML report and `show` ---------------------------------------------------------------


def _run(folder: Path) -> Path:
    rag = record(QUESTIONS[0], "rag", "Oskar Thelling", answer_source="doc",
                 paths=[doc_path("reports/norvale.md#0", TITLE, SENTENCE)])
    return write_run(folder, {"hydra": [hydra_record(hydra_doc_path())], "rag": [rag]}, ids=["q1"])


def test_report_page_data_holds_the_model_text_apart(tmp_path: Path) -> None:
    html = write_report([_run(tmp_path / "run")], tmp_path / "r.html").out.read_text(encoding="utf-8")
    _, blocks = page_data(html)
    details = blocks[0][0]
    assert details["hydra"]["g"]["c"] == [[CHUNK, TITLE, SENTENCE, "wiki", [MODEL_PATH]]]
    assert details["rag"]["g"]["c"] == [["reports/norvale.md#0", TITLE, SENTENCE, "domain", []]]
    assert "model's rewording" in html and "model-text" in html


def test_show_labels_the_model_text_and_never_quotes_it(tmp_path: Path) -> None:
    run = _run(tmp_path / "run")
    shown = CliRunner().invoke(main, ["show", str(run), "q1", "--method", "hydra"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    flat = " ".join(shown.output.split())
    assert "model's rewording" in flat and MODEL_PATH in flat
    assert quoted(shown.output) == [SENTENCE]  # the source's sentence only
    rag = CliRunner().invoke(main, ["show", str(run), "q1", "--method", "rag"], env={"COLUMNS": "200"})
    assert rag.exit_code == 0 and "model's rewording" not in rag.output and quoted(rag.output) == [SENTENCE]


def test_the_page_shows_the_label_beside_the_quote(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    html = write_report([_run(tmp_path / "run")], tmp_path / "r.html").out
    opened = Opened(browser, html)
    page = opened.page
    page.locator("tr.qrow").first.click()
    item = page.locator(".card[data-method='hydra'] ul.chunks li")
    item.wait_for()
    text = str(item.text_content())
    assert quoted(text) == [SENTENCE]
    assert str(item.locator(".model-label").text_content()) == "model's rewording"
    assert MODEL_PATH in str(item.locator(".model-text").text_content())
    assert page.locator(".card[data-method='rag'] .model-text").count() == 0
    assert opened.errors == []
