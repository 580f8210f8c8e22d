"""The documents CLI end to end: `index` with documents, `docs stats`, `docs search`, `link`,
documents added to an existing index, and dropped KG facts (--kg-keep) searchable as documents."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow  # builds indexes with the real embedding model through the CLI

REPO = Path(__file__).resolve().parents[1]
HIT_KEYS = {"chunk_id", "doc_id", "entity", "title", "text", "score"}


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "cli.py", *map(str, args)], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )


def cli_json(*args: str | Path) -> Any:
    result = cli(*args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    reports = REPO / "data" / "demo" / "reports"
    if not any(reports.glob("*.md")) or not (REPO / "data" / "demo" / "kg.ttl").exists():
        pytest.skip("demo corpus not written yet")
    out = tmp_path_factory.mktemp("cli") / "demo"
    result = cli("index", "--out", out, "--kg", REPO / "data" / "demo" / "kg.ttl",
                 "--docs", reports, "--docs-format", "files", "--collection", "domain")
    assert result.returncode == 0, result.stderr
    return out


def test_stats_of_the_demo_index(demo_index: Path) -> None:
    stats = cli_json("docs", "stats", "--index", demo_index, "--json")
    reports = len(list((REPO / "data" / "demo" / "reports").glob("*.md")))
    assert stats["documents"] == reports and stats["linked_documents"] == reports
    assert stats["collections"] == {"domain": reports} and stats["chunks"] >= reports
    assert stats["embedding"]["model"] == "all-MiniLM-L6-v2" and stats["embedding"]["dim"] == 384


def test_dense_and_sparse_search(demo_index: Path) -> None:
    report = sorted((REPO / "data" / "demo" / "reports").glob("*.md"))[0]
    title = report.read_text(encoding="utf-8").splitlines()[0].removeprefix("# ")
    dense = cli_json("docs", "search", "--index", demo_index, "--k", "3", "--json", f"annual report of {title}")
    assert len(dense) == 3 and all(set(hit) >= HIT_KEYS for hit in dense)
    assert dense[0]["title"] == title and dense[0]["entity"]
    sparse = cli_json("docs", "search", "--index", demo_index, "--k", "2", "--mode", "sparse",
                      "--collection", "domain", "--json", title)
    assert sparse[0]["title"] == title and sparse[0]["score"] >= sparse[1]["score"]
    assert cli_json("docs", "search", "--index", demo_index, "--k", "2", "--mode", "sparse",
                    "--collection", "web", "--json", title) == []
    chunks = cli_json("docs", "chunks", "--index", demo_index, "--entity", title, "--json")
    assert chunks and {c["doc_id"] for c in chunks} == {f"reports/{report.name}"}


def test_link_command(demo_index: Path) -> None:
    report = sorted((REPO / "data" / "demo" / "reports").glob("*.md"))[0]
    title = report.read_text(encoding="utf-8").splitlines()[0].removeprefix("# ")
    found = cli_json("link", "--index", demo_index, "--json", f"Who is the chief executive of {title}?")
    assert found[0]["label"] == title and set(found[0]) == {"mention", "entity", "label", "score", "reason"}
    bracketed = cli_json("link", "--index", demo_index, "--json", f"what does [{title}] make")
    assert bracketed[0]["reason"] == "bracket: exact match"


def test_documents_added_to_an_existing_index(demo_index: Path, shared_data: Path, tmp_path: Path) -> None:
    questions = json.loads((shared_data / "paper_questions" / "tog2" / "hotpotadv_dev.json").read_text())
    sample = tmp_path / "hotpot-sample.json"
    sample.write_text(json.dumps(questions[:5]))
    result = cli("index", "--out", demo_index, "--docs", sample, "--docs-format", "hotpot", "--collection", "web")
    assert result.returncode == 0, result.stderr
    assert "reused kg" in result.stdout
    paragraphs = {(p["title"], p["context"]) for q in questions[:5] for p in q["paragraphs"]}
    vectors = json.loads((demo_index / "manifest.json").read_text())["stages"]["vectors"]["counts"]
    assert vectors["vectors_computed"] == len(paragraphs)  # the rest come from the previous build
    stats = cli_json("docs", "stats", "--index", demo_index, "--json")
    assert stats["collections"]["web"] == len(paragraphs)
    assert stats["linked_documents"] == stats["collections"]["domain"]  # web texts are not linked
    hits = cli_json("docs", "search", "--index", demo_index, "--k", "2", "--collection", "web", "--json",
                    "1993 World champion figure skater")
    assert hits[0]["title"] == "Oksana Baiul" and hits[0]["entity"] is None


def test_dropped_kg_facts_are_searchable(shared_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "pq"
    result = cli("index", "--out", out, "--kg", shared_data / "pathquestion" / "2H-kb.txt", "--kg-format", "tsv",
                 "--kg-keep", "0.5", "--seed", "3", "--dropped-as-docs")
    assert result.returncode == 0, result.stderr
    dropped = [json.loads(line) for line in (out / "dropped_docs.jsonl").read_text().splitlines()]
    stats = cli_json("docs", "stats", "--index", out, "--json")
    assert stats["documents"] == len(dropped) == stats["linked_documents"]
    assert stats["collections"] == {"wiki": len(dropped)}
    doc = dropped[0]
    hits = cli_json("docs", "search", "--index", out, "--mode", "sparse", "--k", "5", "--json", doc["text"])
    assert hits[0]["doc_id"] == doc["id"] and hits[0]["entity"] == doc["entity"]


def test_clear_errors(tmp_path: Path) -> None:
    missing = cli("docs", "search", "--index", tmp_path / "nope", "--json", "x")
    assert missing.returncode == 2 and "no such index" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    bad = cli("docs", "search", "--index", tmp_path, "--collection", "news", "x")
    assert bad.returncode == 2 and "news" in bad.stderr
    not_index = cli("link", "--index", tmp_path, "--json", "who?")
    assert not_index.returncode == 2 and "not an index" in not_index.stderr
