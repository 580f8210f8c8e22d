"""The prompts and raw replies of a batch run: `RUN/calls/<method>.jsonl`, one line per question.

A record (`RUN/<method>.jsonl`) keeps the cost of every LLM call; what was asked and what the
model replied (`AnswerRecord.llm_transcript`) would make those lines unreadable, so the batch
moves it here, keyed by question id:

    {"id": "q1", "method": "tog", "config_hash": "…", "calls": [{"stage", "messages", "reply",
     "error", "cache_hit"}, …]}

A transcript line is written (and fsync'd) before its record, so a finished question always has
one. A run killed between the two answers that question again on resume and appends a second
line for it; readers keep the last line of each id (`read_transcripts`). A torn last line (a kill
mid-write) is cut on open, as for record files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

CALLS_DIR = "calls"
TRANSCRIPT_FIELD = "llm_transcript"


def transcript_path(run_dir: Path, method: str) -> Path:
    return Path(run_dir) / CALLS_DIR / f"{method}.jsonl"


def _cut_torn_line(path: Path) -> None:
    """Drop a last line without its newline (a kill mid-write) so the next append starts clean."""
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with path.open("rb+") as handle:
            handle.truncate(data.rfind(b"\n") + 1)


# JSON text may hold these raw (ensure_ascii=False), but str.splitlines() and some JSONL readers
# end a line at them: a JSONL line of a run escapes them, so it is one line for every reader.
_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def json_line(value: Any) -> str:
    """`value` as one JSONL line's text (no newline): UTF-8 kept, the line breaks JSON allows
    inside a string escaped. Raises what json.dumps raises."""
    return json.dumps(value, ensure_ascii=False, default=str).translate(_LINE_BREAKS)


class TranscriptWriter:
    """Appends the transcripts of a run's records, one file per method."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self._handles: dict[str, Any] = {}

    def take(self, method: str, record: dict[str, Any]) -> None:
        """Move `record`'s transcript (popped from the dict) into the method's calls file."""
        calls = record.pop(TRANSCRIPT_FIELD, None)
        if calls is None:
            return
        handle = self._handles.get(method)
        if handle is None:
            path = transcript_path(self.run_dir, method)
            path.parent.mkdir(parents=True, exist_ok=True)
            _cut_torn_line(path)
            handle = self._handles[method] = path.open("a", encoding="utf-8")
        line = {"id": record.get("id"), "method": method, "config_hash": record.get("config_hash"),
                "calls": calls}
        handle.write(json_line(line) + "\n")
        handle.flush()
        os.fsync(handle.fileno())

    def close(self) -> None:
        for handle in self._handles.values():
            handle.close()
        self._handles.clear()


def transcript_methods(run_dir: Path) -> list[str]:
    """The methods with a calls file in a run folder, sorted."""
    return sorted(p.stem for p in (Path(run_dir) / CALLS_DIR).glob("*.jsonl"))


def read_transcripts(run_dir: Path, method: str) -> dict[str, dict[str, Any]]:
    """{question id: its last transcript line} of a method (empty when the run kept none)."""
    path = transcript_path(run_dir, method)
    found: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return found
    for raw in path.read_text(encoding="utf-8").split("\n"):  # JSON lines end at \n only
        try:
            line = json.loads(raw)
        except ValueError:
            continue  # a torn last line
        if isinstance(line, dict) and "id" in line:
            found[str(line["id"])] = line
    return found
