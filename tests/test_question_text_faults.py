"""Text faults in questions and records: repaired, never a crash, never an unresumable run.

- Question files (every format): bytes that are not UTF-8, lone surrogates (a JSON `"\\ud800"`
  escape) and control characters become U+FFFD with a warning naming the file and line; the
  other questions are read as usual. Structural errors stay `InputError`s naming the file.
- The record writer: a record holding lone surrogates is written with U+FFFD; one JSON cannot
  hold becomes an error record naming the question; every line reads back (also with
  `str.splitlines`, which ends lines at U+2028 and U+0085).
- A batch over a JSONL file with a surrogate question completes, and its resume works.
- `ask` with bytes that are not UTF-8 (or a lone surrogate) in the question: a warning and the
  repaired question, never a traceback.
- Hypothesis fuzzing of the readers and the writer.

Batch and ask use scripted methods (a plugin module written to a temp folder) and the
`scripted:` LLM over a three-fact index: control flow, no model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.questions.datasets import FORMATS, read_questions
from engine.questions.record import Question
from engine.questions.text import Repairs, repair_argument, repair_text
from engine.runs.batch import BatchOptions, run_batch
from engine.runs.run_folder import RecordWriter, read_records
from ingest.base.errors import InputError

REPO = Path(__file__).resolve().parents[1]
PLUGIN = "fake_methods_for_text_faults"
PLUGIN_SOURCE = '''
"""Scripted methods for tests/test_question_text_faults.py."""
from engine.methods.registry import register
from engine.methods.spec import MethodSpec
from engine.questions.record import AnswerRecord


def echo(question, ctx, config):
    question.question.encode("utf-8")  # what a model's tokenizer or an HTTP body does
    return AnswerRecord(id=question.id, question=question.question, answers=question.answers,
                        method="text_echo", prediction=question.question, predictions=[question.question],
                        answer_source="llm")


def mojibake(question, ctx, config):
    record = echo(question, ctx, config)
    record.prediction = "caf\\udce9 \\ud800"  # a reply decoded with surrogateescape, a lone surrogate
    record.extra["reply"] = {"\\udcff key": ["\\ud83d", "\\u2028 and \\x85 inside"]}
    return record


def unjsonable(question, ctx, config):
    record = echo(question, ctx, config)
    record.extra["table"] = {(1, 2): "a tuple key: no JSON object holds it"}
    return record


for _name, _run in (("text_echo", echo), ("mojibake", mojibake), ("unjsonable", unjsonable)):
    register(MethodSpec(_name, _run, {}, "scripted text-fault method"))
'''
SURROGATE = "\ud800"
ALLOWED_CONTROLS = "\t\n\r"


# ---- helpers -------------------------------------------------------------------------------


def _clean(value: Any) -> bool:
    """No lone surrogate and no control character other than tab/newline/CR anywhere in it."""
    if isinstance(value, str):
        return all(not 0xD800 <= ord(c) <= 0xDFFF and (c in ALLOWED_CONTROLS or not _is_control(c)) for c in value)
    if isinstance(value, dict):
        return all(_clean(k) and _clean(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return all(_clean(v) for v in value)
    return True


def _is_control(char: str) -> bool:
    code = ord(char)
    return code < 0x20 or 0x7F <= code <= 0x9F


def _question_clean(question: Question) -> bool:
    fields = [question.id, question.question, question.answers, question.topic_entities,
              question.gold_relations or [], question.extra]
    json.dumps(fields, ensure_ascii=False).encode("utf-8")  # always writable
    return all(_clean(f) for f in fields)


@pytest.fixture(scope="module")
def tiny_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from index.build import build_index
    from index.kg_stage import KgSource

    folder = tmp_path_factory.mktemp("text-faults-index")
    kb = folder / "kb.tsv"
    kb.write_text("Heat\tdirected_by\tMichael Mann\nHeat\tstarred_actors\tAl Pacino\n"
                  "Collateral\tdirected_by\tMichael Mann\n", encoding="utf-8")
    build_index(folder / "index", [KgSource(kb, "tsv")], [])
    return folder / "index"


@pytest.fixture
def plugin(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path_factory.getbasetemp() / "text-faults-plugin"
    folder.mkdir(exist_ok=True)
    (folder / f"{PLUGIN}.py").write_text(PLUGIN_SOURCE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(folder), str(REPO)]))
    return folder


# ---- question files ------------------------------------------------------------------------


def test_jsonl_lone_surrogate_is_repaired_with_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "qs.jsonl"
    path.write_text('{"question": "\\ud800 who directed [Heat]", "answers": ["Michael \\udcff Mann"]}\n'
                    '{"question": "who starred in [Heat]", "answers": ["Al Pacino"]}\n', encoding="ascii")
    first, second = read_questions(path)
    assert first.question == "\ufffd who directed [Heat]" and first.answers == ["Michael \ufffd Mann"]
    assert first.extra["text_repaired"] == "2 lone surrogate(s) replaced with U+FFFD"
    assert second.question == "who starred in [Heat]" and "text_repaired" not in second.extra
    err = capsys.readouterr().err
    assert f"{path}:1: 2 lone surrogate(s) replaced with U+FFFD" in err
    assert f"{path}:2" not in err


def test_a_surrogate_pair_escape_is_the_character_it_encodes(tmp_path: Path) -> None:
    path = tmp_path / "qs.jsonl"
    path.write_text('{"question": "smile \\ud83d\\ude00", "answers": ["a"]}\n'
                    '{"question": "reversed \\ude00\\ud83d", "answers": ["b"]}\n', encoding="ascii")
    good, reversed_pair = read_questions(path)
    assert good.question == "smile \U0001f600" and "text_repaired" not in good.extra
    assert reversed_pair.question == "reversed \ufffd\ufffd"


def test_metaqa_bytes_that_are_not_utf8_are_repaired_per_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "1-hop" / "qa_dev.txt"
    path.parent.mkdir()
    path.write_bytes(b"what movies did [Temuera Morrison] act in\tOnce Were Warriors\n"
                     b"who directed [Caf\xe9 Society]\tWoody Allen\n"  # Latin-1, not UTF-8
                     b"who wrote [\xed\xa0\x80 Heat]\tMichael Mann\n"  # an encoded surrogate (CESU-8)
                     b"what genre is [Heat]\tCrime\n")
    questions = read_questions(path)
    assert [q.id for q in questions] == [f"1-hop-qa_dev-{i}" for i in range(1, 5)]
    assert questions[1].question == "who directed [Caf\ufffd Society]"
    assert questions[1].topic_entities == ["Caf\ufffd Society"]
    assert questions[2].topic_entities == ["\ufffd\ufffd\ufffd Heat"]
    assert all(_question_clean(q) for q in questions)
    err = capsys.readouterr().err
    assert f"{path}:2: 1 byte sequence(s) that are not UTF-8 replaced with U+FFFD" in err
    assert f"{path}:3: 3 byte sequence(s) that are not UTF-8" in err


def test_control_characters_are_replaced_tab_and_newline_kept_in_json(tmp_path: Path) -> None:
    path = tmp_path / "qs.jsonl"
    raw = '{"question": "who\\tdirected\\n[Heat]\\u0000\\u001b[31m\\u0085?", "answers": ["Mann\\u007f"]}'
    path.write_text(raw + '\n{"question": "raw\ttab and raw \x01 control", "answers": ["x"]}\n', encoding="utf-8")
    first, second = read_questions(path)
    assert first.question == "who\tdirected\n[Heat]\ufffd\ufffd[31m\ufffd?"
    assert first.answers == ["Mann\ufffd"]
    assert first.extra["text_repaired"] == "4 control character(s) replaced with U+FFFD"
    assert second.question == "raw\ttab and raw \ufffd control"  # raw controls in a JSON string: read, repaired
    pq = tmp_path / "PQ.txt"
    pq.write_bytes(b"who is \x1b[0mx's wife\tanna(anna/)\tx#spouse#anna#<end>#anna\n")
    (question,) = read_questions(pq)
    assert question.question == "who is \ufffd[0mx's wife" and question.answers == ["anna"]


def test_line_ends_are_those_of_text_mode(tmp_path: Path) -> None:
    """\\n, \\r\\n and \\r end a line (ids are line numbers, as before); \\x85, \\u2028, \\x0b and
    \\x0c do not (the first is a control character and is replaced)."""
    path = tmp_path / "qa.txt"
    path.write_bytes("q1 [A]\ta\r\nq2 [B]\tb\rq3 [C]\u2028x\tc\nq4 [D]\x85\x0b\x0cy\td\n".encode())
    questions = read_questions(path, "metaqa")
    assert [q.id for q in questions] == ["qa-1", "qa-2", "qa-3", "qa-4"]
    assert questions[2].question == "q3 [C]\u2028x"
    assert questions[3].question == "q4 [D]\ufffd\ufffd\ufffdy"


def test_json_list_repairs_name_the_item_and_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cwq.json"
    path.write_bytes(b'[\n {"ID": "a", "question": "who \\ud800?", "answer": "x"},\n'
                     b' {"ID": "b", "question": "caf\xe9?", "answer": "y"}\n]\n')
    first, second = read_questions(path)
    assert first.question == "who \ufffd?" and second.question == "caf\ufffd?"
    err = capsys.readouterr().err
    assert f"{path}:3: 1 byte sequence(s) that are not UTF-8" in err
    assert f"{path}: item 1: 1 lone surrogate(s)" in err


def test_many_repairs_print_a_few_warnings_and_a_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "qs.jsonl"
    path.write_text("".join(f'{{"question": "q{i} \\ud800", "answers": ["a"]}}\n' for i in range(40)), encoding="ascii")
    assert len(read_questions(path)) == 40
    err = capsys.readouterr().err
    assert err.count("warning:") == 6 and "35 more lines or items repaired" in err


def test_structural_errors_still_name_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "qs.jsonl"
    path.write_text('{"question": "ok"}\n{"question": ["not", "text"]}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"qs.jsonl:2: no question text"):
        read_questions(path)
    shape = tmp_path / "shape.jsonl"
    shape.write_text('{"question": "ok", "graph_query": {"edges": 7}}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"shape.jsonl:1: "):
        read_questions(shape)
    deep = tmp_path / "deep.jsonl"
    deep.write_text("[" * 100_000 + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"deep.jsonl:1: not valid JSON"):
        read_questions(deep, "jsonl")


def test_repair_helpers() -> None:
    repairs = Repairs()
    assert repair_text("a\ud800b\x00c\td\n", repairs) == "a\ufffdb\ufffdc\td\n"
    assert (repairs.surrogates, repairs.controls) == (1, 1)
    assert repair_text("\x00\ud800", controls=False) == "\x00\ufffd"
    text, found = repair_argument("caf\udce9 \ufffd")  # surrogateescape'd byte 0xE9, a real U+FFFD kept
    assert text == "caf\ufffd \ufffd" and found.bad_bytes == 1 and str(found).startswith("1 byte sequence")
    text, found = repair_argument("who\ud800")
    assert text == "who\ufffd" and found.surrogates == 1
    assert not repair_argument("plain")[1]


# ---- the record writer ---------------------------------------------------------------------


def test_a_record_with_lone_surrogates_is_written_repaired(tmp_path: Path) -> None:
    path = tmp_path / "io.jsonl"
    writer = RecordWriter(path)
    written = writer.append({"id": "q1", "question": "who \ud800", "answers": ["x"], "prediction": "caf\udce9",
                             "extra": {"k\udcff": ["\ud83d"]}})
    writer.append({"id": "q2", "question": "fine", "answers": [], "extra": {}})
    writer.close()
    assert written["question"] == "who \ufffd" and written["extra"]["unencodable_replaced"] == 4
    records, problems = read_records(path)
    assert problems == [] and [r["id"] for r in records] == ["q1", "q2"]
    assert records[0]["prediction"] == "caf\ufffd" and records[0]["extra"]["k\ufffd"] == ["\ufffd"]
    assert RecordWriter(path).done == {"q1", "q2"}  # a resume reads it


def test_a_record_json_cannot_hold_becomes_an_error_record(tmp_path: Path) -> None:
    path = tmp_path / "io.jsonl"
    circular: dict[str, Any] = {}
    circular["self"] = circular
    writer = RecordWriter(path)
    first = writer.append({"id": "q1", "question": "q", "answers": ["a"], "method": "io", "extra": {(1, 2): "x"}})
    second = writer.append({"id": "q\ud8002", "question": "q", "answers": ["a"], "method": "io", "extra": circular})
    writer.close()
    assert first["error"].startswith("RecordWriteError: the record of question 'q1' could not be written as JSON (TypeError")
    assert first["answers"] == ["a"] and first["method"] == "io"
    assert second["id"] == "q\ufffd2" and "ValueError: Circular reference detected" in second["error"]
    records, problems = read_records(path)
    assert problems == [] and [r["id"] for r in records] == ["q1", "q\ufffd2"]
    writer = RecordWriter(path, retry_errors=True)  # --retry-errors drops them: asked again
    assert writer.done == set()
    writer.close()


def test_record_lines_survive_every_line_splitter(tmp_path: Path) -> None:
    path = tmp_path / "io.jsonl"
    writer = RecordWriter(path)
    writer.append({"id": "q1", "question": "a\u2028b\u2029c\x85d\x0be\x1cf", "answers": []})
    writer.close()
    text = path.read_text(encoding="utf-8")
    assert len(text.splitlines()) == 1
    assert json.loads(text)["question"] == "a\u2028b\u2029c\x85d\x0be\x1cf"


# ---- a batch over a question with a lone surrogate ----------------------------------------


def test_a_batch_with_a_surrogate_question_completes_and_resumes(plugin: Path, tiny_index: Path, tmp_path: Path) -> None:
    questions = tmp_path / "qs.jsonl"
    questions.write_text('{"id": "s1", "question": "\\ud800 who directed [Heat]", "answers": ["Michael Mann"]}\n'
                         '{"id": "s2", "question": "who directed [Collateral]", "answers": ["Michael Mann"]}\n'
                         '{"id": "s3", "question": "who starred in [Heat] \\u001b", "answers": ["Al Pacino"]}\n',
                         encoding="ascii")
    out = tmp_path / "run"
    options = BatchOptions(index=tiny_index, questions=questions, methods=["text_echo", "mojibake", "unjsonable"],
                           out=out, llm="scripted:", plugins=[PLUGIN])
    report = run_batch(options)
    assert report.ran == 9 and report.errors == 3  # the three unjsonable records
    run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert run["status"] == "complete" and run["questions"]["ids"] == ["s1", "s2", "s3"]
    echo, problems = read_records(out / "text_echo.jsonl")
    assert problems == [] and [r["id"] for r in echo] == ["s1", "s2", "s3"]
    assert echo[0]["question"] == echo[0]["prediction"] == "\ufffd who directed [Heat]"
    assert echo[0]["error"] is None and echo[2]["question"] == "who starred in [Heat] \ufffd"
    mojibake, problems = read_records(out / "mojibake.jsonl")
    assert problems == [] and mojibake[0]["prediction"] == "caf\ufffd \ufffd"
    assert mojibake[0]["extra"]["unencodable_replaced"] == 4 and mojibake[0]["extra"]["reply"] == {
        "\ufffd key": ["\ufffd", "\u2028 and \x85 inside"]}
    unjsonable, problems = read_records(out / "unjsonable.jsonl")
    assert problems == [] and all(r["error"].startswith("RecordWriteError") for r in unjsonable)
    again = run_batch(options)  # the resume: nothing left, no crash
    assert again.ran == 0 and again.already_done == 9
    retried = run_batch(BatchOptions(**{**options.__dict__, "retry_errors": True}))
    assert retried.ran == 3 and retried.already_done == 6
    assert json.loads((out / "run.json").read_text(encoding="utf-8"))["status"] == "complete"


def test_a_model_reply_with_a_lone_surrogate_reaches_both_files(tiny_index: Path, tmp_path: Path) -> None:
    """The transcript (RUN/calls/io.jsonl) is written before the record: it must not fail either."""
    from engine.runs.transcripts import read_transcripts

    questions = tmp_path / "qs.jsonl"
    questions.write_text('{"id": "r1", "question": "who directed Heat", "answers": ["Michael Mann"]}\n'
                         '{"id": "r2", "question": "who directed Collateral", "answers": ["Michael Mann"]}\n',
                         encoding="ascii")
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps(['{"answer": "Michael \ud800 Mann"}', '{"answer": "Michael Mann"}']),
                       encoding="ascii")
    out = tmp_path / "run"
    options = BatchOptions(index=tiny_index, questions=questions, methods=["io"], out=out, llm=f"scripted:{replies}")
    assert run_batch(options).ran == 2
    records, problems = read_records(out / "io.jsonl")
    assert problems == [] and records[0]["prediction"] == "Michael \ufffd Mann" and records[1]["error"] is None
    assert records[0]["extra"]["unencodable_replaced"] >= 2  # the prediction and the transcript's reply
    transcripts = read_transcripts(out, "io")
    assert set(transcripts) == {"r1", "r2"}
    assert "Michael \ufffd Mann" in transcripts["r1"]["calls"][0]["reply"]
    assert run_batch(options).already_done == 2


# ---- ask --------------------------------------------------------------------------------------


@pytest.fixture
def replies(tmp_path: Path) -> Path:
    path = tmp_path / "replies.json"
    path.write_text(json.dumps(['{"answer": "Michael Mann"}'] * 2), encoding="utf-8")
    return path


def test_ask_with_bytes_that_are_not_utf8(tiny_index: Path, replies: Path) -> None:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}  # strict stdout: a surrogate would raise there
    command = [sys.executable, str(REPO / "cli.py"), "ask", "--index", str(tiny_index), "--method", "io",
               "--llm", f"scripted:{replies}", "--json", b"who directed [Caf\xe9 Society] \xff"]
    done = subprocess.run(command, capture_output=True, env=env, timeout=120, cwd=REPO)
    stderr = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert "warning: QUESTION: 2 byte sequence(s) that are not UTF-8 replaced with U+FFFD" in stderr
    record = json.loads(done.stdout)
    assert record["question"] == "who directed [Caf\ufffd Society] \ufffd"
    assert record["prediction"] == "Michael Mann"


def test_ask_with_a_lone_surrogate_and_a_bad_topic(plugin: Path, tiny_index: Path) -> None:
    from cli import main

    result = CliRunner().invoke(main, ["ask", "--index", str(tiny_index), "--method", "text_echo", "--plugin", PLUGIN,
                                       "--llm", "scripted:", "--topic", "Heat\x00", "--json",
                                       f"who directed {SURROGATE} Heat"])
    assert result.exception is None, result.output
    assert result.exit_code == 0
    assert "warning: QUESTION: 1 lone surrogate(s) replaced with U+FFFD" in result.output
    assert "warning: --topic Heat\ufffd: 1 control character(s)" in result.output
    assert '"prediction": "who directed \ufffd Heat"' in result.output


# ---- fuzzing ------------------------------------------------------------------------------

_ODD = ["\ud800", "\udfff", "\udce9", "\x00", "\x1b", "\x7f", "\x85", "\x9f", "\u2028", "\u2029", "\x0b",
        "\x0c", "\x1c", "\ufeff", "\ufffd", "\t", "\r", "\n", "[", "]", "|", "#", '"', "\\", "{", "}"]
_CHARS = st.one_of(st.characters(), st.characters(categories=["Cs"]), st.sampled_from(_ODD))
TEXT = st.text(alphabet=_CHARS, max_size=40)
WORDY = st.builds(lambda head, tail: f"q{head}{tail}", TEXT, TEXT)  # never blank
_FUZZ = settings(max_examples=60, deadline=None, database=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate becomes bytes that are not UTF-8


_SHAPES = (
    st.builds(lambda q, a: f"{q}\t{a}", WORDY, TEXT),  # MetaQA-shaped
    st.builds(lambda q, a, r: f"{q}\t{a}(x/)\ts#{r}#x#<end>#x", WORDY, TEXT, TEXT),  # PathQuestion-shaped
    st.builds(lambda q, a, ascii_only: json.dumps({"question": q, "answers": [a]}, ensure_ascii=ascii_only),
              WORDY, TEXT, st.booleans()),  # JSONL-shaped
)
_LINE = st.one_of(*_SHAPES, TEXT)  # TEXT: anything
_ENDING = st.sampled_from(["\n", "\r\n", "\r", "\x85", "\u2028", "\x0b", ""])
# Lines of any shape mixed, or all of one shape (so that a reader gets through them).
_FILE = st.one_of(st.lists(st.tuples(_LINE, _ENDING), max_size=8),
                  *(st.lists(st.tuples(shape, _ENDING), max_size=8) for shape in _SHAPES))


@_FUZZ
@given(lines=_FILE, junk=st.binary(max_size=6), json_list=st.booleans())
def test_fuzz_question_readers(lines: list[tuple[str, str]], junk: bytes, json_list: bool) -> None:
    """Any bytes: every reader returns clean, writable questions, or an InputError naming the
    file (and the line where there is one); nothing else."""
    body = b"".join(_bytes(line + end) for line, end in lines) + junk
    if json_list:
        body = b"[" + b",".join(_bytes(json.dumps({"question": line}, ensure_ascii=False)) for line, _ in lines) + b"]"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "fuzz.txt"
        path.write_bytes(body)
        for fmt in ("auto", *FORMATS):
            try:
                questions = read_questions(path, fmt)
            except InputError as exc:
                assert str(exc).startswith(str(path)), exc
                continue
            assert all(_question_clean(q) for q in questions)
            assert len({q.id for q in questions}) == len(questions)


@_FUZZ
@given(texts=st.lists(st.tuples(WORDY, TEXT), min_size=1, max_size=8), ascii_only=st.booleans(),
       ending=st.sampled_from(["\n", "\r\n", "\r"]))
def test_fuzz_one_bad_question_never_stops_the_others(texts: list[tuple[str, str]], ascii_only: bool, ending: str) -> None:
    """Well-shaped lines whose text holds anything: every line is one question, in order."""
    def flat(text: str) -> str:  # the line's own structure stays: no line ends, no tabs
        return "".join(" " if c in "\t\r\n" else c for c in text)

    metaqa = "".join(f"{flat(q)}\t{flat(a)}{ending}" for q, a in texts)
    jsonl = "".join(json.dumps({"question": q, "answers": [a]}, ensure_ascii=ascii_only) + ending for q, a in texts)
    with tempfile.TemporaryDirectory() as folder:
        for name, body, fmt in (("m.txt", metaqa, "metaqa"), ("j.jsonl", jsonl, "jsonl")):
            path = Path(folder) / name
            path.write_bytes(_bytes(body))
            questions = read_questions(path, fmt)
            assert [q.id for q in questions] == [f"{path.stem}-{i}" for i in range(1, len(texts) + 1)]
            assert all(_question_clean(q) for q in questions)
            for question, (text, _) in zip(questions, texts, strict=True):
                source = flat(text) if fmt == "metaqa" else text
                if fmt == "metaqa" or not ascii_only:  # a raw surrogate is bytes that are not UTF-8
                    source = _bytes(source).decode("utf-8", "replace")
                assert question.question == repair_text(source.strip())


_VALUE = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), TEXT),
                      lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)),
                      max_leaves=8)


@_FUZZ
@given(records=st.lists(st.fixed_dictionaries({"id": TEXT, "question": TEXT, "answers": st.lists(TEXT, max_size=3),
                                                "prediction": TEXT, "extra": st.dictionaries(TEXT, _VALUE, max_size=3)}),
                        min_size=1, max_size=5))
def test_fuzz_record_writer(records: list[dict[str, Any]]) -> None:
    """Any unicode in any field: every record becomes one line that reads back (bytes and
    str.splitlines alike), and a resume sees every id that was written."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "m.jsonl"
        writer = RecordWriter(path)
        written = [writer.append(record) for record in records]
        writer.close()
        read, problems = read_records(path)
        assert problems == []
        assert [r["id"] for r in read] == [w["id"] for w in written]
        assert len(path.read_text(encoding="utf-8").splitlines()) == len(records)
        assert all(_clean_surrogates(r) for r in read)
        reopened = RecordWriter(path)
        assert reopened.done == {str(w["id"]) for w in written}
        reopened.close()


def _clean_surrogates(value: Any) -> bool:
    if isinstance(value, str):
        return not any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, dict):
        return all(_clean_surrogates(k) and _clean_surrogates(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_clean_surrogates(v) for v in value)
    return True


def test_a_reply_with_unicode_line_separators_stays_one_transcript_line(tmp_path: Path) -> None:
    from engine.runs.transcripts import (
        TRANSCRIPT_FIELD,
        TranscriptWriter,
        read_transcripts,
        transcript_path,
    )

    writer = TranscriptWriter(tmp_path)
    reply = "first\u2028second\x85third\u2029"
    writer.take("rag", {"id": "q1", TRANSCRIPT_FIELD: [{"stage": "answer", "reply": reply}]})
    writer.take("rag", {"id": "q2", TRANSCRIPT_FIELD: [{"stage": "answer", "reply": "plain"}]})
    writer.close()
    assert transcript_path(tmp_path, "rag").read_text(encoding="utf-8").count("\n") == 2
    found = read_transcripts(tmp_path, "rag")
    assert found["q1"]["calls"][0]["reply"] == reply and set(found) == {"q1", "q2"}
