"""GBNF grammars for JSON schemas, for llama.cpp's grammar-constrained decoding:
llama-cpp-python's converter with its escaping of `\\` fixed, JSON-legal string characters and
bounded numbers."""

from __future__ import annotations

import json
import math
from typing import Any, ClassVar


def _bounded_number_rule(schema: dict[str, Any]) -> str | None:
    """GBNF for bounded numbers, which llama-cpp-python 0.3's converter leaves unbounded.

    Integers with a small closed range become alternatives; numbers in [0, 1] (scores) get
    at most three decimals. Anything else is left to the converter (and to validation).
    """
    kind = schema.get("type")
    if kind not in ("integer", "number") or "enum" in schema or "const" in schema:
        return None
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    if low is None or high is None:
        return None
    if kind == "integer":
        lo = math.ceil(low) + (1 if "exclusiveMinimum" in schema and low == math.ceil(low) else 0)
        hi = math.floor(high) - (1 if "exclusiveMaximum" in schema and high == math.floor(high) else 0)
        if hi < lo or hi - lo > 1000:
            return None
        return "(" + " | ".join(f'"{i}"' for i in range(lo, hi + 1)) + ") space"
    if low == 0 and high == 1:
        return '("0" ("." [0-9] ([0-9] [0-9]?)?)? | "1" ("." "0" ("0" "0"?)?)?) space'
    return None


_JSON_CHAR = r'[^"\\\x00-\x1F\x7F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F])'


def gbnf_for_schema(schema: dict[str, Any]) -> str:
    """GBNF for a JSON schema; fixes llama-cpp-python 0.3's escaping of `\\` in literals."""
    import re

    from llama_cpp import llama_grammar as lg

    class Converter(lg.SchemaConverter):  # type: ignore[misc]
        _escape = re.compile(r'[\r\n"\\]')
        _escapes: ClassVar[dict[str, str]] = {"\r": "\\r", "\n": "\\n", '"': '\\"', "\\": "\\\\"}

        def _format_literal(self, literal: str) -> str:
            return '"' + self._escape.sub(lambda m: self._escapes[m.group(0)], literal) + '"'

        def _add_primitive(self, name: str, rule: Any) -> Any:
            # The stock string character admits raw control characters (a newline inside a
            # string), which JSON forbids: the reply would not parse. Escapes stay allowed.
            if name == "char":
                rule = lg.BuiltinRule(_JSON_CHAR, [])
            return super()._add_primitive(name, rule)

        def visit(self, schema: dict[str, Any], name: str) -> str:
            rule = _bounded_number_rule(schema)
            if rule is None:
                return str(super().visit(schema, name))
            rule_name = name + "-" if name in lg.RESERVED_NAMES else name or "root"
            return str(self._add_rule(rule_name, rule))

    converter = Converter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    resolved = converter.resolve_refs(json.loads(json.dumps(schema)), "schema")
    converter.visit(resolved, "")
    return str(converter.format_grammar())
