"""Text from outside (question files, the command line, model replies) made safe to keep.

Three things are repaired, never passed on and never a reason to stop:

- bytes that are not UTF-8: decoded as U+FFFD (`decode_lines`, `repair_argument`);
- lone surrogates (U+D800..U+DFFF, from a JSON `"\\ud800"` escape or from an argument Python
  decoded with surrogateescape): U+FFFD. A high + low pair becomes the character it encodes;
- control characters (Unicode category Cc: C0, DEL, C1) other than tab, newline and carriage
  return: U+FFFD (`controls=False` keeps them: JSON escapes them, so a record can hold them).

`Repairs` counts what was replaced, so callers can say what they changed and where.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from typing import Any

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")  # Cc less \t \n \r


@dataclass
class Repairs:
    """How many bad byte sequences, lone surrogates and control characters were replaced."""

    bad_bytes: int = 0
    surrogates: int = 0
    controls: int = 0

    def __bool__(self) -> bool:
        return bool(self.bad_bytes or self.surrogates or self.controls)

    def __str__(self) -> str:
        parts = [f"{n} {what}" for n, what in ((self.bad_bytes, "byte sequence(s) that are not UTF-8"),
                                              (self.surrogates, "lone surrogate(s)"),
                                              (self.controls, "control character(s)")) if n]
        return ", ".join(parts) + " replaced with U+FFFD" if parts else "nothing replaced"


def repair_text(text: str, repairs: Repairs | None = None, *, controls: bool = True) -> str:
    """`text` without lone surrogates (and, with `controls`, control characters other than tab,
    newline and carriage return): each replaced with U+FFFD and counted in `repairs`."""
    if _SURROGATE.search(text):
        before = text.count(REPLACEMENT)
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        if repairs is not None:
            repairs.surrogates += text.count(REPLACEMENT) - before
    if controls:
        text, count = _CONTROL.subn(REPLACEMENT, text)
        if repairs is not None:
            repairs.controls += count
    return text


def repair_strings(value: Any, repairs: Repairs | None = None, *, controls: bool = True) -> Any:
    """`value` with `repair_text` applied to every string in it (dict keys included), through
    dicts, lists and tuples; anything else is returned as is. Unchanged parts are not copied."""
    if isinstance(value, str):
        return repair_text(value, repairs, controls=controls)
    if isinstance(value, dict):
        return {repair_strings(k, repairs, controls=controls): repair_strings(v, repairs, controls=controls)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(repair_strings(v, repairs, controls=controls) for v in value)
    return value


def decode(raw: bytes, repairs: Repairs | None = None) -> str:
    """UTF-8 bytes as text; a sequence that is not UTF-8 becomes U+FFFD (counted)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("utf-8", "replace")
        if repairs is not None:
            repairs.bad_bytes += text.count(REPLACEMENT) - raw.count(REPLACEMENT.encode("utf-8"))
        return text


def decode_lines(data: bytes, *, keepends: bool = False) -> list[tuple[str, Repairs]]:
    """The lines of a file's bytes (split at \\n, \\r\\n and \\r, as Python's text mode does, so
    line numbers are those of `open()`), each decoded by `decode` with its own `Repairs`."""
    lines = []
    for raw in data.splitlines(keepends=keepends):
        repairs = Repairs()
        lines.append((decode(raw, repairs), repairs))
    return lines


def repair_argument(text: str) -> tuple[str, Repairs]:
    """A command-line argument as clean text. Bytes the locale could not decode reach Python as
    surrogates (surrogateescape): they are turned back into bytes and decoded as UTF-8 (what is
    still not UTF-8 becomes U+FFFD); other lone surrogates and control characters are replaced
    as by `repair_text`."""
    repairs = Repairs()
    if _SURROGATE.search(text):
        with contextlib.suppress(UnicodeEncodeError):  # other lone surrogates: repair_text replaces them
            text = decode(os.fsencode(text), repairs)
    return repair_text(text, repairs), repairs
