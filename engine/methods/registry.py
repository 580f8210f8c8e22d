"""The method registry: every method by name, its defaults and its config checks.

A method declares itself in its own module (a `MethodSpec` built from its typed config, see
`method_config.py`); this file lists the specs, one line each. The CLI's choices and help,
`methods`, `--set`, `batch`, `ask`, the evaluation and the docs' options tables all read it.
Plugins (`--plugin MODULE`) may `register` methods of their own.

    spec = get("tog")
    config = resolve_config("tog", {"depth": 2})   # defaults + overrides, checked
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from engine.methods.baselines import io_cot, rag, sc
from engine.methods.chains import method as chains
from engine.methods.hydra import method as hydra
from engine.methods.spec import MethodSpec
from engine.methods.tog import method as tog
from engine.methods.tog2 import method as tog2
from ingest.base.errors import InputError

_REGISTRY: dict[str, MethodSpec] = {}


def register(spec: MethodSpec) -> MethodSpec:
    """Add a method (a plugin's, or a built-in below). A taken name is an error."""
    if spec.name in _REGISTRY and _REGISTRY[spec.name] is not spec:
        raise ValueError(f"a method named {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec
    return spec


for _spec in (io_cot.IO, io_cot.COT, sc.SC, rag.RAG, tog.TOG, tog.TOG_R, tog2.TOG2, hydra.HYDRA, hydra.HYDRA_E, hydra.HYDRA_S, chains.CHAINS):
    register(_spec)


def names() -> list[str]:
    """Registered method names, built-ins first, in registration order."""
    return list(_REGISTRY)


def get(name: str) -> MethodSpec:
    """The spec of a method; ValueError naming the known methods for an unknown name."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r} (one of {', '.join(_REGISTRY)})") from None


def default_config(name: str) -> dict[str, Any]:
    """A fresh copy of the method's defaults (the papers' values)."""
    return dict(get(name).defaults)


def resolve_config(name: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Defaults overridden by `overrides`; ValueError for an unknown key or a bad value."""
    return get(name).config(overrides)


def resolve_stored_config(name: str, stored: Mapping[str, Any]) -> dict[str, Any]:
    """The full config of a run as its run.json stored it: a key added since (`hash_unless`) takes
    the value the run was made with, not today's default."""
    spec = get(name)
    return spec.config({**{k: v for k, v in spec.hash_unless.items() if k not in stored}, **stored})


def config_hash(name: str, config: Mapping[str, Any]) -> str:
    """The one stable short hash of a method and its full (resolved) config: in every record
    and in run.json. Options a method added later count only when set (`hash_when_set`)."""
    hashed = _REGISTRY[name].hashed_config(config) if name in _REGISTRY else dict(config)
    blob = json.dumps({"method": name, "config": hashed}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def parse_settings(methods: Iterable[str], settings: Iterable[str]) -> dict[str, dict[str, Any]]:
    """`KEY=VALUE` / `METHOD.KEY=VALUE` settings -> overrides per method.

    Values are JSON when they parse (`3`, `0.7`, `true`, `"x"`, `null`), strings otherwise. A bare
    KEY applies to every chosen method that has it; a key no chosen method has is an error
    (a typo would otherwise be silently ignored).
    """
    chosen = list(dict.fromkeys(methods))
    specs = {m: get(m) for m in chosen}
    overrides: dict[str, dict[str, Any]] = {m: {} for m in chosen}
    for setting in settings:
        key, sep, raw = setting.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--set {setting!r}: expected KEY=VALUE or METHOD.KEY=VALUE")
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        method, dot, name = key.partition(".")
        if dot and method in specs:
            targets, key = [method], name
        else:
            targets = [m for m in chosen if key in specs[m].defaults]
        if not targets or any(key not in specs[m].defaults for m in targets):
            known = sorted({k for m in (targets or chosen) for k in specs[m].defaults})
            raise ValueError(f"--set {setting!r}: no such config key; known keys: {', '.join(known)}")
        for m in targets:
            overrides[m][key] = value
    return overrides


def load_plugins(modules: Iterable[str]) -> None:
    """Import plugin modules (each may call `register`); InputError when one is missing."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name and module.startswith(exc.name):
                raise InputError(f"plugin module {module!r} not found (is it on PYTHONPATH?)") from None
            raise
