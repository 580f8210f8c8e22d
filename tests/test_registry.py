"""The method registry: specs, config checks, --set parsing, plugins and the `methods` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from engine.methods import registry
from engine.methods.spec import MethodSpec, booleans, numbers, one_of, positive_ints
from engine.methods.tog.method import TOG_DEFAULTS
from ingest.base.errors import InputError


def test_builtins_are_registered_with_their_papers_defaults() -> None:
    assert registry.names()[:6] == ["io", "cot", "sc", "rag", "tog", "tog-r"]
    assert registry.default_config("tog") == TOG_DEFAULTS
    assert registry.default_config("tog") is not TOG_DEFAULTS  # a copy: callers may change it
    with pytest.raises(ValueError, match=r"unknown method 'tog3' \(one of io, cot"):
        registry.get("tog3")


def test_config_checks_name_the_key_and_the_value() -> None:
    assert registry.resolve_config("tog", {"depth": 2})["depth"] == 2
    bad = [({"depth": 0}, "depth must be a positive integer, not 0"),
           ({"width": True}, "width must be a positive integer, not True"),
           ({"prune_tool": "magic"}, "prune_tool must be one of llm, bm25, embedding, not 'magic'"),
           ({"follow_back": "yes"}, "follow_back must be true or false, not 'yes'"),
           ({"widht": 2}, "tog has no config key widht")]
    for overrides, message in bad:
        with pytest.raises(ValueError, match=message.replace("(", r"\(")):
            registry.resolve_config("tog", overrides)
    with pytest.raises(ValueError, match="collection must be one of"):
        registry.resolve_config("rag", {"collection": "news"})
    assert registry.resolve_config("rag", {"collection": "web"})["collection"] == "web"


def test_check_helpers() -> None:
    config = {"a": 0.5, "b": 2, "c": False, "d": "x"}
    numbers("a", low=0, high=1)(config)
    positive_ints("b")(config)
    booleans("c")(config)
    one_of("d", ("x", "y"))(config)
    with pytest.raises(ValueError, match=r"a must be within \[0, 0.4\]"):
        numbers("a", low=0, high=0.4)(config)
    with pytest.raises(ValueError, match="d must be a number"):
        numbers("d")(config)


def test_settings_go_to_the_methods_that_have_the_key() -> None:
    parsed = registry.parse_settings(["io", "tog", "tog-r"], ["depth=2", "tog.width=1", "temperature=0.2",
                                                               'tog-r.prune_tool="bm25"', "io.seed=x"])
    assert parsed["tog"] == {"depth": 2, "width": 1}
    assert parsed["tog-r"] == {"depth": 2, "prune_tool": "bm25"}
    assert parsed["io"] == {"temperature": 0.2, "seed": "x"}  # not JSON: kept as a string
    with pytest.raises(ValueError, match="no such config key; known keys: max_tokens, seed, temperature"):
        registry.parse_settings(["io"], ["depth=2"])
    with pytest.raises(ValueError, match="expected KEY=VALUE"):
        registry.parse_settings(["io"], ["depth"])


def test_config_hash_is_one_stable_function() -> None:
    config = registry.default_config("tog")
    assert registry.config_hash("tog", config) == registry.config_hash("tog", dict(reversed(config.items())))
    assert registry.config_hash("tog", config) != registry.config_hash("tog-r", config)
    assert len(registry.config_hash("tog", config)) == 16


def test_a_plugin_registers_a_method(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "echo_plugin_for_tests.py").write_text(
        "from engine.methods.registry import register\n"
        "from engine.methods.spec import MethodSpec, positive_ints\n"
        "from engine.methods.shared.common import new_record\n"
        "def run(question, ctx, config):\n"
        "    record = new_record(question, 'echo')\n"
        "    record.prediction = question.question[: config['chars']]\n"
        "    return record\n"
        "ECHO = register(MethodSpec('echo', run, {'chars': 5}, 'repeats the question', (positive_ints('chars'),)))\n",
        encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.load_plugins(["echo_plugin_for_tests"])
    registry.load_plugins(["echo_plugin_for_tests"])  # importing twice registers once
    assert "echo" in registry.names() and registry.resolve_config("echo", {"chars": 3}) == {"chars": 3}
    with pytest.raises(ValueError, match="already registered"):
        registry.register(MethodSpec("echo", lambda q, c, cfg: None, {}, "another"))  # type: ignore[arg-type,return-value]
    with pytest.raises(InputError, match="plugin module 'nowhere_to_be_found' not found"):
        registry.load_plugins(["nowhere_to_be_found"])
    from cli import main

    listed = CliRunner().invoke(main, ["methods", "--json", "--plugin", "echo_plugin_for_tests"])
    assert listed.exit_code == 0, listed.output
    by_name = {m["name"]: m for m in json.loads(listed.output)}
    assert by_name["echo"]["defaults"] == {"chars": 5} and by_name["tog"]["defaults"]["width"] == 3
    text = CliRunner().invoke(main, ["methods"])
    assert text.exit_code == 0 and "tog-r: ToG-R" in text.output and "prune_tool=\"llm\"" in text.output
