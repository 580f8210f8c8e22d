"""Index recipes: a TOML file that describes an index build (`index --config FILE`, `make index`).

A research repository checks in the exact recipe of its index; `index --config` builds it and
the manifest records the recipe's path and sha256. Keys are the long names of the `index`
command's options (`chunk-size`, `kg-keep`, `docs-map`; `_` for `-` works too), so an option
added to the command is a recipe key at once. Sources may be written as tables:

    out = "../indexes/demo"          # relative paths are relative to this file

    [[kg]]
    path = "kg.ttl"
    format = "turtle"

    [[docs]]
    path = "reports"
    format = "files"
    collection = "domain"

or as the command's own lists (`kg = ["kg.ttl"]`, `kg-format = ["turtle"]`). An unknown key is
an error naming the file and the key. Options given on the command line override the recipe's.
"""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ingest.base.errors import InputError

# [[kg]] / [[docs]] table keys -> the option each fills (by its parameter name)
SOURCE_TABLES: dict[str, dict[str, str]] = {
    "kg": {"path": "kg", "format": "kg_format"},
    "docs": {"path": "docs", "format": "docs_format", "collection": "collection"},
}


@dataclass(frozen=True)
class OptionShape:
    """What the recipe reader needs to know about one option of the command."""

    name: str  # the parameter name (`faiss_kind` for --faiss)
    multiple: bool = False
    is_path: bool = False


@dataclass(frozen=True)
class Recipe:
    """A recipe file read: option values by parameter name, and the file's identity."""

    path: Path
    sha256: str
    values: dict[str, Any]

    def record(self) -> dict[str, str]:
        """What the manifest keeps of the recipe."""
        return {"path": str(self.path), "sha256": self.sha256}


def read_recipe(path: Path, options: Mapping[str, OptionShape]) -> Recipe:
    """Read `path` against the command's options (`options`: every accepted key -> its shape).

    Relative paths become absolute against the recipe's folder; a single value of a repeatable
    option becomes a one-item list. InputError names the file and the key for an unknown key,
    a value of the wrong kind, or unreadable TOML."""
    path = Path(path).expanduser().resolve()
    if not path.is_file():
        raise InputError(f"{path}: no such recipe file")
    raw = path.read_bytes()
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"{path}: not a TOML recipe ({exc})") from exc
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key in SOURCE_TABLES and _is_tables(value):
            _add_source_tables(path, key, value, values)
            continue
        shape = options.get(key) or options.get(key.replace("_", "-"))
        if shape is None:
            known = sorted({k for k in options if "_" not in k} | set(SOURCE_TABLES))
            raise InputError(f"{path}: unknown key {key!r} (the keys are the options of `index`: {', '.join(known)})")
        if shape.name in values:
            raise InputError(f"{path}: key {key!r} given twice (or also in a [[{shape.name}]] table)")
        values[shape.name] = _value(path, key, value, shape)
    return Recipe(path, hashlib.sha256(raw).hexdigest(), values)


def _is_tables(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _add_source_tables(path: Path, key: str, tables: list[dict[str, Any]], values: dict[str, Any]) -> None:
    """[[kg]] / [[docs]] tables -> the parallel option lists (format and collection default to
    `auto` / `wiki` per table, as on the command line)."""
    fields = SOURCE_TABLES[key]
    defaults = {"format": "auto", "collection": "wiki"}
    columns: dict[str, list[Any]] = {name: [] for name in fields.values()}
    for number, table in enumerate(tables, start=1):
        where = f"{path}: [[{key}]] #{number}"
        if unknown := sorted(set(table) - set(fields)):
            raise InputError(f"{where}: unknown key {unknown[0]!r} (one of {', '.join(fields)})")
        if not isinstance(table.get("path"), str) or not table["path"]:
            raise InputError(f"{where}: needs a path = \"...\"")
        for field, option in fields.items():
            value = table.get(field, defaults.get(field))
            if not isinstance(value, str):
                raise InputError(f"{where}: {field} must be a string, not {value!r}")
            columns[option].append(_resolve(path, value) if field == "path" else value)
    for option, column in columns.items():
        if option in values:
            raise InputError(f"{path}: give {key} sources either as [[{key}]] tables or as lists, not both")
        values[option] = column


def _value(path: Path, key: str, value: Any, shape: OptionShape) -> Any:
    if isinstance(value, dict):
        raise InputError(f"{path}: key {key!r} must be a value, not a table")
    if shape.multiple:
        items = value if isinstance(value, list) else [value]
        if any(isinstance(v, dict | list) for v in items):
            raise InputError(f"{path}: key {key!r} must be a value or a list of values")
        return [_resolve(path, v) if shape.is_path and isinstance(v, str) else v for v in items]
    if isinstance(value, list):
        raise InputError(f"{path}: key {key!r} takes one value, not a list")
    return _resolve(path, value) if shape.is_path and isinstance(value, str) else value


def _resolve(recipe: Path, value: str) -> str:
    """A path of the recipe, absolute: relative ones are relative to the recipe's folder."""
    given = Path(value).expanduser()
    return str(given if given.is_absolute() else (recipe.parent / given).resolve())
