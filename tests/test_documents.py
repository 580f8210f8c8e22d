"""Document readers on real excerpts: Wikipedia XML (plain, .bz2, truncated), WikiExtractor,
JSONL, text/markdown/HTML folders, AdvHotpotQA paragraphs; format detection and rejects."""

from __future__ import annotations

import bz2
import html
import json
from pathlib import Path

import pytest

from ingest.base.errors import InputError
from ingest.base.progress import NullReporter
from ingest.doc_records import Document
from ingest.documents import detect_doc_format, read_documents
from ingest.rejects import RejectLog
from ingest.wikipedia import wikitext_to_text

REPO = Path(__file__).resolve().parents[1]


def read(path: Path, fmt: str, tmp_path: Path) -> tuple[list[Document], list[dict[str, object]]]:
    log = RejectLog(tmp_path / f"rejects-{path.name}-{len(list(tmp_path.glob('rejects-*')))}.jsonl")
    docs = list(read_documents(path, fmt, log, NullReporter()))
    log.close()
    rejects = [json.loads(line) for line in log.path.read_text().splitlines()] if log.path.exists() else []
    return docs, rejects


@pytest.fixture()
def wiki(shared_data: Path) -> Path:
    folder = shared_data / "dumps" / "wikipedia"
    if not folder.exists():
        pytest.skip("no Wikipedia excerpts in ../shared/data/dumps/wikipedia")
    return folder


def test_wikitext_noise_is_removed() -> None:
    wikitext = (
        "{{Infobox person|name=Foo|birth_date=1900}}\n'''Foo Bar''' ({{lang-de|Fu}}; born 1900) is a "
        "[[writer|novelist]] from [[Paris]].<ref>{{cite web|url=x|title=Y}}</ref> He wrote ''books''.\n"
        "[[File:Foo.jpg|thumb|A caption]]\n== Life ==\nHe lived &amp; wrote.<!-- hidden -->\n"
        '{| class="wikitable"\n|-\n| 1 || 2\n|}\n[[Category:Writers]]\n[[de:Foo Bar]]\n'
        "== References ==\n* a reference\n"
    )
    assert wikitext_to_text(wikitext) == (
        "Foo Bar (born 1900) is a novelist from Paris. He wrote books.\n\nLife\n\nHe lived & wrote."
    )


def test_wikipedia_bz2_dump_skips_redirects(wiki: Path, tmp_path: Path) -> None:
    path = wiki / "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
    assert detect_doc_format(path) == "wikipedia-xml"
    docs, rejects = read(path, "wikipedia-xml", tmp_path)
    assert len(docs) == 206 - 99 - 1 and not rejects  # 206 pages, 99 redirects, 1 non-article page
    titles = {d.title for d in docs}
    assert "Anarchism" in titles and "AccessibleComputing" not in titles
    anarchism = next(d for d in docs if d.title == "Anarchism")
    assert anarchism.id == "12"
    assert anarchism.text.startswith("Anarchism is a political philosophy")
    for marker in ("{{", "}}", "[[", "]]", "<ref", "'''", "Category:", "thumb|"):
        assert marker not in anarchism.text


def test_pages_without_siteinfo_and_many_revisions(wiki: Path, tmp_path: Path) -> None:
    docs, rejects = read(wiki / "enwiki-table-markup.xml.bz2", "auto", tmp_path)
    assert len(docs) == 5 and not rejects
    assert all("{|" not in d.text and "|-" not in d.text for d in docs)


def test_truncated_dump_keeps_complete_pages_and_records_the_truncation(wiki: Path, tmp_path: Path) -> None:
    path = wiki / "enwiki-20150112-pages-articles.head1MiB.xml"
    docs, rejects = read(path, "wikipedia-xml", tmp_path)
    assert len(docs) == 10  # the 73 complete pages hold 63 redirects
    assert len(rejects) == 1
    assert rejects[0]["file"] == str(path) and "truncated" in str(rejects[0]["reason"])
    assert "73 complete pages" in str(rejects[0]["reason"])


def test_truncated_bz2_dump(wiki: Path, tmp_path: Path) -> None:
    source = wiki / "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
    cut = tmp_path / "cut.xml.bz2"
    cut.write_bytes(source.read_bytes()[: 400_000])
    docs, rejects = read(cut, "wikipedia-xml", tmp_path)
    # The first 852 kB of XML decompress before the damage: 69 whole pages, 62 of them redirects.
    assert len(docs) == 7
    assert len(rejects) == 1 and "truncated" in str(rejects[0]["reason"])
    assert "after 69 complete pages" in str(rejects[0]["reason"])


def test_vietnamese_dump_and_its_wikiextractor_output_agree(wiki: Path, tmp_path: Path) -> None:
    xml_docs, _ = read(wiki / "viwiki-head10-pages-articles.xml", "auto", tmp_path)
    assert detect_doc_format(wiki / "viwiki-head10.wikiextractor-doc.txt") == "wikiextractor"
    we_docs, we_rejects = read(wiki / "viwiki-head10.wikiextractor-doc.txt", "auto", tmp_path)
    # WikiExtractor keeps redirects as empty documents: they are rejected as empty.
    assert {d.title for d in we_docs} == {d.title for d in xml_docs}
    assert all("empty text" in str(r["reason"]) for r in we_rejects)
    xml_text = {d.title: d.text for d in xml_docs}
    for doc in we_docs:
        first_words = doc.text.split()[:3]
        assert " ".join(first_words) in xml_text[doc.title]


def test_wikiextractor_json(wiki: Path, tmp_path: Path) -> None:
    path = wiki / "wikiextractor-json_enwiki_wiki_00.jsonl"
    assert detect_doc_format(path) == "wikiextractor"
    docs, rejects = read(path, "wikiextractor", tmp_path)
    assert len(docs) == 35 and not rejects
    assert docs[0].id == "12" and docs[0].title == "Anarchism"
    assert not docs[0].text.startswith("Anarchism\n")  # the repeated title line is dropped


def test_wikiextractor_output_folder(wiki: Path, tmp_path: Path) -> None:
    folder = tmp_path / "text" / "AA"
    folder.mkdir(parents=True)
    (folder / "wiki_00").write_bytes((wiki / "wikiextractor-json_enwiki_wiki_00.jsonl").read_bytes())
    (folder / "wiki_01.bz2").write_bytes(bz2.compress((wiki / "viwiki-head10.wikiextractor-doc.txt").read_bytes()))
    assert detect_doc_format(tmp_path / "text") == "wikiextractor"
    docs, _ = read(tmp_path / "text", "auto", tmp_path)
    assert len(docs) == 35 + 5


def test_jsonl_records_and_rejects(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text(
        '{"id": "a", "title": "Alpha", "text": "Alpha is first."}\n'
        "\n"
        '{"id": "b", "title": "Beta", "text": "Beta is second.", "entity": "Q42"}\n'
        "not json\n"
        '{"title": "No id", "text": "x"}\n'
        '{"id": "c", "title": "Empty", "text": "   "}\n'
        "[1, 2]\n",
        encoding="utf-8",
    )
    assert detect_doc_format(path) == "jsonl"
    docs, rejects = read(path, "jsonl", tmp_path)
    assert [(d.id, d.title, d.entity) for d in docs] == [("a", "Alpha", None), ("b", "Beta", "Q42")]
    assert [(r["line"], r["reason"]) for r in rejects] == [
        (4, "invalid JSON: Expecting value"),
        (5, "missing field 'id'"),
        (6, "empty text"),
        (7, "expected a JSON object"),
    ]
    assert all(r["file"] == str(path) for r in rejects)


def test_demo_reports_folder(tmp_path: Path) -> None:
    reports = REPO / "data" / "demo" / "reports"
    if not any(reports.glob("*.md")):
        pytest.skip("demo corpus not written yet")
    assert detect_doc_format(reports) == "files"
    docs, rejects = read(reports, "files", tmp_path)
    assert len(docs) == len(list(reports.glob("*.md"))) and not rejects
    for doc in docs:
        first_line = (reports / doc.id.split("/", 1)[1]).read_text(encoding="utf-8").splitlines()[0]
        assert first_line == f"# {doc.title}"
        assert not doc.text.startswith("#")


def test_text_markdown_html_files(tmp_path: Path) -> None:
    folder = tmp_path / "corpus"
    (folder / "sub").mkdir(parents=True)
    (folder / "plain_note.txt").write_text("Just text.\nSecond line.", encoding="utf-8")
    (folder / "sub" / "page.md").write_text("# Acme Corp\n\nAcme makes **anvils**. See [site](http://x).\n\n## History\nOld.", encoding="utf-8")
    (folder / "page.html").write_text(
        "<html><head><title>Acme &amp; Co</title><style>p{}</style></head>"
        "<body><h1>Ignored heading</h1><p>Acme is a company.</p><script>var x;</script><p>Founded 1900.</p></body></html>",
        encoding="utf-8",
    )
    (folder / "image.png").write_bytes(b"\x89PNG")
    (folder / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    docs, rejects = read(folder, "files", tmp_path)
    by_title = {d.title: d for d in docs}
    assert set(by_title) == {"plain note", "Acme Corp", "Acme & Co"}
    assert by_title["Acme Corp"].text == "Acme makes anvils. See site.\n\nHistory\nOld."
    assert by_title["Acme Corp"].id == "corpus/sub/page.md"
    assert "var x" not in by_title["Acme & Co"].text and "Acme is a company." in by_title["Acme & Co"].text
    reasons = sorted(str(r["reason"]) for r in rejects)
    assert reasons[0].startswith("not UTF-8 text") and reasons[1] == "unsupported file type .png"


def test_adv_hotpot_paragraphs(shared_data: Path, tmp_path: Path) -> None:
    path = shared_data / "paper_questions" / "tog2" / "hotpotadv_dev.json"
    assert detect_doc_format(path) == "hotpot"
    docs, rejects = read(path, "hotpot", tmp_path)
    questions = json.loads(path.read_text())
    unique = {(html.unescape(p["title"]), html.unescape(p["context"])) for q in questions for p in q["paragraphs"]}
    assert len(docs) == len(unique) == 1226 and not rejects
    distractors = [d for d in docs if not d.linkable]
    assert len(distractors) == sum(1 for t, _ in unique if t == "added") > 0
    assert all(d.title == "" for d in distractors)
    assert all(d.title != "added" for d in docs)
    assert not [d.title for d in docs if "&amp;" in d.title or "&amp;" in d.text]  # HTML escapes decoded
    assert any(d.title == "Goldie & Bear" for d in docs)
    baiul = [d for d in docs if d.title == "Oksana Baiul"]
    assert baiul and baiul[0].text.startswith("Oksana Baiul (born November 16, 1977)")


def test_hotpot_original_context_layout(tmp_path: Path) -> None:
    path = tmp_path / "hotpot.json"
    path.write_text(json.dumps([
        {"question": "q?", "context": [["Alpha", ["Alpha is a letter. ", "It is first."]], ["Beta", ["Beta is second."]]]}
    ]))
    docs, _ = read(path, "auto", tmp_path)
    assert [(d.title, d.text) for d in docs] == [("Alpha", "Alpha is a letter. It is first."), ("Beta", "Beta is second.")]


def test_missing_empty_and_unknown_inputs(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"nope\.jsonl"):
        detect_doc_format(tmp_path / "nope.jsonl")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(InputError, match="empty"):
        read(empty, "jsonl", tmp_path)
    odd = tmp_path / "odd.dat"
    odd.write_text("just some words\n")
    with pytest.raises(InputError, match="cannot detect the document format"):
        detect_doc_format(odd)
    broken = tmp_path / "broken.json"
    broken.write_text("[{\"paragraphs\": [")
    with pytest.raises(InputError, match=r"broken\.json"):
        read(broken, "hotpot", tmp_path)
    not_xml = tmp_path / "nothing.xml"
    not_xml.write_text("plain words, not XML")
    with pytest.raises(InputError, match=r"nothing\.xml"):
        read(not_xml, "wikipedia-xml", tmp_path)
