"""The CLI: every command explains itself, errors are one line with a non-zero exit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli import main

REPO = Path(__file__).resolve().parents[1]


def all_commands() -> list[list[str]]:
    found: list[list[str]] = []

    def walk(command: object, prefix: list[str]) -> None:
        found.append(prefix)
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*prefix, name])

    walk(main, [])
    return found


@pytest.mark.parametrize("command", all_commands(), ids=lambda c: " ".join(c) or "main")
def test_every_command_has_help(command: list[str]) -> None:
    result = CliRunner().invoke(main, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output
    # a real explanation, not just the usage line
    assert len(result.output.splitlines()) > 4


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "cli.py", *args], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_index_and_kg_commands_end_to_end(tmp_path: Path, shared_data: Path) -> None:
    out = tmp_path / "pq"
    kb = shared_data / "pathquestion" / "2H-kb.txt"
    built = run_cli("index", "--out", str(out), "--kg", str(kb), "--kg-format", "tsv")
    assert built.returncode == 0, built.stderr
    again = run_cli("index", "--out", str(out), "--kg", str(kb), "--kg-format", "tsv")
    assert "up to date, nothing to do" in again.stdout
    stats = json.loads(run_cli("kg", "stats", "--index", str(out), "--json").stdout)
    assert stats["triples"] == 1211
    assert {"entities", "relations", "rejects"} <= set(stats)
    head, relation, _tail = kb.read_text(encoding="utf-8").splitlines()[0].split("\t")
    rels = json.loads(run_cli("kg", "relations", "--index", str(out), "--entity", head, "--json").stdout)
    assert any(r["label"] == relation.replace("_", " ") for r in rels["relations"])
    tails = json.loads(run_cli("kg", "tails", "--index", str(out), "--entity", head, "--relation", relation, "--json").stdout)
    assert tails["tails"]
    rows = json.loads(run_cli("kg", "sparql", "--index", str(out), "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }").stdout)
    assert rows == [{"n": "1211"}]


@pytest.mark.parametrize(
    "args, message",
    [
        (["kg", "stats", "--index", "/nonexistent/index"], "no such index"),
        (["index", "--out", "{tmp}/x", "--kg", "/nonexistent.nt"], "no such file"),
        (["index", "--out", "{tmp}/x", "--kg", "{tmp}", "--kg-format", "ntriples"], "is a directory"),
        (["index", "--out", "{tmp}/x"], "nothing to index"),
        (["index", "--out", "{tmp}/x", "--kg", "{tmp}/a.nt", "--kg", "{tmp}/a.nt", "--kg-format", "ntriples", "--kg-format", "tsv", "--kg-format", "tsv"], "given 3 times for 2 sources"),
    ],
)
def test_errors_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "a.nt").write_text("<http://e/a> <http://e/p> <http://e/b> .\n", encoding="utf-8")
    result = run_cli(*[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert message in lines[0]


def test_sparql_errors_and_updates_are_refused(metaqa_index: Path) -> None:
    bad = run_cli("kg", "sparql", "--index", str(metaqa_index), "SELEKT nonsense")
    assert bad.returncode != 0 and "SPARQL query failed" in bad.stderr
    update = run_cli("kg", "sparql", "--index", str(metaqa_index), "DELETE WHERE { ?s ?p ?o }")
    assert update.returncode != 0
    count = run_cli("kg", "sparql", "--index", str(metaqa_index), "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
    assert json.loads(count.stdout) == [{"n": "133582"}]
