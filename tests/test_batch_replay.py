"""Re-running a batch replays the LLM response cache: `cli.py batch` with the real tiny model
(smollm2-135m) on real MetaQA 1-hop questions over the real MetaQA KB.

RUN1 fills the cache under $LOCALKG_HOME (conftest gives each test its own). The same command
into a new folder (RUN2) must answer every call from the cache, without loading the model, and
write the same records (only timings and the cache flags differ). With --no-cache (RUN3) no call
is a cache hit, nothing is added to the cache, and temperature 0 gives the same records again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from engine.llm.cache import ResponseCache
from ingest.base.errors import ModelError

pytestmark = pytest.mark.slow

MODEL = "smollm2-135m"
METHODS = ("io", "tog")
QUESTIONS = 3


@pytest.fixture
def real_model(monkeypatch: pytest.MonkeyPatch) -> str:
    pytest.importorskip("llama_cpp")
    from engine.llm.models import resolve_local

    try:
        resolve_local(MODEL)
    except ModelError as exc:
        pytest.skip(f"{MODEL} not installed: {exc}")
    monkeypatch.delenv("LOCALKG_LLM_CACHE", raising=False)  # the cache lives under LOCALKG_HOME
    return MODEL


def _batch(index: Path, questions: Path, out: Path, *extra: str) -> Result:
    from cli import main

    result = CliRunner().invoke(main, [
        "batch", "--index", str(index), "--questions", str(questions), "--methods", ",".join(METHODS),
        "--set", "tog.depth=1", "--limit", str(QUESTIONS), "--llm", MODEL, "--out", str(out), *extra])
    assert result.exit_code == 0, result.output
    return result


def _records(out: Path, method: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / f"{method}.jsonl").read_text(encoding="utf-8").splitlines()]


def _calls(out: Path) -> list[dict[str, Any]]:
    return [call for m in METHODS for record in _records(out, m) for call in record["llm_calls"]]


def _without_timing(record: dict[str, Any]) -> dict[str, Any]:
    """A record less what may differ between a computed and a replayed answer: timings and the
    cache flags (a hit carries the original token counts and compute seconds; a recomputed
    answer has its own)."""
    record = json.loads(json.dumps(record))
    for key in ("seconds", "stage_seconds"):
        record.pop(key)
    for call in record["llm_calls"]:
        call.pop("seconds")
        call.pop("cache_hit")
        call.pop("compute_seconds")
    for key in ("seconds", "cache_hits", "compute_seconds"):
        record["extra"]["llm_summary"].pop(key)
    return record


def test_rerun_replays_cached_answers(real_model: str, metaqa_index: Path, shared_data: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.llm.llama_cpp_backend import LlamaCppLLM
    from engine.runs.evaluate import evaluate_run

    questions = shared_data / "metaqa" / "questions" / "1-hop" / "qa_dev.txt"
    cache_file = Path(os.environ["LOCALKG_HOME"]) / "llm-cache.sqlite3"
    ids = [f"1-hop-qa_dev-{i}" for i in range(1, QUESTIONS + 1)]

    # RUN1: a fresh cache, every call computed.
    first = _batch(metaqa_index, questions, tmp_path / "run1")
    assert f": {QUESTIONS * len(METHODS)} answered now" in first.output
    run1 = {m: _records(tmp_path / "run1", m) for m in METHODS}
    for method, records in run1.items():
        assert [r["id"] for r in records] == ids, method
        assert all(r["error"] is None and r["prediction"] for r in records), method
        assert all(r["llm_calls"] for r in records), method
    calls1 = _calls(tmp_path / "run1")
    assert calls1 and not any(c["cache_hit"] for c in calls1)
    # (a reply that ends in an error is not cached and would be computed again)
    assert not any(c["error"] for c in calls1), [c["error"] for c in calls1 if c["error"]]
    assert cache_file.exists()
    cache = ResponseCache(cache_file)
    try:
        stored = len(cache)
    finally:
        cache.close()
    assert stored == len(calls1)  # one entry per call: no call repeated another

    # RUN2: the same command into a new folder answers every call from the cache, and a
    # replay never loads the model.
    loads: list[str] = []
    real_load = LlamaCppLLM._ensure_loaded

    def counting_load(self: LlamaCppLLM) -> Any:
        loads.append(str(self.model_path))
        return real_load(self)

    monkeypatch.setattr(LlamaCppLLM, "_ensure_loaded", counting_load)
    second = _batch(metaqa_index, questions, tmp_path / "run2")
    assert f": {QUESTIONS * len(METHODS)} answered now" in second.output  # a new folder: nothing resumed
    calls2 = _calls(tmp_path / "run2")
    assert len(calls2) == len(calls1)
    assert all(c["cache_hit"] for c in calls2), "a call of the replay was not answered from the cache"
    for method in METHODS:
        replayed = _records(tmp_path / "run2", method)
        # a replay reports what each reply cost when it was computed
        assert [c["compute_seconds"] for r in replayed for c in r["llm_calls"]] == \
            [c["compute_seconds"] for r in run1[method] for c in r["llm_calls"]]
        assert [_without_timing(r) for r in replayed] == [_without_timing(r) for r in run1[method]], method
        assert [r["prediction"] for r in replayed] == [r["prediction"] for r in run1[method]]
        assert all(r["extra"]["llm_summary"]["cache_hits"] == len(r["llm_calls"]) for r in replayed)
    run_1, run_2 = (json.loads((tmp_path / r / "run.json").read_text()) for r in ("run1", "run2"))
    assert run_2["model"] == run_1["model"] and run_2["methods"] == run_1["methods"]
    assert run_2["questions"]["ids"] == ids and run_2["status"] == "complete"
    # The same command into RUN2 again: nothing left to do, no record written twice.
    files = {m: (tmp_path / "run2" / f"{m}.jsonl").read_bytes() for m in METHODS}
    resumed = _batch(metaqa_index, questions, tmp_path / "run2")
    assert f": 0 answered now (io 0 (0 errors), tog 0 (0 errors)), {QUESTIONS * len(METHODS)} already done" \
        in resumed.output
    assert {m: (tmp_path / "run2" / f"{m}.jsonl").read_bytes() for m in METHODS} == files
    assert loads == [], "the replay loaded the model"
    monkeypatch.setattr(LlamaCppLLM, "_ensure_loaded", real_load)

    # RUN3: --no-cache computes every call again (deterministic at temperature 0) and adds
    # nothing to the cache.
    _batch(metaqa_index, questions, tmp_path / "run3", "--no-cache")
    calls3 = _calls(tmp_path / "run3")
    assert len(calls3) == len(calls1) and not any(c["cache_hit"] for c in calls3)
    for method in METHODS:
        recomputed = _records(tmp_path / "run3", method)
        assert [_without_timing(r) for r in recomputed] == [_without_timing(r) for r in run1[method]], method
    cache = ResponseCache(cache_file)
    try:
        assert len(cache) == stored
    finally:
        cache.close()

    # eval sees the same answers, all of RUN2's calls from the cache and none of RUN3's.
    scores = {run: evaluate_run(tmp_path / run, write=False)["methods"] for run in ("run1", "run2", "run3")}
    for method in METHODS:
        assert scores["run1"][method]["cache_hit_rate"] == 0.0
        assert scores["run2"][method]["cache_hit_rate"] == 1.0
        assert scores["run3"][method]["cache_hit_rate"] == 0.0
        for key in ("hits1", "em", "f1", "paper_em", "llm_calls", "prompt_tokens", "completion_tokens"):
            assert scores["run1"][method][key] == scores["run2"][method][key] == scores["run3"][method][key], key
