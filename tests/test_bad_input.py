"""Bad input, file by file: truncated and corrupt .gz/.bz2, invalid lines, bad UTF-8, empty,
missing and directory paths. A bad line is a reject (file, line, reason) and the rest loads;
an unusable file is one clear InputError naming it, and the build leaves no index behind."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import random
import zlib
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from index.build import build_index
from index.doc_options import DocSource
from ingest.base.errors import InputError
from ingest.base.progress import NullReporter
from ingest.doc_records import Document
from ingest.documents import iter_documents, read_documents
from ingest.kg_batch import LABEL
from ingest.rejects import RejectLog
from ingest.wikidata_json import read_wikidata_json
from tests.test_kg_ingest import build, rejects

WD = "http://www.wikidata.org/entity/"


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------


def fails_cleanly(tmp_path: Path, path: Path, fmt: str, pattern: str) -> str:
    """The build fails with one InputError line naming `path`, and leaves no index or temp folder."""
    with pytest.raises(InputError, match=pattern) as caught:
        build(tmp_path, path, fmt)
    message = str(caught.value)
    assert str(path) in message and "\n" not in message
    assert not (tmp_path / "ix").exists()
    assert not list(tmp_path.glob(".ix.tmp-*"))
    return message


def read_docs(path: Path, fmt: str, tmp_path: Path) -> tuple[list[Document], list[dict]]:
    log = RejectLog(tmp_path / f"rejects-{path.name}.jsonl")
    docs = list(read_documents(path, fmt, log, NullReporter()))
    log.close()
    found = [json.loads(line) for line in log.path.read_text().splitlines()] if log.path.exists() else []
    return docs, found


def random_ntriples(lines: int, seed: int = 0) -> bytes:
    """N-Triples that do not compress to almost nothing (so cutting the tail truncates data)."""
    rnd = random.Random(seed)
    return b"".join(
        b"<http://ex.org/e%d> <http://ex.org/p%d> <http://ex.org/e%d> .\n"
        % (rnd.getrandbits(48), rnd.randrange(50), rnd.getrandbits(48))
        for _ in range(lines)
    )


def truncated(compress: Callable[[bytes], bytes], data: bytes) -> bytes:
    packed = compress(data)
    assert len(packed) > 2000
    return packed[: len(packed) // 2]


def zlib_corrupt_gzip(data: bytes) -> bytes:
    """A gzip file of `data` with one flipped byte that makes the deflate stream itself invalid
    (zlib.error, which is not an OSError), rather than just failing the CRC check."""
    packed = gzip.compress(data)
    for position in range(20, len(packed) - 8):
        damaged = bytearray(packed)
        damaged[position] ^= 0xFF
        try:
            gzip.GzipFile(fileobj=io.BytesIO(bytes(damaged))).read()
        except zlib.error:
            return bytes(damaged)
        except (OSError, EOFError):
            continue
    raise AssertionError("no single-byte corruption gave a zlib.error")


# ------------------------------------------------------------------------------------------
# Wikidata JSON
# ------------------------------------------------------------------------------------------


def entity(qid: str, label: str | None = "Thing", claims: dict | None = None, **extra: object) -> dict:
    record: dict = {"id": qid, "type": "item", "labels": {}, "claims": claims or {}}
    if label is not None:
        record["labels"]["en"] = {"language": "en", "value": label}
    return record | extra


def item_claim(target: str) -> dict:
    value = {"entity-type": "item", "id": target}
    return {"mainsnak": {"snaktype": "value", "datavalue": {"type": "wikibase-entityid", "value": value}}, "rank": "normal"}


def wikidata_dump(entities: list[bytes]) -> bytes:
    return b"[\n" + b",\n".join(entities) + b"\n]\n"


def dumps(record: dict) -> bytes:
    return json.dumps(record).encode()


def test_wikidata_json_invalid_lines_are_rejected_and_the_rest_loads(tmp_path: Path) -> None:
    # An entity whose first claim is fine and whose second has no datavalue: it must contribute
    # nothing at all (no label, no first claim), only a reject.
    broken = entity("Q3", "Half", {"P1": [item_claim("Q1")], "P2": [{"mainsnak": {"snaktype": "value"}, "rank": "normal"}]})
    path = tmp_path / "dump.json"
    path.write_bytes(wikidata_dump([
        dumps(entity("Q1", "One", {"P31": [item_claim("Q2")]})),  # line 2
        b'{"id": "Q9", "labels": {',  # line 3: invalid JSON
        dumps(entity("Q4", "cafe")).replace(b"cafe", b"caf\xe9"),  # line 4: bad UTF-8
        dumps(broken),  # line 5
        b"42",  # line 6: not an object
        dumps(entity("Q2", "Two", {"P31": [item_claim("Q1")]})),  # line 7
    ]))
    counts = build(tmp_path, path, "wikidata-json")
    assert counts["triples"] == 2
    found = rejects(tmp_path)
    assert [r["line"] for r in found] == [3, 4, 5, 6]
    assert all(r["file"] == str(path) for r in found)
    assert found[0]["reason"].startswith("invalid JSON")
    assert found[1]["reason"].startswith("invalid UTF-8")
    assert found[2]["reason"].startswith("unexpected entity shape")
    assert found[3]["reason"].startswith("expected a JSON object")
    ids = {r["id"] for r in pq.read_table(tmp_path / "ix" / "entities.parquet").to_pylist()}
    assert ids == {WD + "Q1", WD + "Q2"}  # Q3 left no label and no edge behind


def test_wikidata_json_rejected_entity_contributes_nothing_to_its_batch(tmp_path: Path) -> None:
    bad_claim = {"mainsnak": {"snaktype": "value", "datavalue": {"type": "time"}}, "rank": "normal"}
    path = tmp_path / "dump.json"
    path.write_bytes(wikidata_dump([
        dumps(entity("Q1", "Kept", {"P31": [item_claim("Q2")]})),
        dumps(entity("Q3", "Dropped", {"P31": [item_claim("Q2")], "P585": [bad_claim]})),
    ]))
    batches = list(read_wikidata_json(path, ("en",)))
    facts = [q for b in batches for q in b.facts]
    meta = [m for b in batches for m in b.meta]
    assert [q.subject.value for q in facts] == [WD + "Q1"]
    assert meta == [(LABEL, WD + "Q1", "Kept")]
    assert [(r.line, r.reason[:22]) for b in batches for r in b.rejects] == [(3, "unexpected entity shap")]


def test_wikidata_json_label_follows_the_language_order(tmp_path: Path) -> None:
    labels = {"en": {"language": "en", "value": "Lighthouse"}, "fr": {"language": "fr", "value": "Phare"}}
    descriptions = {"de": {"language": "de", "value": "Turm"}, "fr": {"language": "fr", "value": "tour"}}
    sitelinks = {"enwiki": {"site": "enwiki", "title": "Lighthouse"}}
    record = {"id": "Q1", "labels": labels, "descriptions": descriptions, "sitelinks": sitelinks,
              "aliases": [], "claims": []}  # an empty map may be written as []
    path = tmp_path / "dump.json"
    path.write_bytes(wikidata_dump([dumps(record)]))

    def meta(languages: tuple[str, ...] | frozenset[str]) -> list[tuple[str, str]]:
        return [(kind, text) for b in read_wikidata_json(path, languages) for kind, _, text in b.meta]

    assert meta(("fr", "en")) == [("label", "Phare"), ("description", "tour"), ("wikipedia_title", "Lighthouse")]
    assert meta(("en", "fr")) == [("label", "Lighthouse"), ("description", "tour"), ("wikipedia_title", "Lighthouse")]
    assert meta(("de", "en")) == [("label", "Lighthouse"), ("description", "Turm"), ("wikipedia_title", "Lighthouse")]
    # A set carries no order: it is sorted, so the choice is the same on every run.
    assert meta(frozenset({"fr", "en"})) == meta(("en", "fr"))


@pytest.mark.parametrize(("suffix", "compress"), [(".gz", gzip.compress), (".bz2", bz2.compress)])
def test_wikidata_json_truncated_archive_is_a_clear_error(tmp_path: Path, suffix: str, compress: Callable[[bytes], bytes]) -> None:
    rnd = random.Random(1)
    lines = [dumps(entity(f"Q{rnd.getrandbits(40)}", f"label {rnd.getrandbits(64)}")) for _ in range(3000)]
    path = tmp_path / f"latest-all.json{suffix}"
    path.write_bytes(truncated(compress, wikidata_dump(lines)))
    fails_cleanly(tmp_path, path, "wikidata-json", "truncated or corrupt")


def test_compressed_file_with_no_data_is_empty(tmp_path: Path) -> None:
    path = tmp_path / "latest-all.json.gz"
    path.write_bytes(gzip.compress(b""))
    fails_cleanly(tmp_path, path, "wikidata-json", "empty")


# ------------------------------------------------------------------------------------------
# Turtle
# ------------------------------------------------------------------------------------------


def random_turtle(lines: int) -> bytes:
    body = random_ntriples(lines).replace(b"<http://ex.org/", b"ex:").replace(b"> ", b" ").replace(b"> .", b" .")
    return b"@prefix ex: <http://ex.org/> .\n" + body


def test_random_turtle_helper_is_valid_turtle(tmp_path: Path) -> None:
    path = tmp_path / "ok.ttl"
    path.write_bytes(random_turtle(50))
    assert build(tmp_path, path, "turtle")["triples"] == 50


@pytest.mark.parametrize(("suffix", "compress"), [(".gz", gzip.compress), (".bz2", bz2.compress)])
def test_truncated_turtle_archive_is_a_clear_error(tmp_path: Path, suffix: str, compress: Callable[[bytes], bytes]) -> None:
    path = tmp_path / f"kb.ttl{suffix}"
    path.write_bytes(truncated(compress, random_turtle(3000)))
    fails_cleanly(tmp_path, path, "turtle", "truncated or corrupt")


def test_corrupt_deflate_data_is_a_clear_error(tmp_path: Path) -> None:
    for name, data, fmt in (
        ("kb.ttl.gz", random_turtle(3000), "turtle"),
        ("kb.nt.gz", random_ntriples(3000), "ntriples"),
    ):
        path = tmp_path / name
        path.write_bytes(zlib_corrupt_gzip(data))
        fails_cleanly(tmp_path / name.replace(".", "_"), path, fmt, "truncated or corrupt")


def test_turtle_bad_utf8_is_rejected_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "kb.ttl"
    path.write_bytes(
        b"@prefix ex: <http://ex.org/> .\n"
        b"ex:a ex:p ex:b .\n"
        b'ex:a ex:name "caf\xe9" .\n'
        b"ex:c ex:p ex:d .\n"
    )
    counts = build(tmp_path, path, "turtle")
    assert counts["triples"] == 2
    found = rejects(tmp_path)
    assert [(r["file"], r["line"]) for r in found] == [(str(path), 3)]
    assert "UTF-8" in found[0]["reason"]


# ------------------------------------------------------------------------------------------
# TSV and MetaQA
# ------------------------------------------------------------------------------------------


def test_tsv_bad_utf8_line_is_rejected_and_the_rest_loads(tmp_path: Path) -> None:
    path = tmp_path / "kb.tsv"
    path.write_bytes(b"a\tr\tb\ncaf\xe9\tr\tc\nb\tr\tc\n")
    assert build(tmp_path, path, "tsv")["triples"] == 2
    found = rejects(tmp_path)
    assert [(r["file"], r["line"]) for r in found] == [(str(path), 2)]
    assert found[0]["reason"] == "invalid UTF-8 at byte 3"


def metaqa_kb(folder: Path, entities: bytes, relations: bytes, triples: bytes) -> Path:
    folder.mkdir()
    (folder / "entities.dict").write_bytes(entities)
    (folder / "relations.dict").write_bytes(relations)
    (folder / "train.txt").write_bytes(triples)
    return folder


ENTITIES = b"0\tAlien\n1\tRidley Scott\n2\t1979\n"
RELATIONS = b"0\tdirected_by\n1\trelease_year\n"


@pytest.mark.parametrize("missing", ["entities.dict", "relations.dict"])
def test_metaqa_missing_dict_is_named(tmp_path: Path, missing: str) -> None:
    kb = metaqa_kb(tmp_path / "kb", ENTITIES, RELATIONS, b"0\t0\t1\n")
    (kb / missing).unlink()
    message = fails_cleanly(tmp_path, kb, "metaqa", missing)
    assert missing in message


def test_metaqa_unknown_ids_are_rejected(tmp_path: Path) -> None:
    kb = metaqa_kb(tmp_path / "kb", ENTITIES, RELATIONS, b"0\t0\t1\n0\t7\t1\n9\t1\t2\n0\t1\t2\n0\t1\n")
    assert build(tmp_path, kb, "metaqa")["triples"] == 2
    found = rejects(tmp_path)
    assert [(r["line"], r["reason"]) for r in found] == [
        (2, "unknown relation id '7'"),
        (3, "unknown entity id '9'"),
        (5, "expected 3 ids, got 2"),
    ]
    assert all(r["file"] == str(kb / "train.txt") for r in found)


def test_metaqa_malformed_dict_lines_are_rejected_not_fatal(tmp_path: Path) -> None:
    entities = b"0\tAlien\nbroken line\n1\tRidley Scott\n\xff\tBad\n2\t1979\n"
    relations = b"0\tdirected_by\n1\trelease_year\textra\n"
    kb = metaqa_kb(tmp_path / "kb", entities, relations, b"0\t0\t1\n0\t1\t2\n")
    assert build(tmp_path, kb, "metaqa")["triples"] == 1  # release_year was the malformed line
    found = {(Path(r["file"]).name, r["line"]): r["reason"] for r in rejects(tmp_path)}
    assert found == {
        ("entities.dict", 2): "expected 'id<TAB>name'",
        ("entities.dict", 4): "invalid UTF-8 at byte 0",
        ("relations.dict", 2): "expected 'id<TAB>name'",
        ("train.txt", 2): "unknown relation id '1'",
    }
    labels = {r["label"] for r in pq.read_table(tmp_path / "ix" / "entities.parquet").to_pylist()}
    assert labels == {"Alien", "Ridley Scott"}


def test_metaqa_dict_without_one_good_line_is_a_clear_error(tmp_path: Path) -> None:
    kb = metaqa_kb(tmp_path / "kb", b"junk\nmore junk\n", RELATIONS, b"0\t0\t1\n")
    fails_cleanly(tmp_path, kb, "metaqa", r"entities\.dict.*no 'id<TAB>name' line")


# ------------------------------------------------------------------------------------------
# Unusable KG paths
# ------------------------------------------------------------------------------------------


def test_truncated_ntriples_bz2_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "kb.nt.bz2"
    path.write_bytes(truncated(bz2.compress, random_ntriples(3000)))
    fails_cleanly(tmp_path, path, "ntriples", "truncated or corrupt")
    fails_cleanly(tmp_path, path, "auto", "truncated or corrupt")


@pytest.mark.parametrize("fmt", ["ntriples", "auto"])
def test_empty_ntriples_is_a_clear_error(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "kb.nt"
    path.write_bytes(b"")
    fails_cleanly(tmp_path, path, fmt, "empty")
    packed = tmp_path / "kb.nt.gz"
    packed.write_bytes(gzip.compress(b""))
    fails_cleanly(tmp_path, packed, fmt, "empty")


@pytest.mark.parametrize("fmt", ["ntriples", "turtle", "tsv", "wikidata-json", "metaqa", "auto"])
def test_missing_kg_path_is_named(tmp_path: Path, fmt: str) -> None:
    fails_cleanly(tmp_path, tmp_path / "nowhere.nt", fmt, "no such file")


@pytest.mark.parametrize("fmt", ["ntriples", "nquads", "turtle", "tsv", "wikidata-json", "freebase", "auto"])
def test_directory_given_for_a_kg_file_is_named(tmp_path: Path, fmt: str) -> None:
    folder = tmp_path / "kb.nt"
    folder.mkdir()
    (folder / "part.nt").write_bytes(random_ntriples(3))
    fails_cleanly(tmp_path, folder, fmt, "directory")


def test_file_given_for_a_metaqa_folder_is_named(tmp_path: Path) -> None:
    path = tmp_path / "kb.txt"
    path.write_bytes(b"0\t0\t1\n")
    fails_cleanly(tmp_path, path, "metaqa", "expects a folder")


# ------------------------------------------------------------------------------------------
# Documents
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["jsonl", "hotpot", "wikipedia-xml"])
def test_directory_given_for_a_document_file_is_named(tmp_path: Path, fmt: str) -> None:
    folder = tmp_path / "docs.jsonl"
    folder.mkdir()
    (folder / "a.jsonl").write_text('{"id": "a", "text": "Alpha."}\n', encoding="utf-8")
    log = RejectLog(tmp_path / "rejects.jsonl")
    for read in (
        lambda: list(read_documents(folder, fmt, log, NullReporter())),
        lambda: list(iter_documents(folder, fmt, log)),
    ):
        with pytest.raises(InputError, match="is a directory") as caught:
            read()
        assert str(folder) in str(caught.value)


def test_directory_given_for_a_jsonl_source_leaves_no_index(tmp_path: Path) -> None:
    folder = tmp_path / "docs.jsonl"
    folder.mkdir()
    (folder / "a.jsonl").write_text('{"id": "a", "text": "Alpha."}\n', encoding="utf-8")
    with pytest.raises(InputError, match="is a directory"):
        build_index(tmp_path / "ix", [], [DocSource(folder, "jsonl", "wiki")])
    assert not (tmp_path / "ix").exists()


def test_jsonl_bad_utf8_line_is_rejected_with_its_line_number(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_bytes(
        b'\xef\xbb\xbf{"id": "a", "title": "Alpha", "text": "Alpha is first."}\n'  # BOM: still read
        b'{"id": "b", "title": "Caf\xe9", "text": "Latin-1 bytes."}\n'
        b'{"id": "c", "title": "Gamma", "text": "Gamma is third."}\n'
    )
    docs, found = read_docs(path, "jsonl", tmp_path)
    assert [d.id for d in docs] == ["a", "c"]
    assert [(r["file"], r["line"], r["reason"]) for r in found] == [(str(path), 2, "invalid UTF-8 at byte 25")]
    assert all("\ufffd" not in d.title + d.text for d in docs)


def test_truncated_jsonl_gz_keeps_the_documents_before_the_damage(tmp_path: Path) -> None:
    rnd = random.Random(2)
    lines = [json.dumps({"id": str(n), "text": f"document {rnd.getrandbits(64)}"}) for n in range(4000)]
    path = tmp_path / "docs.jsonl.gz"
    path.write_bytes(truncated(gzip.compress, "\n".join(lines).encode()))
    docs, found = read_docs(path, "jsonl", tmp_path)
    assert 0 < len(docs) < 4000
    assert [d.id for d in docs] == [str(n) for n in range(len(docs))]
    assert len(found) == 1 and "truncated" in found[0]["reason"] and found[0]["file"] == str(path)


def test_wikiextractor_bad_utf8_rejects_the_line_or_the_document(tmp_path: Path) -> None:
    path = tmp_path / "wiki_00"
    path.write_bytes(
        b'{"id": "1", "url": "u", "title": "One", "text": "One is a number."}\n'
        b'{"id": "2", "url": "u", "title": "Tw\xf6", "text": "Bad bytes."}\n'
        b'<doc id="3" url="u" title="Three">\nThree\nThree is \xff odd.\n</doc>\n'
        b'<doc id="4" url="u" title="Four">\nFour\nFour is even.\n</doc>\n'
    )
    docs, found = read_docs(path, "wikiextractor", tmp_path)
    assert [d.id for d in docs] == ["1", "4"]
    assert [(r["line"], r["reason"]) for r in found] == [
        (2, "invalid UTF-8 at byte 36"),
        (5, "invalid UTF-8 at byte 9 (document 3 skipped)"),
    ]


def test_wikipedia_xml_truncated_before_the_first_page_is_a_clear_error(tmp_path: Path) -> None:
    head = b'<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/">\n<siteinfo><sitename>W</sitename></siteinfo>\n'
    rnd = random.Random(3)
    filler = b"".join(b"<!-- %d -->\n" % rnd.getrandbits(64) for _ in range(4000))
    path = tmp_path / "dump.xml.bz2"
    path.write_bytes(truncated(bz2.compress, head + filler + b"<page><title>A</title></page></mediawiki>\n"))
    with pytest.raises(InputError, match="truncated or corrupt") as caught:
        read_docs(path, "wikipedia-xml", tmp_path)
    assert str(path) in str(caught.value)

