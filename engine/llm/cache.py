"""Persistent LLM response cache: re-running a batch replays answers instead of recomputing them.

One sqlite3 file (`$LOCALKG_LLM_CACHE`, default `$LOCALKG_HOME/llm-cache.sqlite3`) in WAL mode
with a busy timeout, so several batch processes can read and write it at once. A key is the
sha256 of the canonical JSON of everything that determines a reply: the model fingerprint,
the messages, the schema and the sampling parameters (temperature, max_tokens, seed). Only
successful replies are stored.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ingest.base.home import localkg_home

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    cached_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    seconds REAL NOT NULL,
    created REAL NOT NULL
)
"""


def default_cache_path() -> Path:
    override = os.environ.get("LOCALKG_LLM_CACHE")
    return Path(override) if override else localkg_home() / "llm-cache.sqlite3"


def cache_key(fingerprint: str, messages: list[dict[str, Any]], schema: dict[str, Any] | None,
              temperature: float, max_tokens: int, seed: int) -> str:
    """The key of one call: every input that can change the reply, canonically serialised."""
    payload = {
        "fingerprint": fingerprint,
        "messages": messages,
        "schema": schema,
        "temperature": float(temperature),
        "max_tokens": int(max_tokens),
        "seed": int(seed),
    }
    canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CachedReply:
    text: str
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    seconds: float  # what the original call took


class ResponseCache:
    """A thread-safe handle on the sqlite cache; one connection per handle, guarded by a lock."""

    def __init__(self, path: Path | None = None, *, busy_timeout_s: float = 30.0) -> None:
        self.path = path or default_cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            self.path, timeout=busy_timeout_s, check_same_thread=False, isolation_level=None
        )
        self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        self._enable_wal(busy_timeout_s)
        self._db.execute("PRAGMA synchronous = NORMAL")
        self._db.execute(_SCHEMA)

    def _enable_wal(self, timeout_s: float) -> None:
        """Switch to WAL. SQLite may answer "database is locked" at once, without waiting, when
        several processes open a new file together (the switch needs an exclusive lock, and the
        busy handler is skipped to avoid a deadlock), so the switch is retried until the timeout."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self._db.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def get(self, key: str) -> CachedReply | None:
        with self._lock:
            row = self._db.execute(
                "SELECT text, prompt_tokens, cached_tokens, completion_tokens, seconds "
                "FROM responses WHERE key = ?",
                (key,),
            ).fetchone()
        return CachedReply(*row) if row else None

    def put(self, key: str, fingerprint: str, reply: CachedReply) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (key, fingerprint, reply.text, reply.prompt_tokens, reply.cached_tokens,
                 reply.completion_tokens, reply.seconds, time.time()),
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
