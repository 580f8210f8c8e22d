"""The metrics of a batch run, per method, computed from its records (`score_method`);
`engine/runs/evaluate.py` reads the run folder, `engine/runs/eval_tables.py` renders the tables.

Per method:
- answer quality over the records that have gold answers: Hits@1, EM (answer-set exact match),
  F1 over answer sets, HotpotQA's token-level EM and F1 (`em_tok`, `f1_tok`), and paper EM
  (ToG's lenient substring match); definitions in `engine/questions/answer_match.py`. The
  Markdown names the two kinds apart: EM(set), F1(set) against EM(tok), F1(tok).
- abstentions (a method said "not found", e.g. `--set abstain=true`): their count, and Hits@1
  over the questions the method did answer (`hits1_answered`); an abstention counts as wrong in
  every other answer metric. Scores are recomputed from each record's predictions, not taken
  from the `correct` field the batch stored.
- cost: mean LLM calls, prompt / cached / completion tokens and seconds per question, and the
  share of calls answered from the response cache. Two kinds of seconds: `seconds` (wall time of
  this run, small when calls were replayed from the cache) and `llm_seconds` (what the model
  took to produce the replies when they were computed: comparable across runs and replays).
- path overlap where the questions have gold relation paths (MetaQA, PathQuestion, CWQ,
  GrailQA, QALD): |Rel(explored) ∩ Rel(gold)| / |Rel(gold)| over unduplicated relations, as
  defined in ToG (App. E, "overlap ratio") and HydraRAG (App. B.3). Explored relations are the
  relation ids (and relation labels) of the record's KG evidence paths. Like the papers, the
  headline figure averages over correctly answered questions (Hits@1); the mean over all
  questions with a gold path and the papers' distribution buckets are reported too.
- where the answers came from (`answer_source`: kg / doc / both / llm / none).
- where the LLM calls go: mean calls and prompt tokens per question per call `stage`
  (`calls_by_stage`, `prompt_tokens_by_stage`), for every method.
- for records that name the sources supporting their answer (`extra.support_sources`, a list
  such as ["kg", "wiki"], or `extra.support`, the same as text such as "KG+Wiki" / "LLM", which
  is what `hydra` writes), the share of records per category of HydraRAG's Fig. 8:
  KG, Wiki, Web, KG+Wiki, KG+Web, Wiki+Web, KG+Wiki+Web, and LLM (no source: the model's own
  knowledge), over all such records and over the correctly answered ones (`support_sources`).
- for records that name the phase that answered (`extra.phase`: HydraRAG's initial / refined /
  predicted / fallback), the share of records per phase and their Hits@1 (`phases`).

Missing records (a question of run.json without a record), records for ids not in the run,
duplicates and unreadable lines are counted and listed, never hidden.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from engine.questions.answer_match import explored_relations as _explored
from engine.questions.answer_match import score_record

SOURCES = ("kg", "doc", "both", "llm", "none")
# The buckets of ToG's Figures 10-11 / HydraRAG's Figure 9 (percent of gold relations found).
OVERLAP_BUCKETS = ("0", "(0,25]", "(25,50]", "(50,75]", "(75,100)", "100")
# HydraRAG's Figure 8: the sources that support an answer, in the paper's order ("llm": none).
SUPPORT_SOURCES = ("kg", "wiki", "web")
SUPPORT_CATEGORIES = ("kg", "wiki", "web", "kg+wiki", "kg+web", "wiki+web", "kg+wiki+web", "llm")
SUPPORT_NAMES = {"kg": "KG", "wiki": "Wiki", "web": "Web", "llm": "LLM"}


@dataclass
class MethodScores:
    """One method's numbers. Rates are fractions in [0, 1]; means are per question."""

    method: str
    records: int = 0  # distinct question ids with a record (in the run's selection)
    expected: int | None = None
    missing: int = 0
    extra: int = 0
    duplicates: int = 0
    errors: int = 0
    scored: int = 0  # records with gold answers: the denominator of the answer metrics
    hits1: float | None = None
    em: float | None = None
    f1: float | None = None
    paper_em: float | None = None
    em_tok: float | None = None  # HotpotQA's token-level EM
    f1_tok: float | None = None  # HotpotQA's token-level F1
    abstained: int = 0  # scored records where the method answered "not found"
    hits1_answered: float | None = None  # Hits@1 over the scored records that did not abstain
    llm_calls: float = 0.0
    prompt_tokens: float = 0.0
    cached_tokens: float = 0.0
    completion_tokens: float = 0.0
    seconds: float = 0.0
    llm_seconds: float = 0.0
    cache_hit_rate: float | None = None
    answer_source: dict[str, float] = field(default_factory=dict)
    # KG methods that record where they stopped (ToG, ToG-R): questions per "reason@depth", and
    # questions where a "sufficient" was rejected as ungrounded (see tog.require_grounded_answer)
    stops: dict[str, int] = field(default_factory=dict)
    ungrounded_rejected: int | None = None
    path_overlap: dict[str, Any] | None = None
    # Hits@1 per value of a grouping field of the questions file (`needs`, `hops`, ...):
    # {"needs": {"kg+doc": {"n": 17, "hits1": 0.29}}}; metric keys like by.needs.kg+doc.hits1
    by: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    # Mean LLM calls / prompt tokens per question per call stage ("answer", "relation_prune", ...)
    calls_by_stage: dict[str, float] = field(default_factory=dict)
    prompt_tokens_by_stage: dict[str, float] = field(default_factory=dict)
    # Records with `extra.support_sources` (HydraRAG's Fig. 8): {"n", "shares": {category: share},
    # "correct", "shares_correct"}; None when no record names its supporting sources
    support_sources: dict[str, Any] | None = None
    # Records with `extra.phase` (HydraRAG): {phase: {"n", "share", "hits1"}}
    phases: dict[str, dict[str, Any]] = field(default_factory=dict)
    config_hashes: list[str] = field(default_factory=list)
    missing_ids: list[str] = field(default_factory=list)  # first few, for the report
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _bucket(ratio: float) -> str:
    percent = ratio * 100
    if percent <= 0:
        return "0"
    if percent >= 100:
        return "100"
    if percent <= 25:
        return "(0,25]"
    if percent <= 50:
        return "(25,50]"
    if percent <= 75:
        return "(50,75]"
    return "(75,100)"


def support_category(sources: Iterable[Any]) -> str:
    """The Fig. 8 category of a list of supporting sources: "kg+wiki", "web", ... ("llm" for none).

    Known sources join in the paper's order (KG, Wiki, Web); any other name follows, sorted."""
    named = {str(s).strip().lower() for s in sources if str(s).strip()}
    ordered = [s for s in SUPPORT_SOURCES if s in named] + sorted(named - set(SUPPORT_SOURCES))
    return "+".join(ordered) or "llm"


def record_support(extra: dict[str, Any]) -> str | None:
    """A record's Fig. 8 category, from `support_sources` (a list) or `support` ("KG+Wiki",
    "LLM"); None when it names neither."""
    if isinstance(extra.get("support_sources"), list):
        return support_category(extra["support_sources"])
    text = extra.get("support")
    if isinstance(text, str) and text.strip():
        return support_category(p for p in text.split("+") if p.strip().lower() != "llm")
    return None


def support_label(category: str) -> str:
    """A category as the report writes it: "KG+Wiki", "LLM"."""
    return "+".join(SUPPORT_NAMES.get(part, part) for part in category.split("+"))


def _shares(counts: Counter[str], total: int) -> dict[str, float]:
    """Each category's share of `total`: Fig. 8's categories first (zeros kept), then any other."""
    shares = {c: counts.get(c, 0) / total for c in SUPPORT_CATEGORIES}
    shares.update({c: counts[c] / total for c in sorted(set(counts) - set(SUPPORT_CATEGORIES))})
    return shares


def explored_relations(record: dict[str, Any]) -> list[str]:
    """Relation ids and labels along a record's KG evidence paths."""
    return _explored(record.get("paths") or [])


def score_method(method: str, records: list[dict[str, Any]], expected: list[str] | None,
                 problems: Iterable[str] = (), groups: dict[str, dict[str, str]] | None = None) -> MethodScores:
    """All numbers of one method from its records (`expected`: the run's question ids; `groups`:
    question id -> {grouping field: value}, for the per-group Hits@1 in `by`)."""
    scores = MethodScores(method=method, problems=list(problems))
    kept = _kept_records(scores, records, expected)
    scores.records = len(kept)
    if not kept:
        return scores
    tally = _Tally()
    for record in kept:
        tally.add(record, scores, groups)
    tally.fill(scores, len(kept))
    if len(scores.config_hashes) > 1:
        scores.problems.append(f"records come from {len(scores.config_hashes)} different configs")
    explores_kg = any(explored_relations(r) for r in kept)
    if tally.overlap_all and explores_kg:  # a method that never walks the KG (io, cot) has no overlap
        scores.path_overlap = _path_overlap(tally.overlap_all, tally.overlap_correct)
    return scores


def _kept_records(scores: MethodScores, records: list[dict[str, Any]],
                  expected: list[str] | None) -> list[dict[str, Any]]:
    """The records to score: the first of each id, and only the run's questions when they are
    known; counts the duplicates, missing and extra ids into `scores`."""
    seen: dict[str, dict[str, Any]] = {}
    for record in records:
        rid = str(record["id"])
        if rid in seen:
            scores.duplicates += 1
            continue
        seen[rid] = record
    if expected is not None:
        wanted = set(expected)
        scores.expected = len(expected)
        missing = [i for i in expected if i not in seen]
        scores.missing, scores.missing_ids = len(missing), missing[:10]
        extra = [i for i in seen if i not in wanted]
        scores.extra = len(extra)
        for rid in extra:
            del seen[rid]
    if scores.duplicates:
        scores.problems.append(f"{scores.duplicates} duplicate records (the first of each id is scored)")
    if scores.extra:
        scores.problems.append(f"{scores.extra} records for ids outside the run's question selection (not scored)")
    return list(seen.values())


def _path_overlap(overlap_all: list[float], overlap_correct: list[float]) -> dict[str, Any]:
    buckets = Counter(_bucket(r) for r in overlap_correct)
    return {
        "with_gold_path": len(overlap_all),
        "mean_all": _mean(overlap_all),
        "correct": len(overlap_correct),
        "mean_correct": _mean(overlap_correct),
        "buckets_correct": {b: (buckets.get(b, 0) / len(overlap_correct) if overlap_correct else 0.0) for b in OVERLAP_BUCKETS},
    }


@dataclass
class _Tally:
    """The sums `score_method` gathers over a method's records, one record at a time."""

    hits: list[float] = field(default_factory=list)
    ems: list[float] = field(default_factory=list)
    f1s: list[float] = field(default_factory=list)
    papers: list[float] = field(default_factory=list)
    ems_tok: list[float] = field(default_factory=list)
    f1s_tok: list[float] = field(default_factory=list)
    answered_hits: list[float] = field(default_factory=list)
    overlap_all: list[float] = field(default_factory=list)
    overlap_correct: list[float] = field(default_factory=list)
    calls: int = 0
    prompt: int = 0
    cached: int = 0
    completion: int = 0
    cache_hits: int = 0
    seconds: float = 0.0
    llm_seconds: float = 0.0
    ungrounded: int = 0
    sources: Counter[str] = field(default_factory=Counter)
    hashes: Counter[str] = field(default_factory=Counter)
    stops: Counter[str] = field(default_factory=Counter)
    stage_calls: Counter[str] = field(default_factory=Counter)
    stage_prompt: Counter[str] = field(default_factory=Counter)
    support_all: Counter[str] = field(default_factory=Counter)
    support_right: Counter[str] = field(default_factory=Counter)
    phase_hits: dict[str, list[float]] = field(default_factory=dict)
    phase_count: Counter[str] = field(default_factory=Counter)
    by_hits: dict[tuple[str, str], list[float]] = field(default_factory=dict)

    def add(self, record: dict[str, Any], scores: MethodScores, groups: dict[str, dict[str, str]] | None) -> None:
        """Count one record (its errors and abstentions go into `scores` as they come)."""
        extra = record.get("extra") or {}
        support = record_support(extra)
        phase = str(extra["phase"]) if extra.get("phase") else None
        if support is not None:
            self.support_all[support] += 1
        if phase is not None:
            self.phase_count[phase] += 1
        if extra.get("stopped"):
            self.stops[f"{extra['stopped']}@{int(extra.get('depth') or 0)}"] += 1
            self.ungrounded += any(isinstance(step, dict) and "ungrounded_answer" in step
                                   for step in extra.get("trace") or [])
        scores.errors += bool(record.get("error"))
        self.sources[str(record.get("answer_source") or "none")] += 1
        self.hashes[str(record.get("config_hash") or "")] += 1
        self._add_calls(record.get("llm_calls") or [])
        self.seconds += float(record.get("seconds") or 0.0)
        scored = score_record(record)
        if scored is None:
            return
        self.hits.append(float(scored.hits1))
        if support is not None and scored.hits1:
            self.support_right[support] += 1
        if phase is not None:
            self.phase_hits.setdefault(phase, []).append(float(scored.hits1))
        for name, value in ((groups or {}).get(str(record["id"])) or {}).items():
            self.by_hits.setdefault((name, value), []).append(float(scored.hits1))
        self.ems.append(float(scored.em))
        self.f1s.append(scored.f1)
        self.papers.append(float(scored.paper_em))
        self.ems_tok.append(float(scored.em_tok))
        self.f1s_tok.append(scored.f1_tok)
        if record.get("abstained"):
            scores.abstained += 1
        else:
            self.answered_hits.append(float(scored.hits1))
        if scored.path_overlap is not None:
            self.overlap_all.append(scored.path_overlap)
            if scored.hits1:
                self.overlap_correct.append(scored.path_overlap)

    def _add_calls(self, calls: list[dict[str, Any]]) -> None:
        for call in calls:
            self.calls += 1
            self.prompt += int(call.get("prompt_tokens") or 0)
            self.cached += int(call.get("cached_tokens") or 0)
            self.completion += int(call.get("completion_tokens") or 0)
            self.cache_hits += bool(call.get("cache_hit"))
            stage = str(call.get("stage") or "?")
            self.stage_calls[stage] += 1
            self.stage_prompt[stage] += int(call.get("prompt_tokens") or 0)
            self.llm_seconds += float(call.get("compute_seconds") or call.get("seconds") or 0.0)

    def fill(self, scores: MethodScores, n: int) -> None:
        """Set the means and shares of `scores` over `n` kept records."""
        scores.scored = len(self.hits)
        scores.hits1, scores.em, scores.f1, scores.paper_em = (_mean(self.hits), _mean(self.ems), _mean(self.f1s),
                                                               _mean(self.papers))
        scores.em_tok, scores.f1_tok = _mean(self.ems_tok), _mean(self.f1s_tok)
        scores.hits1_answered = _mean(self.answered_hits)
        scores.llm_calls, scores.prompt_tokens = self.calls / n, self.prompt / n
        scores.cached_tokens, scores.completion_tokens = self.cached / n, self.completion / n
        scores.seconds, scores.llm_seconds = self.seconds / n, self.llm_seconds / n
        scores.cache_hit_rate = self.cache_hits / self.calls if self.calls else None
        scores.answer_source = {s: self.sources.get(s, 0) / n for s in SOURCES}
        for other in sorted(set(self.sources) - set(SOURCES)):
            scores.answer_source[other] = self.sources[other] / n
        scores.config_hashes = [h for h, _ in self.hashes.most_common() if h]
        scores.calls_by_stage = {k: self.stage_calls[k] / n for k in sorted(self.stage_calls)}
        scores.prompt_tokens_by_stage = {k: self.stage_prompt[k] / n for k in sorted(self.stage_calls)}
        if self.support_all:
            with_support, right = sum(self.support_all.values()), sum(self.support_right.values())
            scores.support_sources = {"n": with_support, "shares": _shares(self.support_all, with_support),
                                      "correct": right,
                                      "shares_correct": _shares(self.support_right, right) if right else {}}
        for phase_name, count in sorted(self.phase_count.items()):
            values = self.phase_hits.get(phase_name, [])
            scores.phases[phase_name] = {"n": count, "share": count / n,
                                         "hits1": sum(values) / len(values) if values else None}
        for (name, value), values in sorted(self.by_hits.items()):
            scores.by.setdefault(name, {})[value] = {"n": len(values), "hits1": sum(values) / len(values)}
        if self.stops:
            scores.stops = dict(sorted(self.stops.items()))
            scores.ungrounded_rejected = self.ungrounded
