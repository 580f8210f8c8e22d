"""Method options for the API: a dict, keyword arguments or `--set` strings, checked like `--set`.

    method_options("tog", {"depth": 2})             # {"depth": 2}
    method_options("tog", settings=["tog.width=2"])  # {"width": 2}
    method_options("tog", dpeth=2)                   # OptionError: tog has no config key dpeth (...)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ingest.base.errors import InputError


class OptionError(InputError, ValueError):
    """A method option the method does not have, a bad value, or an unknown method."""


def _check_method(method: str) -> None:
    from engine.methods import registry

    if method not in registry.names():
        raise OptionError(f"unknown method {method!r}; choose from {', '.join(registry.names())}")


def method_options(method: str, options: Mapping[str, Any] | None = None, *,
                   settings: Iterable[str] = (), **values: Any) -> dict[str, Any]:
    """The checked overrides of one method's config: `settings` (`KEY=VALUE` or
    `METHOD.KEY=VALUE` strings, JSON values), then `options`, then keyword `values`.
    OptionError naming the method, the key or the value that is wrong."""
    from engine.methods import registry

    _check_method(method)
    try:
        overrides = registry.parse_settings([method], settings)[method]
        for key, value in {**(options or {}), **values}.items():
            name, dot, rest = str(key).partition(".")
            overrides[rest if dot and name == method else str(key)] = value
        registry.resolve_config(method, overrides)
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    return overrides


def settings_of(options: Mapping[str, Any] | None, settings: Iterable[str] = ()) -> list[str]:
    """`--set` strings for a batch: the given `settings`, then `options` ({"tog.depth": 1} or
    {"depth": 1}) written as `KEY=JSON`."""
    return [*settings, *(f"{key}={json.dumps(value)}" for key, value in (options or {}).items())]


def method_list(methods: str | Sequence[str]) -> list[str]:
    """"io,tog" or ["io", "tog"] -> ["io", "tog"] (empty names dropped)."""
    names = methods.split(",") if isinstance(methods, str) else list(methods)
    return [m for m in names if m.strip()]

