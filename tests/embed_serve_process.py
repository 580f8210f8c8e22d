"""`cli.py embed serve` in a child process for the server tests: started on a free port, its URL
read from the line it prints, its log drained so that it never blocks on a full pipe."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@contextmanager
def embed_serve(backend: str = "onnx-int8") -> Iterator[tuple[subprocess.Popen[str], str]]:
    """The serving process and its URL; terminated on exit."""
    process = subprocess.Popen(
        [sys.executable, "cli.py", "embed", "serve", "--port", "0", "--embed-backend", backend],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline, url = time.monotonic() + 120, None
        assert process.stderr is not None
        while time.monotonic() < deadline and url is None:
            line = process.stderr.readline()
            if not line and process.poll() is not None:
                pytest.fail(f"embed serve exited with {process.returncode}")
            if match := re.search(r"listening on (\S+)", line):
                url = match.group(1)
        assert url, "embed serve did not start"
        # drain the log (a line per request) so that the server never blocks on a full pipe
        threading.Thread(target=lambda: [None for _ in process.stderr], daemon=True).start()  # type: ignore[union-attr]
        yield process, url
    finally:
        process.terminate()
        process.wait(timeout=30)
