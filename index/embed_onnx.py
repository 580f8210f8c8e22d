"""Sentence embeddings through ONNX Runtime: the same model as sentence-transformers, about three
times the texts per second on a CPU when its weights are int8.

The ONNX file is exported offline from the local sentence-transformers folder (never the network)
with torch's exporter, once, into `$LOCALKG_EMBED_DIR/<model fingerprint>/` (default
`$LOCALKG_HOME/embed`); `make setup` does it for the packaged default, and any other folder is
exported on first use, in a few seconds. Two variants:
  model.onnx       float32, the transformer as it is (vectors equal torch's to ~1e-6)
  model.int8.onnx  dynamic int8 quantisation of the MatMul weights, per output channel. Only the
                   MatMuls: quantising the embedding lookup (Gather) too drops the mean cosine to
                   the torch vectors from 0.993 to 0.957 for a small gain in speed.
`export.json` records the source model, the recipe and the files' sha256.

Encoding: the model folder's own fast tokenizer (tokenizer.json) with its max_seq_length, texts
sorted by length so that a batch pads little, mean pooling over the attention mask (the pooling
the packaged model declares), L2 normalisation.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from index.embedder import model_display_name, model_fingerprint, resolve_model_path
from ingest.base.errors import ModelError
from ingest.base.hashing import file_sha256
from ingest.base.home import embed_home

ONNX_BACKENDS = ("onnx", "onnx-int8")
# Bumped when the export or quantisation recipe changes (part of the embedder's fingerprint).
RECIPE_VERSION = 1
OPSET = 17
FILES = {"onnx": "model.onnx", "onnx-int8": "model.int8.onnx"}
EXPORT_META = "export.json"
# Texts per ONNX Runtime call. int8: one. Its activations are quantised per call (dynamic
# quantisation: one scale per input tensor), so in a batch a text's vector would depend on the
# texts beside it (cosine 0.976-0.993 between batchings, measured); one text per call makes it a
# function of the text alone, and pads nothing. float32 has no such effect: small batches.
BATCH = {"onnx": 8, "onnx-int8": 1}



def export_dir(model_path: Path) -> Path:
    """Where the ONNX export of the model folder `model_path` lives."""
    return embed_home() / model_fingerprint(model_path)


def export_onnx(model: str | Path | None = None, *, force: bool = False) -> Path:
    """Export the sentence-transformers folder `model` (None: the packaged default) to ONNX,
    float32 and int8; returns the export folder. Already exported: returns it unchanged. Written
    to a temp folder and renamed, so a killed export leaves nothing half-written."""
    path = resolve_model_path(model)
    final = export_dir(path)
    if not force and _export_complete(final):
        return final
    _check_supported(path)
    tmp = final.with_name(f"{final.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        _export_float(path, tmp / FILES["onnx"])
        _quantize(tmp / FILES["onnx"], tmp / FILES["onnx-int8"])
        meta = {
            "source": str(path),
            "source_fingerprint": model_fingerprint(path),
            "recipe": RECIPE_VERSION,
            "opset": OPSET,
            "files": {name: file_sha256(tmp / name) for name in FILES.values()},
        }
        (tmp / EXPORT_META).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        shutil.rmtree(final, ignore_errors=True)
        try:
            os.replace(tmp, final)
        except OSError:
            if not _export_complete(final):  # not another process's export finishing first
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def _export_complete(folder: Path) -> bool:
    try:
        meta = json.loads((folder / EXPORT_META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return meta.get("recipe") == RECIPE_VERSION and all((folder / name).is_file() for name in FILES.values())


def _check_supported(path: Path) -> None:
    """Only what this module computes: a transformer, mean pooling, (normalisation)."""
    modules = path / "modules.json"
    if modules.is_file():
        kinds = [m.get("type", "") for m in json.loads(modules.read_text(encoding="utf-8"))]
        extra = [k for k in kinds if not k.endswith((".Transformer", ".Pooling", ".Normalize"))]
        if extra:
            raise ModelError(f"{path}: the ONNX backend supports transformer + pooling models only, not {', '.join(extra)}")
    for pooling in path.glob("*_Pooling/config.json"):
        config = json.loads(pooling.read_text(encoding="utf-8"))
        if not config.get("pooling_mode_mean_tokens") or any(
            config.get(k) for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_lasttoken")
        ):
            raise ModelError(f"{pooling}: the ONNX backend supports mean pooling only")
    if not (path / "tokenizer.json").is_file():
        raise ModelError(f"{path}: the ONNX backend needs the model's fast tokenizer (tokenizer.json)")


def _export_float(path: Path, out: Path) -> None:
    import torch
    from transformers import AutoModel

    base = AutoModel.from_pretrained(str(path), local_files_only=True).eval()

    class LastHidden(torch.nn.Module):
        """Keyword arguments for the model; ONNX export passes inputs by position."""

        def __init__(self, model: Any) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state

    names = ["input_ids", "attention_mask", "token_type_ids"]
    dummy = torch.ones((2, 8), dtype=torch.long)
    # The tracer warns about shape checks it folds; padded batches still match torch's vectors
    # (tests/test_embed_backends.py compares them).
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            LastHidden(base), (dummy, torch.ones_like(dummy), torch.zeros_like(dummy)), str(out),
            input_names=names, output_names=["last_hidden_state"],
            dynamic_axes={n: {0: "batch", 1: "tokens"} for n in [*names, "last_hidden_state"]},
            opset_version=OPSET, dynamo=False,
        )


def _quantize(source: Path, out: Path) -> None:
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.getLogger().setLevel(logging.ERROR)  # its "consider pre-processing" advice
    quantize_dynamic(str(source), str(out), weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=["MatMul"])



class OnnxEmbedder:
    """An `Embedder` running the ONNX export of a local sentence-transformers folder."""

    def __init__(self, model: str | Path | None = None, backend: str = "onnx-int8",
                 batch_size: int | None = None, threads: int | None = None) -> None:
        if backend not in ONNX_BACKENDS:
            raise ModelError(f"unknown ONNX backend {backend!r}; choose from {', '.join(ONNX_BACKENDS)}")
        self.path = resolve_model_path(model)
        self.backend = backend
        self.batch_size = batch_size or BATCH[backend]
        env_threads = os.environ.get("LOCALKG_EMBED_THREADS")
        self.threads = threads or (int(env_threads) if env_threads else (os.cpu_count() or 1))
        self._source_fp: str | None = None
        self._session: Any = None
        self._tokenizer: Any = None
        self._dim: int | None = None
        self._pool: ThreadPoolExecutor | None = None

    @property
    def name(self) -> str:
        return model_display_name(self.path)

    @property
    def fingerprint(self) -> str:
        """The source model's fingerprint, the backend and the export recipe: int8 vectors are
        close to torch's, not equal, so an index never mixes them."""
        if self._source_fp is None:
            self._source_fp = model_fingerprint(self.path)
        return f"{self._source_fp}-{self.backend}-r{RECIPE_VERSION}"

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self.encode(["dimension probe"]).shape[1])
        return self._dim

    def _load(self) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        folder = export_onnx(self.path)
        options = ort.SessionOptions()
        # One thread per call and `threads` calls at once: small calls keep every core busy
        # (measured: 2x the texts/s of one call on two threads, for one-text calls).
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        self._session = ort.InferenceSession(str(folder / FILES[self.backend]), options, providers=["CPUExecutionProvider"])
        tokenizer = Tokenizer.from_file(str(self.path / "tokenizer.json"))
        tokenizer.enable_truncation(_max_length(self.path))
        tokenizer.enable_padding()
        self._tokenizer = tokenizer
        self._inputs = {i.name for i in self._session.get_inputs()}

    def encode(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        """Normalised float32 vectors, one row per text (an empty input gives a 0 x dim array)."""
        if self._session is None:
            self._load()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        size = self.batch_size  # the caller's batch is for progress; ORT runs small batches
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)
        batches = [order[start:start + size] for start in range(0, len(order), size)]
        if self.threads > 1 and len(batches) > 1:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="localkg-onnx")
            results = list(self._pool.map(lambda rows: self._encode_batch([texts[i] for i in rows]), batches))
        else:
            results = [self._encode_batch([texts[i] for i in rows]) for rows in batches]
        out = np.zeros((len(texts), results[0].shape[1]), dtype=np.float32)
        for rows, vectors in zip(batches, results, strict=True):
            out[rows] = vectors
        return out

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        encoded = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feed)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return np.ascontiguousarray(pooled / norms, dtype=np.float32)


def _max_length(path: Path) -> int:
    """The model's max_seq_length (sentence_bert_config.json), else the transformer's limit."""
    for name, key in (("sentence_bert_config.json", "max_seq_length"), ("config.json", "max_position_embeddings")):
        try:
            return int(json.loads((path / name).read_text(encoding="utf-8"))[key])
        except (OSError, KeyError, ValueError):
            continue
    return 512
