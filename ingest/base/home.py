"""The user-level folders: `$LOCALKG_HOME`, and the models and embedding-export folders inside
it (or where `$LOCALKG_MODELS_DIR` and `$LOCALKG_EMBED_DIR` say)."""

from __future__ import annotations

import os
from pathlib import Path


def localkg_home() -> Path:
    """`$LOCALKG_HOME`, default `~/.cache/localkg`: the one home of user-level state."""
    return Path(os.environ.get("LOCALKG_HOME") or Path.home() / ".cache" / "localkg")


def models_dir() -> Path:
    """Where assembled models live: `$LOCALKG_MODELS_DIR`, else `$LOCALKG_HOME/models`."""
    override = os.environ.get("LOCALKG_MODELS_DIR")
    return Path(override) if override else localkg_home() / "models"


def embed_home() -> Path:
    """Where ONNX exports of embedding models live: `$LOCALKG_EMBED_DIR`, else `$LOCALKG_HOME/embed`."""
    override = os.environ.get("LOCALKG_EMBED_DIR")
    return Path(override) if override else localkg_home() / "embed"
