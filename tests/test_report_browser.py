"""The HTML report in a real headless browser (Debian's chromium, driven by Playwright): the
report of a small real run (the demo index, the real smollm2-135m model) opens without console
errors, the plots and an evidence graph render (in the DOM and on a screenshot), the filters
work; the report of a run with errors, missing records, a torn line, a method without paths and
hostile text renders too, and that text stays text.

`LOCALKG_WRITE_SCREENSHOT=1` writes the real run's screenshot to docs/report.png (the README's);
`LOCALKG_WRITE_SCREENSHOT=RUN_DIR` screenshots the report of that run instead (e.g. data/runs/demo).
Skipped, saying why, where chromium or Playwright is absent (CI installs both).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from report_runs import awkward_run

from cli import main
from engine.report.html_report import write_report

CHROMIUM = Path(os.environ.get("LOCALKG_CHROMIUM", "/usr/bin/chromium"))
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
REPO = Path(__file__).resolve().parents[1]
QUESTIONS = REPO / "data" / "demo" / "questions.jsonl"
MODEL = "smollm2-135m"
# Shallow searches and short replies keep the real run near a minute on two cores: the test
# checks the page, not the methods' accuracy.
LIGHT = [a for kv in ("tog.depth=1", "tog.width=2", "hydra.d_max=1", "hydra.source_selection=false",
                      "hydra.analysis_max_tokens=64", "hydra.doc_paths_max_tokens=48",
                      "hydra.answer_max_tokens=48", "hydra.refine_max_tokens=48",
                      "hydra.predict_max_tokens=48") for a in ("--set", kv)]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip(f"no chromium at {CHROMIUM} (apt-get install chromium; CI installs it)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright not installed (requirements-dev.txt)")
    profile = tempfile.mkdtemp(prefix="report-chromium-")
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=str(CHROMIUM), args=ARGS, headless=True,
            viewport={"width": 1400, "height": 1000})
        yield context
        context.close()
    shutil.rmtree(profile, ignore_errors=True)


class Opened:
    """A report page, ready, with what the browser complained about."""

    def __init__(self, context: Any, html: Path) -> None:
        self.errors: list[str] = []
        self.page = context.new_page()
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: None if r.url.startswith(("file:", "data:", "blob:"))
                     else self.errors.append(f"network request: {r.url}"))
        self.page.goto(html.resolve().as_uri())
        self.page.wait_for_selector("body[data-ready='1']", timeout=30_000)

    def count(self) -> str:
        return str(self.page.locator("#count").text_content())

    def choose(self, select: str, label: str) -> None:
        self.page.select_option(select, label=label)


def _check_screenshot(page: Any, png: Path) -> None:
    page.screenshot(path=str(png), full_page=True)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a real page, not a blank


@pytest.mark.slow
def test_report_of_a_real_run_renders_and_filters(browser: Any, demo_index: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    batch = CliRunner().invoke(main, ["batch", "--index", str(demo_index), "--questions", str(QUESTIONS),
                                      "--methods", "tog,hydra,rag,io", "--llm", MODEL, "--limit", "2",
                                      *LIGHT, "--out", str(run)])
    assert batch.exit_code == 0, batch.output
    html = write_report([run], tmp_path / "report.html").out
    opened = Opened(browser, html)
    page = opened.page
    assert opened.count() == "1–2 of 2 questions"
    assert page.locator("#cost-plots svg.plot").count() == 3
    assert page.locator("#cost-plots .pm").count() == 3 * 4  # a point per method, in each plot
    assert page.locator("#group-plots svg.plot").count() == 2  # the demo questions' hops and needs
    assert page.locator("#funnels svg.plot").count() == 1  # hydra
    assert page.locator("tr.qrow").count() == 2
    # one question opened: every method's card, hydra's evidence graph drawn from its paths
    page.locator("tr.qrow").first.click()
    page.wait_for_selector("tr.detail .card[data-method='hydra']")
    cards = page.locator("tr.detail .card")
    assert cards.count() == 4
    graph = page.locator(".card[data-method='tog'] svg.evgraph, .card[data-method='hydra'] svg.evgraph").first
    assert graph.locator("g.ev-node").count() >= 2 and graph.locator("line.ev-edge").count() >= 1
    assert graph.locator("g.ev-node[data-kind='topic']").count() >= 1
    calls = page.locator(".card[data-method='io'] details.llmcalls")
    calls.locator("summary").first.click()
    assert "answer" in str(calls.locator("table.calls").text_content())
    # the filters: io's wrong answers, then "right with tog, wrong with io" is a subset of them
    opened.choose("#f-method", "io")
    opened.choose("#f-result", "wrong")
    wrong_io = page.locator("tr.qrow").count()
    opened.choose("#f-method", "any method")
    opened.choose("#f-result", "any")
    opened.choose("#f-a", "tog")
    opened.choose("#f-b", "io")
    both = page.locator("tr.qrow").count()
    assert both <= wrong_io <= 2
    for row in range(both):
        cells = page.locator("tr.qrow").nth(row)
        assert "✓" in str(cells.locator("td[data-method='tog']").text_content())
        assert "✗" in str(cells.locator("td[data-method='io']").text_content())
    opened.choose("#f-a", "—")
    opened.choose("#f-b", "—")
    page.fill("#f-text", "demo-002")
    assert opened.count() == "1–1 of 1 questions"
    page.fill("#f-text", "")
    assert opened.errors == []
    _check_screenshot(page, tmp_path / "report.png")
    target = os.environ.get("LOCALKG_WRITE_SCREENSHOT")
    if target:
        _write_readme_screenshot(browser, html if target == "1" else Path(target), tmp_path)


def _write_readme_screenshot(browser: Any, html_or_run: Path, tmp_path: Path) -> None:
    """docs/report.png: the top of the page and one opened question, as the README shows it."""
    html = html_or_run if html_or_run.suffix == ".html" else write_report([html_or_run], tmp_path / "readme.html").out
    opened = Opened(browser, html)
    opened.page.locator("tr.qrow").first.click()
    opened.page.wait_for_selector("tr.detail svg.evgraph")
    (REPO / "docs").mkdir(exist_ok=True)
    opened.page.screenshot(path=str(REPO / "docs" / "report.png"), full_page=False)
    assert opened.errors == []


def test_report_of_an_awkward_run_renders_and_keeps_hostile_text_as_text(browser: Any, tmp_path: Path) -> None:
    html = write_report([awkward_run(tmp_path / "run")], tmp_path / "report.html", block_size=2).out
    opened = Opened(browser, html)
    page = opened.page
    assert page.locator("tr.qrow").count() == 3
    q3 = page.locator("tr.qrow[data-id='q3']")
    assert "no record" in str(q3.locator("td[data-method='tog']").text_content())
    q2 = page.locator("tr.qrow[data-id='q2']")
    assert "⚠" in str(q2.locator("td[data-method='rag']").text_content())
    assert "onerror" in str(q2.locator("td").nth(2).text_content())  # shown as text
    q2.click()  # its details are in the second block, decoded now
    page.wait_for_selector("tr.detail .card[data-method='tog'] svg.evgraph")
    page.locator(".card[data-method='tog'] details.llmcalls > summary").click()
    page.locator(".card[data-method='tog'] details.call > summary").click()
    assert "onerror" in str(page.locator(".card[data-method='tog'] details.call").text_content())
    assert "RuntimeError" in str(page.locator(".card[data-method='rag']").text_content())
    assert "no evidence paths" in str(page.locator(".card[data-method='io']").text_content())
    assert page.evaluate("window.__pwned") is None and page.locator("img").count() == 0
    opened.choose("#f-result", "no record")
    assert opened.count() == "1–1 of 1 questions"
    opened.choose("#f-result", "error")
    assert page.locator("tr.qrow").count() == 1
    assert opened.errors == []
    _check_screenshot(page, tmp_path / "awkward.png")
