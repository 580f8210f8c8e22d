"""The Python API (`import localkg`): the examples of docs/python-api.md run as written, the
answer is a typed record, method options are checked with errors that name them, a model can be
named by its file, and batch / evaluate / report work on a tiny run.

Real-model tests use smollm2-135m (the tiny model the docs page names) on the demo index:
data/indexes/demo when it is built (`make demo`), else the session's `demo_index`."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

import localkg
from engine.llm.scripted import ScriptedLLM
from engine.questions.record import AnswerRecord

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "python-api.md"
QUESTIONS = REPO / "data" / "demo" / "questions.jsonl"
MODEL = "smollm2-135m"


def page_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.S)


@pytest.fixture(scope="module")
def kg_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo KG alone (no documents: quick), built through the API."""
    out = tmp_path_factory.mktemp("api") / "companies"
    report = localkg.build_index(localkg.IndexOptions(out=out, kg=[REPO / "data" / "demo" / "kg.ttl"],
                                                      kg_format=["turtle"]))
    assert "kg" in report.ran
    return out


@pytest.fixture
def demo(request: pytest.FixtureRequest) -> Path:
    """The demo index: the built one in data/indexes/demo if it opens, else the session's."""
    built = REPO / "data" / "indexes" / "demo"
    try:
        localkg.open_index(built).close()
        return built
    except localkg.LocalkgError:
        return Path(request.getfixturevalue("demo_index"))


# ---- the docs page --------------------------------------------------------------------------


@pytest.mark.slow
def test_the_docs_page_examples_run(demo: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    blocks = page_blocks()
    assert len(blocks) == 4 and all("import localkg" in b for b in blocks)
    monkeypatch.chdir(REPO)  # the page's relative paths (data/demo/...) are from the repository
    seen: dict[str, object] = {}
    for number, block in enumerate(blocks, start=1):
        code = block.replace('"data/indexes/demo"', repr(str(demo)))
        namespace: dict[str, object] = {"__name__": f"python_api_block_{number}"}
        exec(compile(code, f"{PAGE}:block {number}", "exec"), namespace)
        assert capsys.readouterr().out.strip(), f"block {number} printed nothing"
        seen.update(namespace)
    record, done, page, built = seen["record"], seen["done"], seen["page"], seen["built"]
    assert isinstance(record, localkg.Answer) and record.method == "tog" and record.calls >= 1
    assert done.questions == 2 and done.errors == 0  # type: ignore[attr-defined]
    assert Path(page.out).stat().st_size > 0  # type: ignore[attr-defined]
    assert "kg" in built.ran  # type: ignore[attr-defined]


# ---- the typed record and its options -------------------------------------------------------


def test_ask_returns_a_typed_answer(kg_index: Path) -> None:
    llm = ScriptedLLM([{"answer": "Oskar Thelling"}])
    with localkg.open_index(kg_index) as kg:
        answer = kg.ask("Who founded Norvale Motors?", method="io", llm=llm, max_tokens=64,
                        answers=["Oskar Thelling"])
    assert isinstance(answer, localkg.Answer)
    assert answer.correct["hits1"] is True
    assert dataclasses.is_dataclass(answer)
    assert (answer.question, answer.method, answer.prediction) == ("Who founded Norvale Motors?", "io", "Oskar Thelling")
    assert answer.predictions == ["Oskar Thelling"] and answer.ok and answer.error is None
    assert answer.calls == 1 == len(answer.raw["llm_calls"])
    assert answer.prompt_tokens == sum(c["prompt_tokens"] for c in answer.raw["llm_calls"])
    assert isinstance(answer.seconds, float) and answer.seconds >= 0
    assert answer.raw["extra"]["config"]["max_tokens"] == 64
    assert isinstance(answer.record, AnswerRecord) and answer.record.prediction == "Oskar Thelling"
    json.dumps(answer.raw)  # the raw record is the JSONL line a batch writes
    with pytest.raises(dataclasses.FrozenInstanceError):
        answer.prediction = "x"  # type: ignore[misc]


def test_a_question_level_failure_is_the_answers_error(kg_index: Path) -> None:
    def broken(request: object) -> str:
        raise RuntimeError("boom")

    llm = ScriptedLLM(broken)
    with localkg.open_index(kg_index) as kg:
        answer = kg.ask("Who founded Norvale Motors?", method="io", llm=llm)
    assert not answer.ok and "boom" in str(answer.error) and answer.prediction == ""


def test_options_as_dict_keywords_or_settings_are_checked_like_set() -> None:
    assert localkg.method_options("tog", {"depth": 2}, width=1) == {"depth": 2, "width": 1}
    assert localkg.method_options("tog", {"tog.depth": 1}) == {"depth": 1}
    assert localkg.method_options("tog", settings=["tog.width=2", "depth=1"]) == {"width": 2, "depth": 1}
    with pytest.raises(localkg.OptionError, match="dpeth"):
        localkg.method_options("tog", dpeth=2)
    with pytest.raises(localkg.OptionError, match=r"depth must be a positive integer, not 0"):
        localkg.method_options("tog", {"depth": 0})
    with pytest.raises(localkg.OptionError, match="unknown method 'tog3'"):
        localkg.method_options("tog3")
    with pytest.raises(ValueError, match="width"):  # an OptionError is a ValueError too
        localkg.method_options("io", settings=["width=2"])


def test_a_bad_option_fails_before_any_model_loads(kg_index: Path) -> None:
    llm = ScriptedLLM([])  # any call would fail
    with localkg.open_index(kg_index) as kg:
        with pytest.raises(localkg.OptionError, match="tog has no config key dpeth"):
            kg.ask("Who founded Norvale Motors?", method="tog", llm=llm, dpeth=1)
        with pytest.raises(localkg.OptionError, match="max_tokens"):
            kg.ask("Who founded Norvale Motors?", method="io", llm=llm, options={"max_tokens": "many"})
    assert llm.requests == []


def test_open_index_refuses_a_folder_that_is_no_index(tmp_path: Path) -> None:
    with pytest.raises(localkg.LocalkgError, match="no such index"):
        localkg.open_index(tmp_path / "nowhere")
    with pytest.raises(localkg.LocalkgError, match="not an index folder"):
        localkg.open_index(tmp_path)


def test_the_index_answers_what_the_kg_commands_show(kg_index: Path) -> None:
    with localkg.open_index(kg_index) as kg:
        stats = kg.kg_stats()
        assert stats["triples"] > 100 and stats["entities"] > 10
        relations = kg.relations("Norvale Motors", "out")
        assert relations["label"] == "Norvale Motors"
        assert any(r["id"].endswith("founded_by") for r in relations["relations"])
        tails = kg.tails("Norvale Motors", "founded_by")["tails"]
        assert [t["label"] for t in tails] == ["Oskar Thelling"]
        answer = kg.sparql("ASK { ?s ?p ?o }")
        assert localkg.sparql_text(answer).strip() == "true"
        with pytest.raises(localkg.LocalkgError, match="no entity named"):
            kg.relations("Nobody Motors")


def test_sparql_answers_print_as_kg_sparql_prints_them() -> None:
    from engine.access.sparql_sandbox import QueryAnswer

    assert localkg.sparql_text(QueryAnswer(triples=["<a> <b> <c> .", "<a> <b> <d> ."])) == \
        "<a> <b> <c> .\n<a> <b> <d> .\n"
    assert localkg.sparql_text(QueryAnswer(triples=[])) == ""
    assert json.loads(localkg.sparql_text(QueryAnswer(rows=[{"x": "é", "y": None}]))) == [{"x": "é", "y": None}]
    assert "é" in localkg.sparql_text(QueryAnswer(rows=[{"x": "é"}]))  # not escaped
    assert localkg.sparql_text(QueryAnswer(boolean=False)) == "false\n"
    assert localkg.sparql_text("<a> <b> <c> .\n") == "<a> <b> <c> .\n"  # an endpoint's N-Triples, as sent
    assert json.loads(localkg.sparql_text({"head": {}, "results": {}})) == {"head": {}, "results": {}}


def test_index_options_check_what_the_flags_checked(tmp_path: Path) -> None:
    two = localkg.IndexOptions(out=tmp_path / "x", kg=[Path("a.nt"), Path("b.nt"), Path("c.nt")],
                               kg_format=["ntriples", "turtle"])
    with pytest.raises(localkg.InputError, match="--kg-format given 2 times for 3 sources"):
        localkg.build_index(two)
    with pytest.raises(localkg.InputError, match="--no-vectors contradicts --vectors all"):
        localkg.IndexOptions(out=tmp_path, no_vectors=True, vectors="all").doc_options()
    options = localkg.IndexOptions(out=tmp_path, languages="en, de", tsv_header=False, freebase_drop=("none",))
    assert options.kg_options() == {"languages": ("en", "de"), "tsv_header": "no", "freebase_drop": ()}
    assert localkg.IndexOptions(out=tmp_path, embed_server="http://h/v1").doc_options() == \
        {"embed_backend": "server", "embed_server": "http://h/v1"}


# ---- a real model: by name and by path; batch, evaluate, report ------------------------------


@pytest.mark.slow
def test_a_model_by_path_answers_as_by_name(kg_index: Path) -> None:
    (row,) = [r for r in localkg.list_models() if r["name"] == MODEL]
    if not row["installed"]:
        pytest.skip(f"{MODEL} is not installed (python cli.py models install {MODEL})")
    with localkg.open_index(kg_index) as kg:
        by_path = kg.ask("Who founded Norvale Motors?", method="io", llm=Path(row["path"]), max_tokens=32)
        by_name = kg.ask("Who founded Norvale Motors?", method="io", llm=MODEL, max_tokens=32)
    assert by_path.ok and by_path.calls == 1 and by_path.prompt_tokens > 0
    assert by_path.prediction == by_name.prediction  # the same file, temperature 0


@pytest.mark.slow
def test_batch_evaluate_report_on_a_tiny_run(demo: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = localkg.batch(demo, QUESTIONS, "io,tog", out, llm=MODEL, limit=2, options={"tog.depth": 1})
    assert (done.questions, done.ran, done.errors) == (2, 4, 0)
    run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert run["methods"]["tog"]["config"]["depth"] == 1
    again = localkg.batch(demo, QUESTIONS, ["io", "tog"], out, llm=MODEL, limit=2, options={"tog.depth": 1})
    assert (again.ran, again.already_done) == (0, 4)  # resumed: nothing to do
    scores = localkg.evaluate(out)
    assert set(scores["methods"]) == {"io", "tog"} and scores["methods"]["tog"]["records"] == 2
    assert (out / "eval.json").exists()
    assert "tog" in localkg.format_evaluation(scores)
    both = localkg.evaluate(out, out, write=False)
    assert len(both["runs"]) == 2 and "Hits@1" in localkg.format_evaluation(both, ["hits1"])
    page = localkg.report(out, tmp_path / "report.html")
    assert page.questions == 2 and page.records == 4 and (tmp_path / "report.html").stat().st_size > 0
    with pytest.raises(localkg.LocalkgError, match="dpeth"):
        localkg.batch(demo, QUESTIONS, "tog", tmp_path / "bad", llm=MODEL, limit=2, options={"dpeth": 1})
