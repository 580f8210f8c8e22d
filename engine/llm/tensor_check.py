"""llama.cpp's own check of a GGUF file's tensor data, for models given by path (which have no
pinned checksum): see engine/llm/models.py, which runs it once per file identity."""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ingest.base.errors import ModelError


def check_tensor_data(path: Path, repair: str) -> bool:
    """llama.cpp's own check of the tensor data (`check_tensors` when loading, no context made):
    NaN or infinite values and invalid block scales, which random damage to a quantized file
    produces within a few KB. ModelError naming `repair` when it finds damage. True when the
    check ran; False when it could not: llama-cpp-python is not installed, or llama.cpp cannot
    load the file for another reason (an architecture it does not know, ...), which loading the
    model reports in its own words."""
    try:
        import llama_cpp
    except ImportError:
        return False
    params = llama_cpp.llama_model_default_params()
    params.check_tensors = True
    with _llama_messages() as messages:
        llama_cpp.llama_backend_init()
        model = llama_cpp.llama_model_load_from_file(os.fsencode(path), params)
        if model:
            llama_cpp.llama_model_free(model)
    if model:
        return True
    damage = [m for m in messages if "validate" in m]
    if damage:
        raise ModelError(f"model file {path} has damaged tensor data (llama.cpp's tensor check: "
                         f"{damage[0]}); {repair}")
    return False


@contextlib.contextmanager
def _llama_messages() -> Iterator[list[str]]:
    """Collect what llama.cpp logs (its log callback, and ggml's own lines on file descriptor 2)
    instead of printing it; the lines are in the list after the block."""
    import llama_cpp

    lines: list[str] = []

    @llama_cpp.llama_log_callback
    def collect(level: int, text: bytes, user_data: Any) -> None:
        lines.append(text.decode("utf-8", "replace"))

    previous = getattr(getattr(llama_cpp, "_logger", None), "llama_log_callback", None)
    llama_cpp.llama_log_set(collect, ctypes.c_void_p(0))
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as captured:
            os.dup2(captured.fileno(), 2)
            try:
                yield lines
            finally:
                os.dup2(saved, 2)
                captured.seek(0)
                lines.extend(captured.read().decode("utf-8", "replace").splitlines())
    finally:
        os.close(saved)
        if previous is not None:
            llama_cpp.llama_log_set(previous, ctypes.c_void_p(0))
    lines[:] = [line.strip() for line in lines if line.strip()]
