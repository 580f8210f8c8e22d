"""The model side of the embeddings server: one thread runs the embedder, requests wait their turn.

`EncodeWorker.encode` is awaited by the server's request handlers; the worker thread takes every
job waiting (up to `max_texts` texts), encodes them in one `embedder.encode` call (the embedder
spreads a call over its own threads) and hands each job its rows. A call that fails is repeated
job by job, so that one bad request fails alone.

Texts are cut to the model's window before they reach the tokenizer (`clip`): a text keeps at
most max_seq_length x CHARS_PER_TOKEN characters. The embedder truncates to max_seq_length tokens
anyway (TEI's --auto-truncate behaviour), so the cut changes no vector unless the text's first
max_seq_length tokens span more than CHARS_PER_TOKEN characters each on average (runs of
whitespace, words over 100 characters); it keeps a 10 MB string from being tokenised whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from index.embedder import Embedder

CHARS_PER_TOKEN = 32
DEFAULT_MAX_SEQ = 512


def max_seq_length(embedder: Embedder) -> int:
    """The model's window in tokens: its folder's sentence_bert_config.json (what both the
    sentence-transformers and the ONNX backends truncate to) or config.json, else 512."""
    path = getattr(embedder, "path", None)
    if isinstance(path, Path):
        from index.embed_onnx import _max_length

        return _max_length(path)
    return DEFAULT_MAX_SEQ


def clip(text: str, max_chars: int) -> tuple[str, bool]:
    """The text cut to `max_chars` characters, and whether it was cut."""
    return (text[:max_chars], True) if len(text) > max_chars else (text, False)


@dataclass
class _Job:
    texts: Sequence[str]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[np.ndarray]


class EncodeWorker:
    """One thread that owns the embedder; `await worker.encode(texts)` from any event loop."""

    def __init__(self, embedder: Embedder, max_texts: int = 256) -> None:
        self.embedder = embedder
        self.max_texts = max_texts
        self.texts_embedded = 0
        self._queue: queue.Queue[_Job | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="localkg-embed-worker", daemon=True)
        self._thread.start()

    @property
    def waiting(self) -> int:
        """Jobs queued and not yet taken by the worker."""
        return self._queue.qsize()

    async def encode(self, texts: Sequence[str]) -> np.ndarray:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[np.ndarray] = loop.create_future()
        self._queue.put(_Job(texts, loop, future))
        return await future

    def close(self) -> None:
        """Stop the thread once the jobs queued before this call are done."""
        self._queue.put(None)

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            jobs, count = [job], len(job.texts)
            while count < self.max_texts:
                try:
                    extra = self._queue.get_nowait()
                except queue.Empty:
                    break
                if extra is None:
                    self._queue.put(None)  # stop after this round
                    break
                jobs.append(extra)
                count += len(extra.texts)
            self._encode(jobs)

    def _encode(self, jobs: list[_Job]) -> None:
        try:
            vectors = self.embedder.encode([text for job in jobs for text in job.texts])
        except Exception as exc:
            if len(jobs) > 1:
                for job in jobs:
                    self._encode([job])
            else:
                _settle(jobs[0], exc)
            return
        self.texts_embedded += len(vectors)
        start = 0
        for job in jobs:
            _settle(job, vectors[start:start + len(job.texts)])
            start += len(job.texts)


def _settle(job: _Job, outcome: np.ndarray | BaseException) -> None:
    def apply(future: asyncio.Future[Any] = job.future) -> None:
        if future.done():  # the request went away meanwhile
            return
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)

    with contextlib.suppress(RuntimeError):  # a closed loop: the server has stopped
        job.loop.call_soon_threadsafe(apply)
