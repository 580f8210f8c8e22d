"""The documentation site (mkdocs.yml, docs/) in a real headless browser, opened from disk.

The site is built once, the way `make docs` builds it (`python -m mkdocs build --strict`), into
a temp folder; Debian's chromium (driven by Playwright) then opens it through file:// URLs:
- no page makes a request that leaves the disk (any URL but file:, data:, blob:, about: fails
  the test: the site must work air-gapped), and no page logs a console or script error;
- the links of every page resolve to files of the site (not to folders: from file:// a folder
  link shows a directory listing, which is what `use_directory_urls: true` would give);
- a search through the search box finds a word the docs certainly hold, and a result opens;
- every link from README.md into docs/ (`docs/NAME.md`, `docs/NAME.md#anchor`) opens its built
  page (with a title and an h1, the anchor present), every built page is reached from those
  links or from the nav of the pages they open, and every docs/*.md page is built.

Skipped, saying why, where mkdocs (requirements-dev.txt), chromium or Playwright is absent. The
walk through every page is marked slow; the build, the home page and the search are not.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

REPO = Path(__file__).resolve().parents[1]
MKDOCS_YML = REPO / "mkdocs.yml"
README = REPO / "README.md"
CHROMIUM = Path(os.environ.get("LOCALKG_CHROMIUM", "/usr/bin/chromium"))
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
LOCAL = ("file:", "data:", "blob:", "about:")
# Words the docs certainly hold; the search uses the first one found in docs/*.md.
SEARCH_WORDS = ("Wikidata", "HydraRAG", "Freebase")
# README links into docs/: inline `[text](docs/x.md#anchor "title")` and reference definitions.
INLINE_LINK = re.compile(r"\]\(\s*<?(?:\./)?(docs/[^)\s>#]+?\.md)(#[^)\s>]*)?>?(?:\s+\"[^\"]*\")?\s*\)")
REF_LINK = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(?:\./)?(docs/[^\s>#]+?\.md)(#[^\s>]*)?>?", re.M)
FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1", re.M | re.S)


@dataclass
class Site:
    root: Path  # the built site
    docs_dir: Path
    directory_urls: bool  # as the build applied it (the offline plugin turns it off)

    def page_of(self, md: str) -> Path:
        """The built file of a docs page (a path relative to docs_dir, e.g. `air-gapped.md`)."""
        source = PurePosixPath(md)
        if source.stem in ("index", "README"):
            return self.root / source.parent / "index.html"
        if self.directory_urls:
            return self.root / source.parent / source.stem / "index.html"
        return self.root / source.parent / f"{source.stem}.html"

    def pages(self) -> set[Path]:
        """Every built page a reader opens: not the 404 page, nor a search page or asset."""
        return {p for p in self.root.rglob("*.html")
                if p.name != "404.html" and p.relative_to(self.root).parts[0] not in ("search", "assets")}


def _settings() -> tuple[Path, bool]:
    """docs_dir, and use_directory_urls as the build applies it: mkdocs.yml's setting, which
    Material's offline plugin switches off so that the site's links work from file://."""
    from mkdocs.config import load_config

    config = load_config(str(MKDOCS_YML))
    offline = [p for name, p in config.plugins.items() if name.split("/")[-1] == "offline"]
    off = any(getattr(p.config, "enabled", True) for p in offline)
    return Path(config.docs_dir), bool(config.use_directory_urls) and not off


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    if not MKDOCS_YML.exists():
        pytest.skip(f"no {MKDOCS_YML.name} at the repository root")
    pytest.importorskip("mkdocs", reason="mkdocs not installed (requirements-dev.txt)")
    pytest.importorskip("material", reason="mkdocs-material not installed (requirements-dev.txt)")
    out = tmp_path_factory.mktemp("docs-site") / "site"
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(MKDOCS_YML),
                            "-d", str(out)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, f"mkdocs build --strict failed:\n{build.stdout}\n{build.stderr}"
    return Site(out, *_settings())


class Browser:
    """A chromium context that records every request leaving the disk (and aborts it), and the
    console and script errors of the pages it opens."""

    def __init__(self, context: Any) -> None:
        self.context = context
        self.problems: list[str] = []
        context.on("request", self._request)
        context.route(lambda url: not url.startswith(LOCAL), lambda route: route.abort())

    def _request(self, request: Any) -> None:
        if not request.url.startswith(LOCAL):
            self.problems.append(f"network request: {request.url} (from {request.frame.url})")

    def open(self, target: Path | str) -> Any:
        page = self.context.new_page()
        page.on("console", lambda m: self.problems.append(f"console error on {page.url}: {m.text}")
                if m.type == "error" else None)
        page.on("pageerror", lambda e: self.problems.append(f"script error on {page.url}: {e}"))
        page.goto(target.resolve().as_uri() if isinstance(target, Path) else target)
        return page


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.skip(f"no chromium at {CHROMIUM} (apt-get install chromium; CI installs it)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright not installed (requirements-dev.txt)")
    profile = tempfile.mkdtemp(prefix="docs-chromium-")
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=str(CHROMIUM), args=ARGS, headless=True,
            viewport={"width": 1400, "height": 1000})
        yield Browser(context)
        context.close()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def browser(chromium: Browser) -> Iterator[Browser]:
    chromium.problems.clear()
    yield chromium
    for page in chromium.context.pages:
        page.close()


def _file(url: str) -> Path | None:
    """The file a file:// URL names (query and fragment dropped); None for other URLs."""
    parts = urlsplit(url)
    return Path(unquote(parts.path)) if parts.scheme == "file" else None


def _local_links(page: Any, selector: str = "a[href]") -> list[str]:
    hrefs = page.eval_on_selector_all(selector, "els => els.map(e => e.href)")
    return [h for h in hrefs if h.startswith("file:")]


def _check_page(page: Any, site: Site) -> list[str]:
    """What is wrong with an opened page: no title or h1, a link to no file or to a folder."""
    wrong = []
    name = page.url
    if not page.title().strip():
        wrong.append(f"{name}: no <title>")
    if page.locator("h1").count() == 0 or not str(page.locator("h1").first.text_content()).strip():
        wrong.append(f"{name}: no h1")
    for href in _local_links(page):
        target = _file(href)
        assert target is not None
        if target.is_dir():
            wrong.append(f"{name}: link {href} opens a folder from file:// (use_directory_urls?)")
        elif not target.is_file():
            wrong.append(f"{name}: link {href} leads to no file")
        elif site.root.resolve() not in target.resolve().parents:
            wrong.append(f"{name}: link {href} leaves the site")
    return wrong


def _readme_links(site: Site) -> list[tuple[str, str]]:
    """(page relative to docs_dir, anchor or "") for each README link into docs/, in order."""
    text = FENCE.sub("", README.read_text(encoding="utf-8"))
    found = sorted([(m.start(), m.group(1), (m.group(2) or "")[1:])
                    for pattern in (INLINE_LINK, REF_LINK) for m in pattern.finditer(text)])
    links = []
    for _, path, anchor in found:
        md = (REPO / unquote(path)).resolve().relative_to(site.docs_dir.resolve()).as_posix()
        if (md, anchor) not in links:
            links.append((md, anchor))
    return links


def _docs_pages(site: Site) -> list[str]:
    return sorted(p.relative_to(site.docs_dir).as_posix() for p in site.docs_dir.rglob("*.md"))


def test_every_docs_page_is_built(site: Site) -> None:
    pages = _docs_pages(site)
    assert pages, f"no page in {site.docs_dir}"
    missing = [md for md in pages if not site.page_of(md).is_file()]
    assert missing == [], f"docs pages not in the built site: {missing}"
    assert (site.root / "index.html").is_file()


def test_home_opens_from_disk_without_network_and_its_nav_navigates(site: Site, browser: Browser) -> None:
    page = browser.open(site.root / "index.html")
    page.wait_for_load_state("load")
    assert _check_page(page, site) == []
    # a click on a nav link to another page of the site opens it (the browser's own navigation,
    # and Material's instant navigation if enabled, which cannot fetch pages from file://)
    here = _file(page.url)
    others = [h for h in _local_links(page, "nav a[href]") if _file(h) != here]
    assert others, "the home page's nav links to no other page"
    links = page.locator("nav a[href]").filter(visible=True)
    pages = {h.split("#")[0] for h in others}
    chosen = next((links.nth(i) for i in range(links.count())
                   if str(links.nth(i).evaluate("e => e.href")).split("#")[0] in pages), None)
    assert chosen is not None, "no visible nav link to another page"
    expected = _file(str(chosen.evaluate("e => e.href")))
    chosen.click()
    page.wait_for_url(lambda url: _file(url) == expected, timeout=15_000)
    page.wait_for_load_state("load")
    assert _check_page(page, site) == []
    assert browser.problems == []


def test_search_finds_a_word_and_opens_a_result(site: Site, browser: Browser) -> None:
    sources = " ".join((site.docs_dir / md).read_text(encoding="utf-8") for md in _docs_pages(site))
    word = next((w for w in SEARCH_WORDS if w in sources), None)
    assert word, f"none of {SEARCH_WORDS} in the docs pages"
    page = browser.open(site.root / "index.html")
    query = page.locator("input.md-search__input, input[data-md-component='search-query']").first
    assert query.count() == 1, "no search box (Material's input.md-search__input) on the home page"
    try:  # Material hides the search when its worker cannot start (from file://, without the
        # iframe-worker shim, a Worker cannot load)
        query.wait_for(state="visible", timeout=15_000)
    except Exception as error:
        raise AssertionError(f"the search box stays hidden: search cannot start; {browser.problems}") from error
    query.click()
    query.press_sequentially(word, delay=30)
    results = page.locator("a.md-search-result__link")
    try:
        results.first.wait_for(state="attached", timeout=20_000)
    except Exception as error:  # the worker never answered: say what the page said
        meta = page.locator(".md-search-result__meta").first
        said = meta.text_content() if meta.count() else "no result list"
        raise AssertionError(f"no search result for {word!r} ({said!r}); {browser.problems}") from error
    meta = str(page.locator(".md-search-result__meta").first.text_content())
    assert re.search(r"\d+ matching document", meta), meta
    href = str(results.first.evaluate("e => e.href"))
    target = _file(href)
    assert target is not None and target.is_file(), href
    results.first.click()
    page.wait_for_url(lambda url: _file(url) == target, timeout=15_000)
    page.wait_for_load_state("load")
    assert _check_page(page, site) == []
    assert word.lower() in page.locator("body").inner_text().lower()
    assert browser.problems == []


@pytest.mark.slow  # every page in turn: ~15 s on two busy cores, with the build ~40 s for the file
def test_readme_links_open_every_page_of_the_site(site: Site, browser: Browser) -> None:
    links = _readme_links(site)
    assert links, "README.md links to no page in docs/"
    wrong: list[str] = []
    reached: set[Path] = set()
    page = browser.open("about:blank")
    for md, anchor in links:
        built = site.page_of(md)
        if not built.is_file():
            wrong.append(f"README link docs/{md}: no built page {built.relative_to(site.root)}")
            continue
        page.goto(built.resolve().as_uri() + (f"#{anchor}" if anchor else ""))
        wrong += _check_page(page, site)
        if anchor and not page.evaluate("id => document.getElementById(id) !== null", unquote(anchor)):
            wrong.append(f"README link docs/{md}#{anchor}: no such anchor on {built.name}")
        reached.add(built.resolve())
        reached.update(f.resolve() for f in map(_file, _local_links(page, "nav a[href]")) if f and f.is_file())
    orphans = sorted(p.relative_to(site.root).as_posix() for p in site.pages() if p.resolve() not in reached)
    assert wrong == []
    assert orphans == [], f"built pages reached neither from README.md's links nor from their nav: {orphans}"
    assert browser.problems == []
