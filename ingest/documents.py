"""Streaming document readers: JSONL, Wikipedia XML, WikiExtractor, text/markdown/HTML folders,
HotpotQA-style paragraph lists. Each yields `Document`s and logs what it skips as rejects."""

from __future__ import annotations

import hashlib
import html
import json
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

from ingest.base.errors import InputError
from ingest.base.progress import Reporter, progress_bar
from ingest.doc_records import Document
from ingest.docs_map import DocsMap, split_front_matter
from ingest.rejects import Reject, RejectLog
from ingest.sources import STREAM_ERRORS, check_file, open_input
from ingest.wikipedia import read_wikiextractor, read_wikipedia_xml

DOC_FORMATS = ("auto", "jsonl", "wikipedia-xml", "wikiextractor", "files", "hotpot")
TEXT_SUFFIXES = frozenset({".txt", ".md", ".markdown", ".html", ".htm"})
# AdvHotpotQA's adversarial paragraphs carry this placeholder instead of a title.
HOTPOT_NO_TITLE = "added"

__all__ = ["DOC_FORMATS", "Document", "detect_doc_format", "iter_documents", "read_documents"]


def iter_documents(path: Path, fmt: str, rejects: RejectLog, docs_map: DocsMap | None = None) -> Iterator[Document]:
    """Documents of one source with a progress bar (bytes read, or files for a folder).
    `docs_map` gives entities (and titles) to the files of a `files` source."""
    fmt = detect_doc_format(path) if fmt == "auto" else fmt
    if fmt == "files" and path.is_dir():
        total, unit = float(len(_text_files(path))), "files"
    elif path.is_dir():
        total, unit = float(sum(p.stat().st_size for p in path.rglob("*") if p.is_file())), "bytes"
    else:
        total, unit = float(check_file(path).stat().st_size), "bytes"
    with progress_bar(f"documents {path.name}", total, unit) as reporter:
        yield from read_documents(path, fmt, rejects, reporter, docs_map)


def read_documents(
    path: Path, fmt: str, rejects: RejectLog, reporter: Reporter, docs_map: DocsMap | None = None
) -> Iterator[Document]:
    """Documents of `path` read as `fmt` (one of DOC_FORMATS; "auto" detects it)."""
    if fmt == "auto":
        fmt = detect_doc_format(path)
    if fmt == "jsonl":
        return read_jsonl(path, rejects, reporter)
    if fmt == "wikipedia-xml":
        return read_wikipedia_xml(path, rejects, reporter)
    if fmt == "wikiextractor":
        if not path.exists():
            raise InputError(f"{path}: no such file or folder")
        return read_wikiextractor(path, rejects, reporter)
    if fmt == "files":
        return read_files(path, rejects, reporter, docs_map)
    if fmt == "hotpot":
        return read_hotpot(path, rejects, reporter)
    raise InputError(f"{path}: unknown document format {fmt!r} (expected one of {', '.join(DOC_FORMATS)})")


def detect_doc_format(path: Path) -> str:
    """Guess a source's format from its name and first bytes; InputError when it cannot tell."""
    if not path.exists():
        raise InputError(f"{path}: no such file or folder")
    if path.is_dir():
        names = [p.name for p in path.rglob("*") if p.is_file()]
        if any(re.fullmatch(r"wiki_\d+(\.bz2|\.gz)?", n) for n in names):
            return "wikiextractor"
        return "files"
    stream, _ = open_input(path)
    try:
        head = stream.read(1 << 16).decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    except STREAM_ERRORS as exc:
        raise InputError(f"{path}: cannot read ({exc})") from exc
    finally:
        stream.close()
    if head.startswith("<doc"):
        return "wikiextractor"
    if path.suffix.lower() in TEXT_SUFFIXES:
        return "files"
    if head.startswith("<") and "<mediawiki" in head:
        return "wikipedia-xml"
    if head.startswith("["):
        if re.search(r'"(paragraphs|context)"\s*:', head):
            return "hotpot"
    elif head.startswith("{"):
        try:
            first = json.loads(head.split("\n", 1)[0])
        except json.JSONDecodeError:
            first = None
        if isinstance(first, dict) and "text" in first:
            return "wikiextractor" if "url" in first and "entity" not in first else "jsonl"
    raise InputError(
        f"{path}: cannot detect the document format; pass --docs-format "
        f"({', '.join(f for f in DOC_FORMATS if f != 'auto')})"
    )


# ------------------------------------------------------------------------------------------
# JSONL: {"id", "title", "text"} plus optional "entity"
# ------------------------------------------------------------------------------------------


def read_jsonl(path: Path, rejects: RejectLog, reporter: Reporter) -> Iterator[Document]:
    """One JSON object per line with "id" and "text" (and "title", optional "entity").

    A line that is not valid UTF-8 is rejected with its line number (never decoded with
    replacement characters); a truncated compressed file keeps the documents before the damage.
    """
    stream, counter = open_input(path)
    last = 0
    try:
        for line_no, raw in enumerate(stream, start=1):
            if counter.bytes_read != last:
                reporter.advance(counter.bytes_read - last)
                last = counter.bytes_read
            line = _utf8_line(raw, path, line_no, rejects)
            if not line:
                continue
            doc = _jsonl_record(line, path, line_no, rejects)
            if doc is not None:
                yield doc
    except STREAM_ERRORS as exc:
        rejects.add(Reject(str(path), None, f"compressed stream is truncated or corrupt: {exc}"))
    finally:
        stream.close()


def _utf8_line(raw: bytes, path: Path, line_no: int, rejects: RejectLog) -> str | None:
    """The stripped text of a line (a leading byte-order mark dropped), or None after rejecting it."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        rejects.add(Reject(str(path), line_no, f"invalid UTF-8 at byte {exc.start}", raw.decode("utf-8", "replace")))
        return None
    return text.lstrip("\ufeff").strip() if line_no == 1 else text.strip()


def _jsonl_record(line: str, path: Path, line_no: int, rejects: RejectLog) -> Document | None:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        rejects.add(Reject(str(path), line_no, f"invalid JSON: {exc.msg}", line))
        return None
    if not isinstance(record, dict):
        rejects.add(Reject(str(path), line_no, "expected a JSON object", line))
        return None
    missing = [f for f in ("id", "text") if record.get(f) in (None, "")]
    if missing:
        rejects.add(Reject(str(path), line_no, f"missing field {missing[0]!r}", line))
        return None
    wrong = _wrong_field_type(record)
    if wrong:
        rejects.add(Reject(str(path), line_no, wrong, line))
        return None
    text = str(record["text"]).strip()
    if not text:
        rejects.add(Reject(str(path), line_no, "empty text", line))
        return None
    entity = record.get("entity")
    return Document(
        id=str(record["id"]),
        title=str(record.get("title") or ""),
        text=text,
        entity=str(entity) if entity not in (None, "") else None,
    )


# What each field of a JSONL document may hold: `text` a string; `id`, `title` and `entity` a
# string or a number (`"id": 7`). Anything else (a list, an object) would be indexed as its
# Python text ("['a', 'b']"), so the line is rejected naming the field.
_JSONL_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "text": (str,), "id": (str, int, float), "title": (str, int, float), "entity": (str, int, float),
}
_JSON_TYPE_NAMES = {list: "a list", dict: "an object", bool: "a boolean", float: "a number", int: "a number"}


def _wrong_field_type(record: dict[str, object]) -> str | None:
    """The reject reason when a field holds a value of the wrong JSON type; None when all fit."""
    for name, allowed in _JSONL_FIELD_TYPES.items():
        value = record.get(name)
        if value is None or (isinstance(value, allowed) and not isinstance(value, bool)):
            continue
        got = _JSON_TYPE_NAMES.get(type(value), type(value).__name__)
        want = "a string" if allowed == (str,) else "a string or a number"
        return f"field {name!r} must be {want}, got {got}"
    return None


# ------------------------------------------------------------------------------------------
# A folder of .txt / .md / .html files: one document per file
# ------------------------------------------------------------------------------------------


def read_files(path: Path, rejects: RejectLog, reporter: Reporter, docs_map: DocsMap | None = None) -> Iterator[Document]:
    """Each text, markdown or HTML file is a document; its id is `<folder name>/<path inside>`.

    A text or markdown file may start with front matter (`entity:`, `title:`); a row of
    `docs_map` for the file gives its entity (and title) too. The two must agree."""
    if not path.exists():
        raise InputError(f"{path}: no such file or folder")
    files = _text_files(path) if path.is_dir() else [path]
    if path.is_dir():
        wanted = set(files)
        for other in sorted(p for p in path.rglob("*") if p.is_file() and p not in wanted):
            if not other.name.startswith("."):
                rejects.add(Reject(str(other), None, f"unsupported file type {other.suffix or '(none)'}"))
    if not files:
        raise InputError(f"{path}: no .txt, .md or .html files found")
    for file in files:
        reporter.advance(1)
        # The folder's name keeps ids of two corpora apart ("reports/acme.md", "filings/acme.md").
        doc_id = f"{path.name}/{file.relative_to(path).as_posix()}" if path.is_dir() else file.name
        try:
            raw = file.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            rejects.add(Reject(str(file), None, f"not UTF-8 text ({exc.reason} at byte {exc.start})"))
            continue
        front, body = (None, raw) if file.suffix.lower() in (".html", ".htm") else split_front_matter(raw)
        title, text = _file_title_text(file, body)
        if not text:
            rejects.add(Reject(str(file), None, "empty document"))
            continue
        entity, origin = None, None
        if front is not None:
            title = front.title or title
            if front.entity:
                entity, origin = front.entity, f"{file}:{front.entity_line}"
        mapped = docs_map.lookup(file) if docs_map is not None else None
        if mapped is not None:
            if entity is not None and entity != mapped.entity:
                raise InputError(f"{mapped.origin}: maps {file} to {mapped.entity!r}, but its front matter ({origin}) says {entity!r}")
            entity, origin, title = mapped.entity, mapped.origin, mapped.title or title
        yield Document(id=doc_id, title=title, text=text, entity=entity, entity_origin=origin)


def _text_files(folder: Path) -> list[Path]:
    return sorted(
        p for p in folder.rglob("*")
        if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES and not p.name.startswith(".")
    )


def _file_title_text(file: Path, raw: str) -> tuple[str, str]:
    suffix = file.suffix.lower()
    if suffix in (".html", ".htm"):
        return _html_title_text(raw, file.stem)
    if suffix in (".md", ".markdown"):
        return _markdown_title_text(raw, file.stem)
    return file.stem.replace("_", " "), raw.strip()


_MD_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_MD_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_MD_EMPHASIS = re.compile(r"(\*\*|__|\*|`)")


def _markdown_title_text(raw: str, fallback: str) -> tuple[str, str]:
    """Title from the first `# ` heading (then dropped from the text); light markup removal."""
    title = ""
    lines = []
    for line in raw.splitlines():
        heading = _MD_HEADING.match(line)
        if heading:
            if not title and len(heading.group(1)) == 1:
                title = heading.group(2).strip()
                continue
            line = heading.group(2)
        lines.append(_MD_EMPHASIS.sub("", _MD_LINK.sub(r"\1", line)).rstrip())
    return title or fallback.replace("_", " "), "\n".join(lines).strip()


class _HTMLText(HTMLParser):
    _SKIP = frozenset({"script", "style", "noscript", "head", "template", "svg"})
    _BLOCK = frozenset({"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6",
                        "section", "article", "table", "ul", "ol", "blockquote", "pre"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self.h1 = ""
        self._stack: list[str] = []
        self._h1_done = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._BLOCK:
            self.parts.append("\n")
        if tag not in ("br", "meta", "link", "img", "hr", "input"):
            self._stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag == "h1" and self.h1:
            self._h1_done = True
        if tag in self._stack:
            while self._stack and self._stack.pop() != tag:
                pass
        if tag in self._BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if "title" in self._stack:
            self.title += data
        elif "h1" in self._stack and not self._h1_done:
            self.h1 += data
        if not any(t in self._SKIP for t in self._stack):
            self.parts.append(data)


def _html_title_text(raw: str, fallback: str) -> tuple[str, str]:
    parser = _HTMLText()
    parser.feed(raw)
    parser.close()
    lines = [re.sub(r"\s+", " ", line).strip() for line in "".join(parser.parts).split("\n")]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    title = re.sub(r"\s+", " ", parser.title or parser.h1).strip() or fallback.replace("_", " ")
    return title, text


# ------------------------------------------------------------------------------------------
# HotpotQA-style question files: every paragraph is a document
# ------------------------------------------------------------------------------------------


def read_hotpot(path: Path, rejects: RejectLog, reporter: Reporter) -> Iterator[Document]:
    """Paragraphs of a HotpotQA-style file (`paragraphs: [{title, context}]` as in AdvHotpotQA,
    or HotpotQA's `context: [[title, [sentences]]]`). Identical paragraphs become one document."""
    size = check_file(path).stat().st_size
    stream, _ = open_input(path)
    try:
        data = json.load(stream)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a JSON question file ({exc})") from exc
    except STREAM_ERRORS as exc:
        raise InputError(f"{path}: cannot read ({exc})") from exc
    finally:
        stream.close()
    if isinstance(data, dict):
        data = data.get("data") or data.get("questions") or [data]
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a JSON list of questions")
    seen: set[str] = set()
    for number, question in enumerate(data, start=1):
        paragraphs = _hotpot_paragraphs(question)
        if paragraphs is None:
            rejects.add(Reject(str(path), None, f"question #{number}: no 'paragraphs' or 'context' list"))
            continue
        for raw_title, raw_text in paragraphs:
            # HotpotQA's Wikipedia titles and paragraphs keep HTML escapes ("Goldie &amp; Bear");
            # the answers do not, so titles (which become entity names) and text are decoded.
            title, text = html.unescape(raw_title), html.unescape(raw_text).strip()
            if not text:
                rejects.add(Reject(str(path), None, f"question #{number}: empty paragraph {title!r}"))
                continue
            distractor = title.strip().lower() == HOTPOT_NO_TITLE
            doc_id = "hotpot:" + hashlib.sha1(f"{title}\n{text}".encode()).hexdigest()[:16]
            if doc_id in seen:
                continue
            seen.add(doc_id)
            yield Document(id=doc_id, title="" if distractor else title, text=text, linkable=not distractor)
    reporter.advance(size)


def _hotpot_paragraphs(question: object) -> list[tuple[str, str]] | None:
    if not isinstance(question, dict):
        return None
    if isinstance(question.get("paragraphs"), list):
        return [
            (str(p.get("title") or ""), str(p.get("context") or p.get("text") or ""))
            for p in question["paragraphs"] if isinstance(p, dict)
        ]
    context = question.get("context")
    if isinstance(context, list):  # [[title, [sentence, ...]], ...]
        return [
            (str(item[0]), _join_sentences(item[1]))
            for item in context if isinstance(item, list) and len(item) == 2
        ]
    if isinstance(context, dict) and "title" in context:  # the datasets-library layout
        return [(str(t), _join_sentences(s)) for t, s in zip(context["title"], context["sentences"], strict=False)]
    return None


def _join_sentences(sentences: object) -> str:
    if isinstance(sentences, list):
        return " ".join(str(s).strip() for s in sentences)
    return str(sentences)
