"""Wikipedia articles as documents: `pages-articles` XML dumps and WikiExtractor output.

XML dumps go through mwxml (streaming) and mwparserfromhell (wikitext -> plain text with
templates, references, tables, files, categories and interlanguage links removed). Redirects and
pages outside the article namespace are skipped. A dump that ends mid-page keeps its complete
pages and records the truncation as a reject.

Turning wikitext into text (mwparserfromhell) is nearly all the cost of reading a dump (mwxml
takes ~2%), so a large dump's pages are converted by worker processes, in batches, with a bounded
number of batches in flight (memory stays bounded) and documents yielded in dump order.
"""

from __future__ import annotations

import html
import io
import json
import multiprocessing
import os
import re
import xml.etree.ElementTree as ET
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import mwparserfromhell
from mwparserfromhell.nodes import (
    Argument,
    Comment,
    ExternalLink,
    Heading,
    HTMLEntity,
    Tag,
    Template,
    Text,
    Wikilink,
)

from ingest.base.errors import InputError
from ingest.base.progress import Reporter
from ingest.doc_records import Document
from ingest.rejects import Reject, RejectLog
from ingest.sources import STREAM_ERRORS, open_input

# Tags whose content is not prose (or is markup of its own).
_DROP_TAGS = frozenset(
    {"ref", "references", "table", "gallery", "math", "chem", "timeline", "score", "imagemap",
     "syntaxhighlight", "source", "templatestyles", "graph", "mapframe", "maplink", "hiero", "ce"}
)
_LINE_TAGS = frozenset({"br", "p", "li", "dd", "dt", "tr", "div"})
# Sections at the end of an article that hold links and citations, not prose (English names).
_TAIL_SECTIONS = frozenset(
    {"references", "external links", "see also", "further reading", "notes", "bibliography",
     "sources", "footnotes", "citations", "notes and references", "works cited"}
)
_DEFAULT_SKIP_NAMESPACES = frozenset({"file", "image", "category", "media", "template", "wikipedia",
                                      "help", "portal", "module", "draft", "special", "user", "wp"})
_INTERWIKI = re.compile(r"^[a-z]{2,3}(-[a-z0-9]+)*$|^simple$")
_SPACES = re.compile(r"[ \t\u00a0]+")
_BLANK_LINES = re.compile(r"\n{3,}")
_PUNCT_LINE = re.compile(r"^\W*$")
# Markup that survives as text: HTML-like tags (often escaped in WikiExtractor output), magic words.
_LEFTOVER = re.compile(r"</?[A-Za-z][\w-]*(\s[^<>]*)?/?>|__[A-Z]+__|'{2,}")
# What removed templates leave behind inside brackets: "(; born 1900)", "( , plural x)", "()".
_EMPTY_BRACKET = re.compile(r"\(\s*[,;:]?\s*\)|(?<=\()\s*[,;:]\s*")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+(?=[,.;:])")
# Dumps at least this large are converted by worker processes (LOCALKG_WIKI_WORKERS overrides the
# count; 1 converts in this process).
PARALLEL_MIN_BYTES = 64 << 20
# Pages per batch sent to a worker, and batches in flight per worker.
BATCH_PAGES = 64
BATCHES_IN_FLIGHT = 3


def wikitext_to_text(wikitext: str, skip_namespaces: frozenset[str] = _DEFAULT_SKIP_NAMESPACES) -> str:
    """Plain text of an article's wikitext: prose, headings and list items; no markup noise."""
    code = mwparserfromhell.parse(wikitext)
    out: list[str] = []
    for node in code.nodes:
        if isinstance(node, Heading):
            heading = _render(node.title.nodes, skip_namespaces).strip()
            if heading.lower() in _TAIL_SECTIONS:
                break
            out.append(f"\n\n{heading}\n")
        else:
            out.append(_render([node], skip_namespaces))
    return _tidy("".join(out))


def _render(nodes: Iterable[Any], skip: frozenset[str]) -> str:
    parts: list[str] = []
    for node in nodes:
        if isinstance(node, Text):
            parts.append(str(node.value))
        elif isinstance(node, Wikilink):
            title = str(node.title).strip()
            prefix = title.split(":", 1)[0].strip().lower() if ":" in title else ""
            if prefix and (prefix in skip or _INTERWIKI.match(prefix)):
                continue
            parts.append(_render((node.text or node.title).nodes, skip))
        elif isinstance(node, ExternalLink):
            parts.append(_render(node.title.nodes, skip) if node.title else "")
        elif isinstance(node, Tag):
            tag = str(node.tag).strip().lower()
            if tag in _DROP_TAGS:
                continue
            inner = _render(node.contents.nodes, skip) if node.contents else ""
            parts.append(f"\n{inner}" if tag in _LINE_TAGS else inner)
        elif isinstance(node, HTMLEntity):
            parts.append(node.normalize())
        elif isinstance(node, Heading):
            parts.append(f"\n\n{_render(node.title.nodes, skip).strip()}\n")
        elif isinstance(node, (Template, Comment, Argument)):
            continue
        else:
            parts.append(str(node))
    return "".join(parts)


def _tidy(text: str) -> str:
    lines = []
    for raw in _LEFTOVER.sub("", html.unescape(text)).split("\n"):
        line = _SPACE_BEFORE_PUNCT.sub("", _EMPTY_BRACKET.sub("", _SPACES.sub(" ", raw))).strip()
        if line and _PUNCT_LINE.match(line):
            continue
        lines.append(line)
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()


def wiki_workers(path: Path) -> int:
    """Worker processes for converting the dump at `path`: LOCALKG_WIKI_WORKERS, else every core
    for a dump of at least PARALLEL_MIN_BYTES, else 1 (no pool)."""
    given = os.environ.get("LOCALKG_WIKI_WORKERS")
    if given:
        if not given.isdigit() or int(given) < 1:
            raise InputError(f"LOCALKG_WIKI_WORKERS must be a positive whole number (got {given!r})")
        return int(given)
    return (os.cpu_count() or 1) if path.stat().st_size >= PARALLEL_MIN_BYTES else 1


def read_wikipedia_xml(path: Path, rejects: RejectLog, reporter: Reporter, workers: int | None = None) -> Iterator[Document]:
    """Articles of a `pages-articles` dump (plain or compressed), one Document per page;
    `workers` processes convert the wikitext (default: `wiki_workers`)."""
    workers = wiki_workers(path) if workers is None else workers
    pages = _article_pages(path, rejects, reporter)
    converted = _convert_in_pool(pages, workers) if workers > 1 else (
        (page_id, title, wikitext_to_text(text, skip)) for page_id, title, text, skip in pages
    )
    for page_id, title, plain in converted:
        if not plain:
            rejects.add(Reject(str(path), None, f"page {page_id} ({title}): empty article text"))
            continue
        yield Document(id=page_id, title=title, text=plain)


_Page = tuple[str, str, str, frozenset[str]]  # id, title, wikitext, namespaces whose links are dropped


def _article_pages(path: Path, rejects: RejectLog, reporter: Reporter) -> Iterator[_Page]:
    """(id, title, wikitext, skip) of each article page (namespace 0, not a redirect)."""
    import mwxml

    raw_stream, counter = open_input(path)
    try:
        stream = _with_siteinfo(raw_stream)
    except STREAM_ERRORS as exc:
        raw_stream.close()
        raise InputError(f"{path}: compressed stream is truncated or corrupt before the first page ({exc})") from exc
    pages = 0
    last_bytes = 0
    try:
        try:
            dump = mwxml.Dump.from_file(stream)
        except (ET.ParseError, ValueError, mwxml.errors.MalformedXML, *STREAM_ERRORS) as exc:
            raise InputError(f"{path}: not a readable MediaWiki XML dump ({exc})") from exc
        skip = _skip_namespaces(dump)
        try:
            for page in dump:
                text = None
                for revision in page:  # pages-articles has one revision; keep the last of several
                    text = revision.text
                reporter.advance(counter.bytes_read - last_bytes)
                last_bytes = counter.bytes_read
                pages += 1
                if page.redirect or page.namespace != 0:
                    continue
                yield str(page.id), page.title, text or "", skip
        except (ET.ParseError, *STREAM_ERRORS) as exc:
            rejects.add(Reject(str(path), None, f"truncated or malformed XML after {pages} complete pages: {exc}"))
    finally:
        stream.close()


def _convert_batch(batch: list[_Page]) -> list[tuple[str, str, str]]:
    """(id, title, plain text) of each page (runs in a worker process)."""
    return [(page_id, title, wikitext_to_text(text, skip)) for page_id, title, text, skip in batch]


def _convert_in_pool(pages: Iterator[_Page], workers: int) -> Iterator[tuple[str, str, str]]:
    """`_convert_batch` over batches of pages in `workers` processes, results in page order,
    at most BATCHES_IN_FLIGHT batches per worker submitted and not yet yielded."""
    # forkserver: workers do not inherit the threads of whatever the parent has open
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("forkserver")) as pool:
        pending: deque[Future[list[tuple[str, str, str]]]] = deque()
        batch: list[_Page] = []
        for page in pages:
            batch.append(page)
            if len(batch) >= BATCH_PAGES:
                pending.append(pool.submit(_convert_batch, batch))
                batch = []
                while len(pending) >= workers * BATCHES_IN_FLIGHT:
                    yield from pending.popleft().result()
        if batch:
            pending.append(pool.submit(_convert_batch, batch))
        while pending:
            yield from pending.popleft().result()


class _Chain(io.RawIOBase):
    """A readable stream of some bytes followed by the rest of another stream."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        self._head = head
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        # Small reads: a truncated compressed stream raises on the read that reaches the
        # damage, and whatever that read had decompressed is lost with it.
        data = self._rest.read(min(len(buffer), 1 << 16))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._rest.close()
        super().close()


def _with_siteinfo(stream: BinaryIO) -> BinaryIO:
    """Special:Export files may lack <siteinfo>, which mwxml requires: add an empty one."""
    head = b""
    while b"<page" not in head and b"<siteinfo" not in head and len(head) < (8 << 20):
        block = stream.read(1 << 16)
        if not block:
            break
        head += block
    page_at, site_at = head.find(b"<page"), head.find(b"<siteinfo")
    if page_at >= 0 and (site_at < 0 or site_at > page_at):
        head = head[:page_at] + b"<siteinfo></siteinfo>\n  " + head[page_at:]
    return io.BufferedReader(_Chain(head, stream), buffer_size=1 << 16)  # type: ignore[return-value]


def _skip_namespaces(dump: Any) -> frozenset[str]:
    """Local names of the File (6) and Category (14) namespaces and of the other non-article ones."""
    names = set(_DEFAULT_SKIP_NAMESPACES)
    for namespace in getattr(dump.site_info, "namespaces", None) or []:
        if namespace.id != 0 and namespace.name:
            names.add(namespace.name.lower())
    return frozenset(names)


_DOC_OPEN = re.compile(r'<doc\s+([^>]*)>')
_DOC_ATTR = re.compile(r'(\w+)="([^"]*)"')


def read_wikiextractor(path: Path, rejects: RejectLog, reporter: Reporter) -> Iterator[Document]:
    """WikiExtractor output: `--json` lines or `<doc ...>` blocks; a file or its output folder."""
    files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")) if path.is_dir() else [path]
    if not files:
        raise InputError(f"{path}: folder holds no WikiExtractor files")
    for file in files:
        yield from _read_wikiextractor_file(file, rejects, reporter)


@dataclass
class _DocBlock:
    """A `<doc ...>` block being read: its attributes, first line, text lines, first bad line."""

    attrs: dict[str, str]
    line_no: int
    lines: list[str] = field(default_factory=list)
    bad: Reject | None = None


def _read_wikiextractor_file(path: Path, rejects: RejectLog, reporter: Reporter) -> Iterator[Document]:
    stream, counter = open_input(path)
    last = 0
    block: _DocBlock | None = None
    try:
        for line_no, raw in enumerate(stream, start=1):
            if counter.bytes_read != last:
                reporter.advance(counter.bytes_read - last)
                last = counter.bytes_read
            line, bad = _decode_line(raw, path, line_no)
            if block is not None:
                if line.strip() == "</doc>":
                    doc = _finish_block(block, path, rejects)
                    if doc is not None:
                        yield doc
                    block = None
                else:
                    block.lines.append(line)
                    block.bad = block.bad or bad
                continue
            if bad is not None:
                rejects.add(bad)
                continue
            doc, block = _outside_block(line.strip(), path, line_no, rejects)
            if doc is not None:
                yield doc
    except STREAM_ERRORS as exc:
        rejects.add(Reject(str(path), None, f"compressed stream is truncated or corrupt: {exc}"))
    finally:
        stream.close()
    if block is not None:
        rejects.add(Reject(str(path), block.line_no, "file ends inside a <doc> block (truncated)"))


def _decode_line(raw: bytes, path: Path, line_no: int) -> tuple[str, Reject | None]:
    """A line's text, and a reject when it is not valid UTF-8 (the text then has U+FFFD in it)."""
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        text = raw.decode("utf-8", errors="replace")
        return text, Reject(str(path), line_no, f"invalid UTF-8 at byte {exc.start}", text.strip())


def _outside_block(
    stripped: str, path: Path, line_no: int, rejects: RejectLog
) -> tuple[Document | None, _DocBlock | None]:
    """A line between documents: a JSON document, the start of a `<doc>` block, or a reject."""
    if not stripped:
        return None, None
    match = _DOC_OPEN.match(stripped)
    if match:
        return None, _DocBlock(dict(_DOC_ATTR.findall(match.group(1))), line_no)
    if stripped.startswith("{"):
        return _json_line(stripped, path, line_no, rejects), None
    rejects.add(Reject(str(path), line_no, "not a WikiExtractor JSON line or <doc> block", stripped))
    return None, None


def _finish_block(block: _DocBlock, path: Path, rejects: RejectLog) -> Document | None:
    """The document of a closed `<doc>` block; one with a line of invalid UTF-8 is rejected whole."""
    if block.bad is not None:
        doc_id = block.attrs.get("id", "?")
        rejects.add(Reject(block.bad.file, block.bad.line, f"{block.bad.reason} (document {doc_id} skipped)", block.bad.text))
        return None
    return _doc_block(block.attrs, block.lines, path, block.line_no, rejects)


def _json_line(line: str, path: Path, line_no: int, rejects: RejectLog) -> Document | None:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        rejects.add(Reject(str(path), line_no, f"invalid JSON: {exc.msg}", line))
        return None
    if not isinstance(record, dict) or "text" not in record or "title" not in record:
        rejects.add(Reject(str(path), line_no, "missing field 'title' or 'text'", line))
        return None
    return _article(str(record.get("id", "")), str(record["title"]), str(record["text"]), path, line_no, rejects)


def _doc_block(attrs: dict[str, str], lines: list[str], path: Path, line_no: int, rejects: RejectLog) -> Document | None:
    title = html.unescape(attrs.get("title", ""))
    return _article(attrs.get("id", ""), title, html.unescape("".join(lines)), path, line_no, rejects)


def _article(doc_id: str, title: str, text: str, path: Path, line_no: int, rejects: RejectLog) -> Document | None:
    """WikiExtractor repeats the title as the first line of the text: drop it."""
    body = text.strip()
    first, _, rest = body.partition("\n")
    if first.strip() == title.strip():
        body = rest.strip()
    body = _tidy(body)
    if not doc_id:
        rejects.add(Reject(str(path), line_no, "missing document id", title))
        return None
    if not body:
        rejects.add(Reject(str(path), line_no, f"document {doc_id} ({title}): empty text"))
        return None
    return Document(id=doc_id, title=title, text=body)
