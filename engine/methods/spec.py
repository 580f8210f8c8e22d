"""What a method declares about itself: `MethodSpec` (name, run function, defaults, checks).

Each method module builds its spec once, next to its code:

    TOG = MethodSpec.typed("tog", run_tog, TogConfig, "Think-on-Graph: beam search over triples")

where `TogConfig` is a typed config (`engine/methods/method_config.py`: one field per key with its
default, check, help and paper reference), and `engine/methods/registry.py` lists the specs, one
line each. A plain defaults dict with `checks` (the helpers below) still works, for plugins:

    MethodSpec("echo", run_echo, {"chars": 5}, "repeats the question", (positive_ints("chars"),))
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.methods.method_config import MethodConfig, OptionInfo

if TYPE_CHECKING:
    from engine.methods.context import Context
    from engine.questions.record import AnswerRecord, Question

MethodFn = Callable[["Question", "Context", dict[str, Any]], "AnswerRecord"]
Check = Callable[[dict[str, Any]], None]  # raises ValueError naming the key and the bad value


@dataclass(frozen=True)
class MethodSpec:
    """A method: its name, how to run it, its default config and the checks of its values."""

    name: str
    run: MethodFn
    defaults: Mapping[str, Any]
    summary: str
    checks: Sequence[Check] = field(default_factory=tuple)
    # Options added after runs were made with this method: they enter the config hash only when
    # set away from their default, so a run made before them keeps its hash (and resumes).
    hash_when_set: Sequence[str] = field(default_factory=tuple)
    # Options added with a default that changes answers: KEY -> the value that reproduces the runs
    # made before the option existed; set to that value, the key stays out of the hash, so those
    # runs keep their hash (and resume) under `--set KEY=VALUE`.
    hash_unless: Mapping[str, Any] = field(default_factory=dict)
    # The typed config the defaults and checks come from (None: a plain defaults dict).
    config_type: type[MethodConfig] | None = None

    @classmethod
    def typed(cls, name: str, run: MethodFn, config_type: type[MethodConfig], summary: str, *,
              hash_when_set: Sequence[str] = (), hash_unless: Mapping[str, Any] | None = None) -> MethodSpec:
        """A method whose defaults, checks and option descriptions come from `config_type`."""
        return cls(name, run, config_type.defaults(), summary, (config_type.check,),
                   tuple(hash_when_set), dict(hash_unless or {}), config_type)

    def options(self) -> list[OptionInfo]:
        """Each config key: default, allowed values, help, paper reference (blank when untyped)."""
        if self.config_type is not None:
            return self.config_type.describe()
        return [OptionInfo(key, value, "", "", "") for key, value in self.defaults.items()]

    def hashed_config(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The part of a resolved config that identifies it (see `hash_when_set`)."""
        return {k: v for k, v in config.items()
                if not (k in self.hash_when_set and k in self.defaults and v == self.defaults[k])
                and not (k in self.hash_unless and v == self.hash_unless[k])}

    def config(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The defaults with `overrides` applied and checked.

        ValueError for a key the method does not have (listing the keys it has) or a bad value.
        """
        resolved = dict(self.defaults)
        unknown = sorted(set(overrides or {}) - set(resolved))
        if unknown:
            raise ValueError(f"{self.name} has no config key {', '.join(unknown)} "
                             f"(its keys: {', '.join(sorted(resolved))})")
        resolved.update(overrides or {})
        for check in self.checks:
            check(resolved)
        return resolved


def _ints_at_least(low: int, what: str, keys: Sequence[str]) -> Check:
    def check(config: dict[str, Any]) -> None:
        for key in keys:
            value = config[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{key} must be {what}, not {value!r}")
    return check


def positive_ints(*keys: str) -> Check:
    """Each key must hold an integer >= 1."""
    return _ints_at_least(1, "a positive integer", keys)


def non_negative_ints(*keys: str) -> Check:
    """Each key must hold an integer >= 0 (0 usually: off)."""
    return _ints_at_least(0, "an integer >= 0", keys)


def one_of(key: str, choices: Sequence[Any]) -> Check:
    """The key must hold one of `choices`."""
    def check(config: dict[str, Any]) -> None:
        if config[key] not in choices:
            raise ValueError(f"{key} must be one of {', '.join(map(str, choices))}, not {config[key]!r}")
    return check


def numbers(*keys: str, low: float | None = None, high: float | None = None) -> Check:
    """Each key must hold a number within [low, high]."""
    def check(config: dict[str, Any]) -> None:
        for key in keys:
            value = config[key]
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{key} must be a number, not {value!r}")
            if (low is not None and value < low) or (high is not None and value > high):
                raise ValueError(f"{key} must be within [{low}, {high}], not {value!r}")
    return check


def booleans(*keys: str) -> Check:
    """Each key must hold true or false."""
    def check(config: dict[str, Any]) -> None:
        for key in keys:
            if not isinstance(config[key], bool):
                raise ValueError(f"{key} must be true or false, not {config[key]!r}")
    return check
