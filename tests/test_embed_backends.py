"""Embedding backends on real text: the ONNX export against sentence-transformers, an index built
with onnx-int8 and queried with the backend it was built with, and the errors that keep an index
from being queried with another model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from cli import main
from engine.access.documents import ParquetDocumentStore
from index.embed_backends import open_embedder
from index.embed_onnx import FILES, OnnxEmbedder, export_onnx
from index.embedder import SentenceTransformerEmbedder, default_model_path
from index.paths import IndexPaths
from ingest.base.errors import IndexError_, ModelError


@pytest.fixture(scope="module")
def paragraphs() -> list[str]:
    shared = Path(__file__).resolve().parents[2] / "shared" / "data"
    path = shared / "paper_questions" / "tog2" / "hotpotadv_dev.json"
    if not path.exists():
        pytest.skip(f"benchmark data not found at {path}")
    data = json.loads(path.read_text(encoding="utf-8"))
    texts = [p["context"] for q in data[:20] for p in q["paragraphs"]]
    return [*texts, "Paris.", "a"]  # short ones too, padded in a batch with the long ones


def test_onnx_vectors_match_sentence_transformers(paragraphs: list[str]) -> None:
    torch_vectors = SentenceTransformerEmbedder().encode(paragraphs)
    fp32 = OnnxEmbedder(backend="onnx").encode(paragraphs)
    int8 = OnnxEmbedder(backend="onnx-int8").encode(paragraphs)
    assert fp32.shape == int8.shape == torch_vectors.shape == (len(paragraphs), 384)
    assert np.allclose(np.linalg.norm(int8, axis=1), 1.0, atol=1e-4)
    fp32_cos, int8_cos = (fp32 * torch_vectors).sum(1), (int8 * torch_vectors).sum(1)
    assert fp32_cos.min() > 0.9999  # the same function, padding and all
    assert int8_cos.mean() > 0.98 and int8_cos.min() > 0.95  # measured: mean 0.993, min 0.985
    # the int8 vectors keep the ranking: each paragraph's nearest torch neighbour is mostly itself
    nearest = (int8 @ torch_vectors.T).argmax(axis=1)
    assert (nearest == np.arange(len(paragraphs))).mean() > 0.98


def test_backends_have_distinct_fingerprints() -> None:
    torch_fp = SentenceTransformerEmbedder().fingerprint
    fps = {torch_fp, OnnxEmbedder(backend="onnx").fingerprint, OnnxEmbedder(backend="onnx-int8").fingerprint}
    assert len(fps) == 3 and all(fp.startswith(torch_fp) for fp in fps)
    with pytest.raises(ModelError, match="unknown embedding backend"):
        open_embedder(None, "tensorrt")
    with pytest.raises(ModelError, match="needs the server's URL"):
        open_embedder(None, "server")


def test_export_is_idempotent_and_refuses_unsupported_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCALKG_EMBED_DIR", str(tmp_path / "embed"))
    folder = export_onnx()
    meta = json.loads((folder / "export.json").read_text())
    assert set(meta["files"]) == set(FILES.values()) and all((folder / f).stat().st_size > 1_000_000 for f in FILES.values())
    stamp = (folder / FILES["onnx-int8"]).stat().st_mtime_ns
    assert export_onnx() == folder and (folder / FILES["onnx-int8"]).stat().st_mtime_ns == stamp
    assert not [p for p in folder.parent.iterdir() if ".tmp-" in p.name]
    # a model with CLS pooling computes something else: refused, not silently mean-pooled
    other = tmp_path / "cls-model"
    import shutil

    shutil.copytree(default_model_path(), other)
    pooling = other / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text()) | {"pooling_mode_mean_tokens": False, "pooling_mode_cls_token": True}
    pooling.write_text(json.dumps(config))
    with pytest.raises(ModelError, match="mean pooling only"):
        export_onnx(other)


def test_index_built_with_onnx_int8_is_queried_with_it(tmp_path: Path, paragraphs: list[str]) -> None:
    shared = Path(__file__).resolve().parents[2] / "shared" / "data"
    data = json.loads((shared / "paper_questions" / "tog2" / "hotpotadv_dev.json").read_text(encoding="utf-8"))
    source = tmp_path / "hotpot.json"
    source.write_text(json.dumps(data[:15]))
    out = tmp_path / "index"
    result = CliRunner().invoke(main, ["index", "--out", str(out), "--docs", str(source), "--docs-format", "hotpot",
                                       "--embed-backend", "onnx-int8"])
    assert result.exit_code == 0, result.output
    stats = CliRunner().invoke(main, ["docs", "stats", "--index", str(out)])
    assert "onnx-int8" in stats.output, stats.output
    meta = json.loads((out / "vectors" / "meta.json").read_text())
    assert meta["backend"] == "onnx-int8" and len(meta["probe"]) == 384
    store = ParquetDocumentStore(IndexPaths(out))
    assert store.embedder.fingerprint.endswith("-onnx-int8-r1")
    question = data[3]
    hits = store.dense_search(question["question"], k=10)
    supporting = [p["context"][:60] for p in question["paragraphs"] if p.get("is_supp")]
    assert supporting and any(s in hit.chunk.text for hit in hits for s in supporting)
    # the torch embedder is another function: refused by name and fingerprint
    with pytest.raises(IndexError_, match="embedded with all-MiniLM-L6-v2"):
        ParquetDocumentStore(IndexPaths(out), SentenceTransformerEmbedder()).dense_search("x", k=1)
    # a recorded probe the model no longer reproduces: the same name now computes another thing
    meta["probe"] = list(-np.asarray(meta["probe"]))
    (out / "vectors" / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(IndexError_, match="probe cosine"):
        ParquetDocumentStore(IndexPaths(out)).dense_search("x", k=1)
    # a later build without --embed-backend keeps the recorded one; a new backend re-embeds
    again = CliRunner().invoke(main, ["index", "--out", str(out), "--embed-backend", "torch"])
    assert again.exit_code == 0, again.output
    assert json.loads((out / "vectors" / "meta.json").read_text())["backend"] == "torch"
