"""The documentation site builds offline and strictly, and fetches nothing from the network.

`python -m mkdocs build --strict` (what `make docs` runs) into a temp folder must succeed without
one warning (a broken link or anchor, a page missing from the nav, a marker of
`bench/docs_hooks.py` naming an unknown method or row), and no built page or stylesheet may load
a script, a style or a font from an http(s) URL: the site is read in air-gapped rooms.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# A script, stylesheet, preload or font that the browser would fetch from the network.
REMOTE_IN_HTML = re.compile(
    r"""<script\b[^>]*\bsrc\s*=\s*["']?(?:https?:)?//"""
    r"""|<link\b[^>]*\bhref\s*=\s*["']?(?:https?:)?//[^>]*>"""
    r"""|@import\s+(?:url\()?\s*["']?(?:https?:)?//"""
    r"""|url\(\s*["']?(?:https?:)?//""", re.IGNORECASE)
REMOTE_IN_CSS = re.compile(r"""@import\s+(?:url\()?\s*["']?(?:https?:)?//|url\(\s*["']?(?:https?:)?//""",
                           re.IGNORECASE)
# <link rel="..."> values that make a browser fetch: a remote canonical/alternate link is not fetched.
ANSI = re.compile(r"\x1b\[[0-9;]*m")
FETCHING_RELS = ("stylesheet", "preload", "preconnect", "prefetch", "modulepreload", "icon", "manifest")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("mkdocs", reason="mkdocs not installed (requirements-dev.txt; run `make setup`)")
    pytest.importorskip("material", reason="mkdocs-material not installed (requirements-dev.txt)")
    out = tmp_path_factory.mktemp("docs") / "site"
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                           cwd=ROOT, capture_output=True, text=True, timeout=600,
                           env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "NO_COLOR": "1"})
    log = build.stdout + build.stderr
    assert build.returncode == 0, f"mkdocs build --strict failed:\n{log}"
    warnings = [line for line in ANSI.sub("", log).splitlines() if re.match(r"\s*(WARNING|ERROR)\b", line)]
    assert warnings == [], f"the build warned:\n{log}"
    return out


def _remote_fetches(html: str) -> list[str]:
    found = []
    for match in REMOTE_IN_HTML.finditer(html):
        text = match.group(0)
        if text.lower().startswith("<link"):
            rel = re.search(r"""\brel\s*=\s*["']?([^"'>]+)""", text, re.IGNORECASE)
            if rel is None or not any(r in rel.group(1).lower().split() for r in FETCHING_RELS):
                continue
        found.append(text[:160])
    return found


def test_every_page_is_built_with_its_generated_tables(site: Path) -> None:
    sources = sorted(p.relative_to(ROOT / "docs").with_suffix(".html") for p in (ROOT / "docs").rglob("*.md"))
    built = {p.relative_to(site) for p in site.rglob("*.html")}
    assert [str(s) for s in sources if s not in built] == []
    evaluation = (site / "evaluation.html").read_text(encoding="utf-8")
    assert "<!-- table" not in evaluation and "{eval-" not in evaluation
    tog = (site / "methods" / "tog.html").read_text(encoding="utf-8")
    assert "require_grounded_answer" in tog and "<!-- options" not in tog
    reference = (site / "api-reference.html").read_text(encoding="utf-8")
    assert "open_index" in reference  # mkdocstrings rendered the code's docstrings


def test_no_page_loads_a_script_style_or_font_from_the_network(site: Path) -> None:
    problems = []
    for page in site.rglob("*.html"):
        problems += [f"{page.relative_to(site)}: {hit}" for hit in _remote_fetches(page.read_text(encoding="utf-8"))]
    for sheet in site.rglob("*.css"):
        problems += [f"{sheet.relative_to(site)}: {m.group(0)}"
                     for m in REMOTE_IN_CSS.finditer(sheet.read_text(encoding="utf-8", errors="replace"))]
    assert problems == []


def test_the_check_finds_a_remote_script_style_and_font() -> None:
    page = ('<script src="https://cdn.example/x.js"></script><link rel="stylesheet" href="//fonts.example/css">'
            '<link rel="canonical" href="https://example.org/"><style>@font-face{src:url("https://f.example/a.woff2")}</style>')
    found = _remote_fetches(page)
    assert len(found) == 3 and not any("canonical" in hit for hit in found)
    assert _remote_fetches('<script src="assets/x.js"></script><link rel="stylesheet" href="assets/a.css">') == []


def test_hydra_key_table_names_only_keys_of_its_spec() -> None:
    """docs/methods/hydra.md explains its keys in a hand-written table beside the generated one:
    every key it names must be a key of the method's spec (a renamed key fails here)."""
    from engine.methods.registry import get

    keys = set(get("hydra").defaults)
    text = (ROOT / "docs" / "methods" / "hydra.md").read_text(encoding="utf-8")
    table = text[text.index("| key | default | what |"):].split("\n\n", 1)[0]
    named = {key for line in table.splitlines()[2:] for key in re.findall(r"`([a-z_*0-9]+)`", line.split("|")[1])}
    assert named and {k for k in named if "*" not in k} <= keys, sorted(named - keys)
    assert all(any(k.endswith(n.strip("*")) for k in keys) for n in named if "*" in n)


def _shown_default(value: object) -> str:
    """A default as the hand-written table writes it: true/false, numbers as Python prints them."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def test_hydra_key_table_shows_the_specs_defaults() -> None:
    """The hand-written table's defaults are the spec's: a row naming N keys with N defaults
    (a parenthesis, such as hydra-e's, aside) must show each key's default as the spec has it."""
    from engine.methods.registry import get

    defaults = get("hydra").defaults
    text = (ROOT / "docs" / "methods" / "hydra.md").read_text(encoding="utf-8")
    table = text[text.index("| key | default | what |"):].split("\n\n", 1)[0]
    checked = 0
    for line in table.splitlines()[2:]:
        cells = line.split("|")
        keys = re.findall(r"`([a-z_0-9]+)`", cells[1])
        shown = [v.strip().strip("`") for v in re.sub(r"\(.*?\)", "", cells[2]).split(",")]
        if not keys or "*" in cells[1] or len(shown) != len(keys) or "[" in cells[2]:
            continue
        assert shown == [_shown_default(defaults[k]) for k in keys], line
        checked += len(keys)
    assert checked >= 30  # nearly every key of the table was compared


def test_benchmark_cells_read_bench_results() -> None:
    from bench.docs_hooks import DocsTableError, render

    llm = json.loads((ROOT / "bench" / "results" / "llm.json").read_text(encoding="utf-8"))
    rate = llm["models"]["qwen2.5-coder-0.5b"]["prompt_tokens_per_s"]
    table = "<!-- table\n| x |\n|---|\n| {@llm/models/qwen2.5-coder-0.5b/prompt_tokens_per_s} |\n-->"
    assert render(table).splitlines()[-1] == f"| {rate} |"
    with pytest.raises(DocsTableError, match="has no models/nope"):
        render(table.replace("qwen2.5-coder-0.5b/prompt_tokens_per_s", "nope"))
    with pytest.raises(DocsTableError, match="no benchmark results"):
        render(table.replace("@llm/", "@no-such-bench/"))
