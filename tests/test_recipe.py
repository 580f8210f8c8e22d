"""`index --config FILE`: a checked-in TOML recipe builds the same index as the equivalent
flags (the demo's recipe, data/demo/index.toml, is what `make index` builds); flags given with
it override it; unknown keys and bad values fail naming the file and the key."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

import index.embedder
from cli import main
from index.embedder import model_fingerprint, resolve_model_path
from index.recipe import OptionShape, read_recipe
from ingest.base.errors import InputError

REPO = Path(__file__).resolve().parents[1]
DEMO_RECIPE = REPO / "data" / "demo" / "index.toml"
DEMO_FLAGS = ["--kg", REPO / "data/demo/kg.ttl", "--kg-format", "turtle",
              "--docs", REPO / "data/demo/reports", "--docs-format", "files", "--collection", "domain"]


class HashEmbedder:
    """Deterministic vectors from a hash of the text (no torch): what is compared here is the
    recipe of an index, not its vectors. Same model path and fingerprint as the real one."""

    dim = 8

    def __init__(self, model: str | None = None, batch_size: int = 64, **_: object) -> None:
        self.path = resolve_model_path(model)
        self.name = self.path.name
        self.fingerprint = model_fingerprint(self.path)

    def encode(self, texts: list[str], batch_size: int | None = None) -> np.ndarray:
        vectors = np.array([list(hashlib.sha256(t.encode()).digest()[: self.dim]) for t in texts], dtype=np.float32) + 1
        return vectors.reshape(len(texts), self.dim) / np.linalg.norm(vectors, axis=1, keepdims=True).reshape(-1, 1)


@pytest.fixture()
def hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index.embedder, "SentenceTransformerEmbedder", HashEmbedder)


def run_cli(*args: object, expect: int = 0) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == expect, result.output
    return result.output


def manifest(index: Path) -> dict[str, Any]:
    return dict(json.loads((index / "manifest.json").read_text()))


def test_the_demo_recipe_builds_the_index_of_the_demo_flags(tmp_path: Path, hash_embedder: None) -> None:
    run_cli("index", "--config", DEMO_RECIPE, "--out", tmp_path / "by-recipe")
    run_cli("index", "--out", tmp_path / "by-flags", *DEMO_FLAGS)
    recipe, flags = manifest(tmp_path / "by-recipe"), manifest(tmp_path / "by-flags")
    assert recipe["sources"] == flags["sources"] and recipe["build_options"] == flags["build_options"]
    fingerprints = {name: stage["fingerprint"] for name, stage in recipe["stages"].items()}
    assert fingerprints == {name: stage["fingerprint"] for name, stage in flags["stages"].items()}
    assert set(fingerprints) == {"kg", "docs", "vectors"}
    assert recipe["counts"] == flags["counts"]
    sha = hashlib.sha256(DEMO_RECIPE.read_bytes()).hexdigest()
    assert recipe["recipe"] == {"path": str(DEMO_RECIPE), "sha256": sha} and "recipe" not in flags
    # the recipe over the flags' index: nothing to build
    assert "up to date" in run_cli("index", "--config", DEMO_RECIPE, "--out", tmp_path / "by-flags")


def test_flags_override_the_recipe(tmp_path: Path, hash_embedder: None) -> None:
    run_cli("index", "--config", DEMO_RECIPE, "--out", tmp_path / "ix", "--chunk-size", "500", "--faiss", "flat")
    options = manifest(tmp_path / "ix")["build_options"]["docs"]
    assert (options["chunk_size"], options["faiss_kind"]) == (500, "flat")
    # a source option given on the command line replaces the recipe's list
    kb = tmp_path / "kb.tsv"
    kb.write_text("a\tr\tb\n")
    run_cli("index", "--config", DEMO_RECIPE, "--out", tmp_path / "kg-only", "--kg", kb, "--kg-format", "tsv",
            "--docs", REPO / "data/demo/reports")
    sources = manifest(tmp_path / "kg-only")["sources"]
    assert [s["path"] for s in sources["kg"]] == [str(kb)]


def test_a_recipe_in_list_form_with_paths_relative_to_it(tmp_path: Path) -> None:
    folder = tmp_path / "research"
    folder.mkdir()
    (folder / "kb.tsv").write_text("a\tr\tb\nb\tr\tc\n")
    (folder / "index.toml").write_text('out = "built/ix"\nkg = "kb.tsv"\nkg-format = ["tsv"]\nkg_keep = 1.0\n')
    output = run_cli("index", "--config", folder / "index.toml")
    assert "built kg" in output
    built = manifest(folder / "built" / "ix")
    assert built["sources"]["kg"][0]["path"] == str(folder / "kb.tsv") and built["counts"]["triples"] == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('out = "x"\nchunk-sise = 500\n', "{file}: unknown key 'chunk-sise' (the keys are the options of `index`:"),
        ('out = "x"\nfaiss = "fastest"\n', "{file}: key 'faiss': Invalid value for '--faiss': 'fastest' is not one of"),
        ('out = "x"\nchunk-size = "big"\n', "{file}: key 'chunk-size': Invalid value for '--chunk-size': 'big' is not a valid integer"),
        ('out = "x"\n[[docs]]\npath = "d"\nformt = "files"\n', "{file}: [[docs]] #1: unknown key 'formt' (one of path, format, collection)"),
        ('out = "x"\n[[kg]]\nformat = "tsv"\n', '{file}: [[kg]] #1: needs a path = "..."'),
        ('out = "x"\nkg-format = ["tsv"]\n[[kg]]\npath = "k"\n', "{file}: give kg sources either as [[kg]] tables or as lists, not both"),
        ('out = "x"\nchunk-size = [1, 2]\n', "{file}: key 'chunk-size' takes one value, not a list"),
        ('out = "x\n', "{file}: not a TOML recipe"),
    ],
)
def test_bad_recipes_fail_naming_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    recipe = tmp_path / "index.toml"
    recipe.write_text(text)
    output = run_cli("index", "--config", recipe, expect=2)
    assert message.format(file=recipe) in output
    assert not (tmp_path / "x").exists()


def test_read_recipe_maps_option_names(tmp_path: Path) -> None:
    recipe = tmp_path / "r.toml"
    recipe.write_text('faiss = "flat"\nchunk_size = 700\ndocs = "d"\n')
    shapes = {"faiss": OptionShape("faiss_kind"), "faiss_kind": OptionShape("faiss_kind"),
              "chunk-size": OptionShape("chunk_size"), "docs": OptionShape("docs", multiple=True, is_path=True)}
    assert read_recipe(recipe, shapes).values == {"faiss_kind": "flat", "chunk_size": 700, "docs": [str(tmp_path / "d")]}
    recipe.write_text('faiss = "flat"\nfaiss_kind = "hnsw"\n')
    with pytest.raises(InputError, match="key 'faiss_kind' given twice"):
        read_recipe(recipe, shapes)


def test_make_index_builds_the_recipe() -> None:
    dry = subprocess.run(["make", "-n", "index", "INDEX=/tmp/somewhere", "-o", "setup", "-o", ".venv/.localkg-setup"],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert "cli.py index --config data/demo/index.toml --out /tmp/somewhere" in dry
