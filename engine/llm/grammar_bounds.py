"""Grammar bounds within `max_tokens`: a reply schema whose every grammar-valid JSON text fits
in a token budget, so that a reply decoded under it cannot be cut off.

A token is at least one byte of text (byte-level BPE: Qwen, SmolLM2, Llama 3), so a grammar
whose longest text has at most `max_tokens` bytes always ends, closed, within `max_tokens`.
`max_json_bytes` measures a schema's longest text the way llama.cpp's schema converter writes
it (`engine/llm/gbnf.py` `gbnf_for_schema`: one optional space after each value, `", "`
between items, enums as JSON literals in ASCII, a string character up to 6 bytes as a `\\uXXXX`
escape). `fit_schema` shrinks it: string `maxLength`s first (all in the same proportion), then
array `maxItems` (never below `minItems`); a fitted string is written with printable ASCII
only (no escapes, so one byte per character, which is what makes the bound exact).

Only the grammar uses the fitted schema: replies are still validated against the schema the
caller gave, and the response cache key holds that schema and `max_tokens` unchanged.
"""

from __future__ import annotations

import copy
import json
import math
import re
from typing import Any

_SPACE = 1  # the converter's `space ::= " "?`
_ESCAPE_BYTES = 6  # a string character written as \uXXXX
_ASCII_CHAR = r"[ !#-\[\]-~]"  # printable ASCII without `"` and `\`
_FITTED = re.compile(r"\^" + re.escape(_ASCII_CHAR) + r"\{\d+,(\d+)\}\$")


def _number_bytes(schema: dict[str, Any]) -> int | None:
    """The longest bounded number the converter's rule (`_bounded_number_rule`) allows."""
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    if low is None or high is None:
        return None
    if schema.get("type") == "integer":
        if high - low > 1000:
            return None
        return max(len(str(math.ceil(low))), len(str(math.floor(high)))) + _SPACE
    if low == 0 and high == 1:
        return len("0.000") + _SPACE
    return None


def _string_units(schema: dict[str, Any], scale: float | None, budget: int) -> tuple[int, int] | None:
    """(characters, bytes per character) of a string's longest value; None: unbounded. With a
    `scale`, the fitted string: maxLength (the budget when none) times scale, in ASCII."""
    low = int(schema.get("minLength", 0))
    if scale is None:
        high = schema.get("maxLength")
        return None if high is None else (int(high), _ESCAPE_BYTES)
    high = int(schema.get("maxLength", budget))
    return max(low, math.floor(high * scale)), 1


def _items(schema: dict[str, Any], scale: float | None) -> int | None:
    high = schema.get("maxItems")
    if high is None:
        return None
    low = int(schema.get("minItems", 0))
    return int(high) if scale is None else max(low, math.floor(int(high) * scale))


def _measure(schema: Any, strings: float | None, arrays: float | None, budget: int) -> int | None:
    """The longest text of `schema` in bytes (None: unbounded or not understood). `strings` /
    `arrays`: the scales of a fitted schema (None: the schema as it is)."""
    if not isinstance(schema, dict):
        return None
    if "const" in schema:
        return len(json.dumps(schema["const"])) + _SPACE
    if "enum" in schema:
        return max((len(json.dumps(v)) for v in schema["enum"]), default=0) + _SPACE
    for key in ("anyOf", "oneOf"):
        if key in schema:
            sizes = [_measure(s, strings, arrays, budget) for s in schema[key]]
            return None if not sizes or None in sizes else max(s for s in sizes if s is not None)
    fitted = _FITTED.fullmatch(str(schema.get("pattern", ""))) if schema.get("type") == "string" else None
    if fitted is not None:  # a string this module wrote: ASCII, one byte per character
        return 2 + int(fitted.group(1)) + _SPACE
    if any(k in schema for k in ("$ref", "allOf", "not", "pattern", "format", "prefixItems", "patternProperties")):
        return None
    kind = schema.get("type")
    if kind == "boolean":
        return len("false") + _SPACE
    if kind == "null":
        return len("null") + _SPACE
    if kind in ("integer", "number"):
        return _number_bytes(schema)
    if kind == "string":
        units = _string_units(schema, strings, budget)
        return None if units is None else 2 + units[0] * units[1] + _SPACE
    if kind == "array":
        count = _items(schema, arrays)
        item = _measure(schema.get("items", {}), strings, arrays, budget) if count else 0
        if count is None or item is None:
            return None
        return 1 + _SPACE + count * item + max(count - 1, 0) * (1 + _SPACE) + 1 + _SPACE
    if kind == "object":
        if schema.get("additionalProperties") not in (None, False):
            return None
        total = 1 + _SPACE + 1 + _SPACE  # { }
        properties = schema.get("properties", {})
        for name, value in properties.items():
            size = _measure(value, strings, arrays, budget)
            if size is None:
                return None
            total += len(json.dumps(name)) + _SPACE + 1 + _SPACE + size
        return total + max(len(properties) - 1, 0) * (1 + _SPACE)
    return None


def max_json_bytes(schema: dict[str, Any]) -> int | None:
    """The longest text a grammar built from `schema` admits, in bytes; None when unbounded."""
    return _measure(schema, None, None, 0)


def _apply(schema: Any, strings: float, arrays: float, budget: int) -> Any:
    """A copy of `schema` with every string and array bound scaled (see `_measure`)."""
    if not isinstance(schema, dict) or "const" in schema or "enum" in schema:
        return copy.deepcopy(schema)
    out = {k: v for k, v in schema.items()}
    for key in ("anyOf", "oneOf"):
        if key in schema:
            out[key] = [_apply(s, strings, arrays, budget) for s in schema[key]]
    kind = schema.get("type")
    if kind == "string":
        units = _string_units(schema, strings, budget)
        assert units is not None
        low = int(schema.get("minLength", 0))
        out = {k: v for k, v in schema.items() if k not in ("maxLength", "minLength")}
        out["pattern"] = f"^{_ASCII_CHAR}{{{low},{units[0]}}}$"
    elif kind == "array":
        count = _items(schema, arrays)
        if count is not None:
            out["maxItems"] = count
        if "items" in schema:
            out["items"] = _apply(schema["items"], strings, arrays, budget)
    elif kind == "object" and "properties" in schema:
        out["properties"] = {k: _apply(v, strings, arrays, budget) for k, v in schema["properties"].items()}
    return out


def _largest_scale(fits: Any) -> float | None:
    """The largest scale in [0, 1] for which `fits(scale)` holds (None: not even 0)."""
    if not fits(0.0):
        return None
    if fits(1.0):
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(40):
        middle = (low + high) / 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low


def fit_schema(schema: dict[str, Any], max_tokens: int) -> dict[str, Any] | None:
    """`schema` itself when its longest text fits in `max_tokens` bytes; else a fitted copy
    whose longest text does (strings shortened first, then arrays); None when even the
    shortest bounds do not fit, or the schema has parts this module cannot measure."""
    current = max_json_bytes(schema)
    if current is not None and current <= max_tokens:
        return schema

    def fits(strings: float, arrays: float) -> bool:
        size = _measure(schema, strings, arrays, max_tokens)
        return size is not None and size <= max_tokens

    strings = _largest_scale(lambda s: fits(s, 1.0))
    arrays = 1.0
    if strings is None:
        strings = 0.0
        found = _largest_scale(lambda a: fits(0.0, a))
        if found is None:
            return None
        arrays = found
    return dict(_apply(schema, strings, arrays, max_tokens))
