"""Rejected input lines: counted per file and appended to `<index>/rejects.jsonl`."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import IO


@dataclass(frozen=True)
class Reject:
    """One input record that was skipped, with where it was and why."""

    file: str
    line: int | None
    reason: str
    text: str = ""

    def to_dict(self) -> dict[str, object]:
        return {"file": self.file, "line": self.line, "reason": self.reason, "text": self.text[:300]}


class RejectLog:
    """Appends rejects to a JSONL file and keeps a count per file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.counts: Counter[str] = Counter()
        self._fh: IO[str] | None = None

    def add(self, reject: Reject) -> None:
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = self.path.open("a", encoding="utf-8")
        self._fh.write(json.dumps(reject.to_dict(), ensure_ascii=False) + "\n")
        self.counts[reject.file] += 1

    def extend(self, rejects: list[Reject]) -> None:
        for reject in rejects:
            self.add(reject)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
