"""A method's typed config: one frozen dataclass, one field per key, each with its default, its
check, a one-line help and the paper reference. The method's defaults dict, the `--set` checks,
`localkg methods` and the docs' options tables all come from it.

    @dataclass(frozen=True)
    class TogConfig(MethodConfig):
        width: int = option(3, "beam width W", "ToG §4.1", low=1)
        prune_tool: str = option("llm", "relation/entity pruner", "ToG Table 5", choices=PRUNE_TOOLS)

    TOG = MethodSpec.typed("tog", run_tog, TogConfig, "Think-on-Graph: ...")
    cfg = TogConfig.from_config(config)   # in the run function: cfg.width is an int

The defaults dict holds the field defaults exactly as written (an int stays an int, 0.0 a float,
None None), in field order: it is what the config hash is computed from, so a typed config
changes no hash of a config made before it.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

OURS = "ours"
_KEY = "localkg_option"
C = TypeVar("C", bound="MethodConfig")


@dataclass(frozen=True)
class Option:
    """What a config key declares beside its default: its check, help and paper reference."""

    help: str
    paper: str
    low: float | None = None
    high: float | None = None
    choices: tuple[Any, ...] | None = None


@dataclass(frozen=True)
class OptionInfo:
    """One config key as listed and documented: key, default, allowed values, help, paper."""

    key: str
    default: Any
    allowed: str
    help: str
    paper: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def option(default: Any, help: str, paper: str = OURS, *, low: float | None = None,
           high: float | None = None, choices: Sequence[Any] | None = None) -> Any:
    """A config field: `default` (its type is the key's type: bool, int, float, str, list of
    numbers; None only with `choices`), `low`/`high` bounds for numbers, `choices` for a closed
    set, a one-line `help` and the `paper` reference (section or table, or "ours")."""
    meta = {_KEY: Option(help, paper, low, high, tuple(choices) if choices is not None else None)}
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: copy.deepcopy(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def like(base: type[MethodConfig], key: str, default: Any) -> Any:
    """The field `key` of `base` with another default (the same check, help and paper
    reference): how a method's variant (`hydra-e`, `hydra-s`) declares the defaults it changes."""
    field = next(f for f in dataclasses.fields(base) if f.name == key)
    opt: Option = field.metadata[_KEY]
    return option(default, opt.help, opt.paper, low=opt.low, high=opt.high, choices=opt.choices)


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check(key: str, value: Any, default: Any, opt: Option) -> None:
    """ValueError naming the key and the value (the wording of `spec`'s check helpers)."""
    if opt.choices is not None:
        if value not in opt.choices:
            raise ValueError(f"{key} must be one of {', '.join(map(str, opt.choices))}, not {value!r}")
        return
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ValueError(f"{key} must be true or false, not {value!r}")
    elif isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int) or (opt.low is not None and value < opt.low) \
                or (opt.high is not None and value > opt.high):
            raise ValueError(f"{key} must be {_int_words(opt)}, not {value!r}")
    elif isinstance(default, float):
        if not _is_number(value):
            raise ValueError(f"{key} must be a number, not {value!r}")
        _check_range(key, value, opt)
    elif isinstance(default, list):
        if not isinstance(value, list) or len(value) != len(default) or not all(map(_is_number, value)):
            raise ValueError(f"{key} must be a list of {len(default)} numbers, not {value!r}")
        for item in value:
            _check_range(key, item, opt)
    elif isinstance(default, str) and not isinstance(value, str):
        raise ValueError(f"{key} must be a string, not {value!r}")


def _check_range(key: str, value: float, opt: Option) -> None:
    if (opt.low is not None and value < opt.low) or (opt.high is not None and value > opt.high):
        bounds = f"within [{opt.low}, {opt.high}]" if opt.low is not None and opt.high is not None else (
            f">= {opt.low}" if opt.low is not None else f"<= {opt.high}")
        raise ValueError(f"{key} must be {bounds}, not {value!r}")


def _int_words(opt: Option) -> str:
    if opt.low == 1 and opt.high is None:
        return "a positive integer"
    if opt.low is not None and opt.high is None:
        return f"an integer >= {opt.low}"
    if opt.low is not None:
        return f"an integer within [{opt.low}, {opt.high}]"
    return "an integer"


def _allowed(default: Any, opt: Option) -> str:
    """The allowed values in words, for the listing and the docs."""
    if opt.choices is not None:
        return " | ".join("null" if c is None else str(c) for c in opt.choices)
    if isinstance(default, bool):
        return "true | false"
    if isinstance(default, int):
        return _int_words(opt).removeprefix("a ").removeprefix("an ")
    what = f"list of {len(default)} numbers" if isinstance(default, list) else (
        "number" if isinstance(default, float) else "string")
    if opt.low is not None and opt.high is not None:
        return f"{what} in [{opt.low}, {opt.high}]"
    if opt.low is not None:
        return f"{what} >= {opt.low}"
    return what


@dataclass(frozen=True)
class MethodConfig:
    """Base of the typed configs: subclasses are frozen dataclasses whose fields use `option`."""

    @classmethod
    def _options(cls) -> list[tuple[dataclasses.Field[Any], Option]]:
        return [(f, f.metadata[_KEY]) for f in dataclasses.fields(cls)]

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """The defaults dict, in field order, values exactly as declared (what is hashed)."""
        return {f.name: _default(f) for f, _ in cls._options()}

    @classmethod
    def check(cls, config: Mapping[str, Any]) -> None:
        """ValueError naming the first key whose value fails its check."""
        for f, opt in cls._options():
            if f.name in config:
                _check(f.name, config[f.name], _default(f), opt)

    @classmethod
    def describe(cls) -> list[OptionInfo]:
        """One row per key: default, allowed values, help, paper reference."""
        return [OptionInfo(f.name, _default(f), _allowed(_default(f), opt), opt.help, opt.paper)
                for f, opt in cls._options()]

    @classmethod
    def from_config(cls: type[C], config: Mapping[str, Any]) -> C:
        """The typed view of a resolved config dict (keys it lacks keep their defaults; keys
        that are not this config's are ignored)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in config.items() if k in names})
