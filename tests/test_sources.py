"""Source fingerprints: content hashes for small inputs, cheap listings for large folders."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ingest import sources
from ingest.sources import fingerprint, same_content


def test_folder_fingerprint_follows_content(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("one")
    (tmp_path / "b.md").write_text("two")
    first = fingerprint(tmp_path)
    assert "sha256" in first
    (tmp_path / "b.md").write_text("twO")  # same size, other bytes
    assert not same_content(first, fingerprint(tmp_path))


def test_large_folder_is_fingerprinted_by_listing_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources, "HASH_LIMIT_BYTES", 4)
    (tmp_path / "a.md").write_text("one")
    (tmp_path / "b.md").write_text("two")
    read: list[Path] = []
    monkeypatch.setattr(sources, "file_sha256", lambda p: read.append(p) or "x")
    first = fingerprint(tmp_path)
    assert "listing" in first and "sha256" not in first and not read
    assert same_content(first, fingerprint(tmp_path))
    stat = (tmp_path / "b.md").stat()
    os.utime(tmp_path / "b.md", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert not same_content(first, fingerprint(tmp_path))  # a touched file counts as changed
    (tmp_path / "c.md").write_text("three")
    assert not same_content(first, fingerprint(tmp_path))
