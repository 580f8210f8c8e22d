"""Shared fixtures. Every test runs with LOCALKG_HOME in a temp folder so nothing touches the
user's files; real benchmark data is read from ../shared/data (tests skip when it is absent).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("localkg-home")
    monkeypatch.setenv("LOCALKG_HOME", str(home))
    # Assembled model files are large: tests reuse the real cache unless told otherwise.
    real_models = Path(os.environ.get("LOCALKG_MODELS_DIR", Path.home() / ".cache" / "localkg" / "models"))
    monkeypatch.setenv("LOCALKG_MODELS_DIR", str(real_models))
    # ONNX exports of the embedding model (`make setup` writes them) are reused the same way.
    real_embed = Path(os.environ.get("LOCALKG_EMBED_DIR", Path.home() / ".cache" / "localkg" / "embed"))
    monkeypatch.setenv("LOCALKG_EMBED_DIR", str(real_embed))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.exists():
        pytest.skip(f"benchmark data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def pq2h_index(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    """The PathQuestion 2-hop KB, built once per session (the batch tests read it)."""
    from index.build import build_index
    from index.kg_stage import KgSource

    out = tmp_path_factory.mktemp("indexes") / "pq2h"
    build_index(out, [KgSource(shared_data / "pathquestion" / "2H-kb.txt", "tsv")], [])
    return out


@pytest.fixture(scope="session")
def pq2h_questions(shared_data: Path) -> Path:
    return shared_data / "pathquestion" / "PQ-2H.txt"


@pytest.fixture(scope="session")
def metaqa_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The full MetaQA KB (133,582 triples) built once per session."""
    if not (SHARED_DATA / "metaqa" / "kb").exists():
        pytest.skip("MetaQA KB not found in ../shared/data")
    from index.build import build_index
    from index.kg_stage import KgSource

    out = tmp_path_factory.mktemp("indexes") / "metaqa"
    build_index(out, [KgSource(SHARED_DATA / "metaqa" / "kb", "metaqa")], [])
    return out


@pytest.fixture(scope="session")
def demo_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo index (data/demo: the company KG and its reports), built once per session in a
    temp folder, so real-model tests never depend on `make demo` having run."""
    from index.build import build_index
    from index.doc_options import DocOptions, DocSource
    from index.kg_stage import KgSource

    demo = REPO / "data" / "demo"
    out = tmp_path_factory.mktemp("demo-index") / "demo"
    build_index(out, [KgSource(demo / "kg.ttl", "turtle")], [DocSource(demo / "reports", "files", "domain")],
                doc_options=DocOptions(entity_vectors=False, faiss_kind="flat"))
    return out
