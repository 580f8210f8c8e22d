"""A build stopped by SIGTERM cleans up after itself (issue 24, item 7).

Before: SIGTERM killed `index` where it stood, leaving its temp folder `.NAME.tmp-PID` and its
lock `.NAME.lock` until the next build. Now SIGTERM raises in the build (index/sigterm.py): the
temp folder and lock are removed, the index at the path is the previous one, and the CLI prints
one line and exits 143 (128 + SIGTERM). The swap itself is never cut: a SIGTERM that arrives
during it is acted on once the new index is in place.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from index.build import build_index
from index.kg_stage import KgSource
from index.manifest import read_manifest
from index.paths import IndexPaths

REPO = Path(__file__).resolve().parents[1]


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def _big_tsv(path: Path, lines: int = 400_000) -> None:
    """Enough facts that the kg stage runs for a few seconds."""
    with path.open("w", encoding="utf-8") as out:
        for i in range(lines):
            out.write(f"e{i}\tr{i % 50}\te{(i * 7919) % lines}\n")


def test_sigterm_removes_the_temp_folder_and_lock_and_exits_143(tmp_path: Path) -> None:
    small, big = tmp_path / "small.tsv", tmp_path / "big.tsv"
    small.write_text("a\tr\tb\nb\tr\tc\n", encoding="utf-8")
    _big_tsv(big)
    out = tmp_path / "ix"
    build_index(out, [KgSource(small, "tsv")], [])
    before = read_manifest(IndexPaths(out))
    env = {**os.environ, "LOCALKG_PROGRESS_SECONDS": "0"}
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "cli.py"), "index", "--out", str(out), "--kg", str(big), "--kg-format", "tsv"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    tmp = tmp_path / f".ix.tmp-{proc.pid}"
    deadline = time.monotonic() + 120
    while not tmp.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert tmp.exists(), "the build never started its temp folder"
    assert (tmp_path / ".ix.lock").exists()
    time.sleep(0.3)  # inside the kg stage
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, (proc.returncode, stdout[-1000:], stderr[-2000:])
    assert "build stopped by SIGTERM; its temp folder and lock were removed" in stderr
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1].startswith("Error: ")  # the last line, after the progress lines
    assert _leftovers(tmp_path) == []  # no .ix.tmp-PID, no .ix.lock
    assert read_manifest(IndexPaths(out)) == before  # the previous index, untouched


def test_the_handler_is_only_there_while_a_build_runs(tmp_path: Path) -> None:
    kb = tmp_path / "kb.tsv"
    kb.write_text("a\tr\tb\n", encoding="utf-8")
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    build_index(tmp_path / "ix", [KgSource(kb, "tsv")], [])
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert _leftovers(tmp_path) == []


def test_a_sigterm_during_the_swap_waits_for_its_end(tmp_path: Path) -> None:
    from index.sigterm import BuildTerminated, terminate_cleanly

    done = []
    raised = pytest.raises(BuildTerminated, match="after the new index was put in place")
    with raised, terminate_cleanly(tmp_path / "ix") as guard:
        assert signal.getsignal(signal.SIGTERM) is guard
        with guard.deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)  # the handler has run by now, and waited
            done.append("swap")
            guard.done = True
    assert done == ["swap"]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
