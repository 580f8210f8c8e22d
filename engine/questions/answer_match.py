"""Answer checking: normalisation, alias groups, and the per-question metrics.

Metrics (all per question; `evaluate.py` averages them):

- `hits_at_1`: the best prediction, normalised, equals a gold answer or one of its aliases
  (numbers compare by value: "1995" == "1995.0").
- `exact_match`: the normalised *answer set* equals the gold set: every gold answer is found and
  no answer is wrong. With one gold answer and one answer this is plain normalised equality; on
  multi-answer questions (MetaQA) it is the strict set metric.
- `f1`: F1 over answer sets. Precision = share of (distinct, normalised) answers that match
  some gold answer; recall = share of gold answers (alias groups) matched by some answer.
- The answer set (`answer_set`) is what a method commits to, not its whole ranking: the ranked
  predictions that its answer text names, else the answer text split into items ("A, B; C"),
  else the best prediction. A KG method ranks every entity its paths reached, and scoring that
  whole list as the answer would punish it for exploring.
- `em_tok`, `f1_tok`: HotpotQA's official answer metrics (`hotpot_evaluate_v1.py`: `exact_match_score`,
  `f1_score`), token-level, on the record's prediction string: normalised as HotpotQA does
  (`hotpot_normalise`: lower-case, punctuation removed, articles a/an/the removed, whitespace
  collapsed), EM is equality, F1 is over the bag of tokens, and a "yes" / "no" / "noanswer" on
  either side scores 0 unless both are equal. HotpotQA has one gold string; here the maximum
  over every gold answer and alias is taken (as SQuAD's script does). "Sochi" against
  "Sochi, Russia": EM(tok) 0, F1(tok) 0.667, where the set metrics give 0 and 0. As for
  `paper_em`, an empty prediction (no answer, an abstention) scores 0.
- `paper_em`: the papers' lenient match, as in ToG's `eval/utils.py::exact_match` (which
  ToG-2 and HydraRAG reuse for their "EM"/"Hits@1" columns): lower-case, remove spaces, and
  count a hit when the prediction equals a gold answer or either is a substring of the other.
  One deviation: an empty prediction never matches (in ToG's code "" is a substring of any
  answer). Aliases count, as ToG adds CWQ's alias lists to the gold list.

Normalisation (`normalise_answer`): Unicode NFKD with combining marks dropped, case-folded,
underscores to spaces (PathQuestion names), punctuation removed (kept inside numbers), the
articles a/an/the removed, whitespace collapsed.

Values (`_key`, behind `hits_at_1`, `exact_match` and `f1`): an RDF literal counts as its lexical
form (`"42"^^xsd:integer` is 42, `"Paris"@en` is Paris); a number compares by value ("1,000" ==
"1000" == "1000.0" == "1e3"; commas only as thousands separators); a date compares by the day
it names, whatever its spelling: `1952-03-11T00:00:00Z` (Wikidata), `+1952-03-11`, `1952-03-11`,
"11 March 1952", "March 11, 1952", "11th of Mar. 1952" are one answer; "March 1952" and `1952-03`
are one month. A date matches only a date of the same precision: "1952" is not "1952-03-11"
(nor "1953-01-01"), but a Wikidata year-precision value written `1952-00-00T00:00:00Z` is 1952.
`paper_em` and the HotpotQA token metrics stay as their papers define them (strings only).
"""

from __future__ import annotations

import calendar
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from engine.access.graph import EvidencePath

_ARTICLES = frozenset({"a", "an", "the"})
_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[^\W_]+")
# Commas only as thousands separators: "12,5" is not 125.
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?(?:e[-+]?\d+)?|[-+]?\.\d+(?:e[-+]?\d+)?", re.IGNORECASE)
# An RDF literal as a KG, a SPARQL result or a dataset may write it: "lexical"^^<type> or
# "lexical"^^xsd:type, or "lexical"@lang.
_RDF_LITERAL = re.compile(r'"(.*)"(?:\^\^(?:<[^<>\s]*>|[A-Za-z][\w.-]*:[\w.-]+)|@[A-Za-z]{1,8}(?:-[A-Za-z0-9]{1,8})*)?', re.DOTALL)
_MONTHS = {name: number for number, names in enumerate(
    [("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
     ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"),
     ("november", "nov"), ("december", "dec")], start=1) for name in names}
# ISO 8601 / xsd:date / xsd:dateTime as Wikidata writes them (a sign, zero month or day for a
# year- or month-precision value, a time of day, a zone).
_ISO_DATE = re.compile(r"([-+]?\d{4,})-(\d{2})(?:-(\d{2}))?"
                       r"(?:[t ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?)?(?:z|[-+]\d{2}:?\d{2})?")
_WEEKDAY = r"(?:(?:mon|tues?|wed(?:nes)?|thu(?:rs)?|fri|sat(?:ur)?|sun)(?:day)?\.?,?\s+)?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_MONTH = r"([a-z]+)\.?"
_DAY_MONTH_YEAR = re.compile(rf"{_WEEKDAY}{_DAY}\s+(?:of\s+)?{_MONTH},?\s+(\d{{3,4}})")
_MONTH_DAY_YEAR = re.compile(rf"{_WEEKDAY}{_MONTH}\s+{_DAY},?\s+(\d{{3,4}})")
_MONTH_YEAR = re.compile(rf"{_MONTH},?\s+(\d{{3,4}})")

AnswerGroups = list[list[str]]  # one inner list per gold answer: the answer and its aliases


def normalise_answer(text: str) -> str:
    """A comparison form of an answer string (see the module docstring)."""
    text = unicodedata.normalize("NFKD", str(text))
    text = "".join(c for c in text if not unicodedata.combining(c))
    text = text.casefold().replace("_", " ")
    # Words and numbers survive; punctuation goes, except inside numbers (1.5, 1,000).
    tokens = _TOKEN.findall(text)
    kept = [t for t in tokens if t not in _ARTICLES] or tokens  # "The The" stays a name
    return " ".join(kept)


def _number(text: str) -> Decimal | None:
    """The exact value of an answer that is just a number (commas as thousands separators)."""
    candidate = text.strip()
    if not _NUMBER.fullmatch(candidate):
        return None
    try:
        value = Decimal(candidate.replace(",", ""))
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


def _number_key(value: Decimal) -> str:
    # Decimal, not float: "1234567" and "1234568" must stay two answers ("%g" merged them).
    value = value.normalize()
    return "#" + format(value if value else Decimal(0), "f")


def lexical_form(text: str) -> str:
    """An RDF literal's lexical form (`"42"^^xsd:integer` -> 42, `"Paris"@en` -> Paris); any
    other text as it is."""
    stripped = str(text).strip()
    match = _RDF_LITERAL.fullmatch(stripped)
    return match.group(1) if match else stripped


def _valid_day(year: int, month: int, day: int) -> bool:
    if not 1 <= month <= 12 or day < 1:
        return False
    # calendar knows years 1..9999; outside them (BCE dates in Wikidata) any day up to 31 will do
    return day <= (calendar.monthrange(year, month)[1] if 1 <= year <= 9999 else 31)


def _date_value(year: int, month: int, day: int | None, time: str = "") -> str | None:
    """A date's comparison key at its precision: "@1952-03-11", "@1952-03", or (a Wikidata
    year-precision value, month 00) the year as a number; None when it is no date."""
    if month == 0:
        return _number_key(Decimal(year)) if not day else None
    written = f"@{'-' if year < 0 else ''}{abs(year):04d}-{month:02d}"
    if day == 0 or day is None:
        return written if 1 <= month <= 12 else None
    if not _valid_day(year, month, day):
        return None
    return f"{written}-{day:02d}{time}"


def date_key(text: str) -> str | None:
    """The comparison key of an answer that is just a date (see the module docstring), else None."""
    candidate = unicodedata.normalize("NFKC", text).strip().casefold()
    if match := _ISO_DATE.fullmatch(candidate):
        year, month, day, hour, minute, second = match.groups()
        clock = (hour or "00", minute or "00", second or "00")
        # Wikidata writes every date at midnight; another time of day is a different answer.
        time = "" if clock == ("00", "00", "00") else "T" + ":".join(clock)
        return _date_value(int(year), int(month), int(day) if day else None, time)
    for pattern, order in ((_DAY_MONTH_YEAR, "dmy"), (_MONTH_DAY_YEAR, "mdy")):
        if match := pattern.fullmatch(candidate):
            parts = dict(zip(order, match.groups(), strict=True))
            month = _MONTHS.get(parts["m"])
            if month is None:
                return None
            return _date_value(int(parts["y"]), month, int(parts["d"])) if int(parts["d"]) else None
    if (match := _MONTH_YEAR.fullmatch(candidate)) and match.group(1) in _MONTHS:
        return _date_value(int(match.group(2)), _MONTHS[match.group(1)], None)
    return None


def _key(text: str) -> str:
    """Normalised form, with literals as their lexical forms and numbers and dates in one
    canonical spelling."""
    text = lexical_form(text)
    value = _number(text)
    if value is not None:
        return _number_key(value)
    return date_key(text) or normalise_answer(text)


def answer_groups(answers: Sequence[str], groups: Sequence[Sequence[str]] | None = None) -> AnswerGroups:
    """Gold answers as alias groups: `groups` when the dataset has them, else one per answer."""
    source: Iterable[Sequence[str]] = groups if groups else [[a] for a in answers]
    result: AnswerGroups = []
    for group in source:
        names = [str(n) for n in group if str(n).strip()]
        if names:
            result.append(names)
    return result


def _group_keys(groups: AnswerGroups) -> list[set[str]]:
    keys = []
    for group in groups:
        found = {_key(name) for name in group}
        found.discard("")
        if found:
            keys.append(found)
    return keys


def prediction_list(prediction: str, predictions: Sequence[str] | None) -> list[str]:
    """The ranked predictions of a record, best first (falls back to the single prediction)."""
    ranked = [str(p) for p in (predictions or []) if str(p).strip()]
    if not ranked and str(prediction or "").strip():
        ranked = [str(prediction)]
    return ranked


_ITEM_SEPARATOR = re.compile(r"\s*(?:[;|\n]|,(?!\d{3}(?!\d)))\s*")  # not inside 1,000


def _rejoin_dates(items: list[str]) -> list[str]:
    """Items split at the comma of a date ("March 11", "1952") joined again."""
    result: list[str] = []
    for item in items:
        if result and (joined := f"{result[-1]}, {item}") and date_key(joined) and not date_key(result[-1]):
            result[-1] = joined
        else:
            result.append(item)
    return result


def names(haystack: str, needle: str) -> bool:
    """Whether `needle` occurs in `haystack` as whole words."""
    return bool(needle) and re.search(rf"(?<!\w){re.escape(needle)}(?!\w)", haystack) is not None


def answer_set(prediction: str, predictions: Sequence[str] | None,
               answer_text: str | None = None) -> list[str]:
    """The answers a record commits to (EM and F1 are computed over this set; see above)."""
    ranked = prediction_list(prediction, predictions)
    text = str(answer_text if answer_text is not None else prediction or "").strip()
    items = _rejoin_dates([i for i in _ITEM_SEPARATOR.split(text) if i.strip()])
    if len(items) > 1 and " and " in items[-1]:  # "A, B and C"
        items[-1:] = [i for i in re.split(r"\s+and\s+", items[-1]) if i.strip()]
    key = normalise_answer(text)
    whole = {key} if len(items) > 1 else set()  # a list answer does not name itself
    named = [p for p in dict.fromkeys(ranked)
             if (k := normalise_answer(p)) and k not in whole and names(key, k)]
    if named:
        return named
    if items:
        return items
    return ranked[:1]


_PUNCTUATION = frozenset(string.punctuation)
_HOTPOT_ARTICLES = re.compile(r"\b(a|an|the)\b")
_HOTPOT_SPECIAL = ("yes", "no", "noanswer")


def hotpot_normalise(text: str) -> str:
    """HotpotQA's `normalize_answer`: lower, remove punctuation, remove articles, fix spaces."""
    text = str(text).lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _HOTPOT_ARTICLES.sub(" ", text)
    return " ".join(text.split())


def token_scores(prediction: str, gold: str) -> tuple[float, float, float]:
    """HotpotQA's `f1_score`: (F1, precision, recall) over tokens of one prediction and one gold."""
    pred, truth = hotpot_normalise(prediction), hotpot_normalise(gold)
    if (pred in _HOTPOT_SPECIAL or truth in _HOTPOT_SPECIAL) and pred != truth:
        return 0.0, 0.0, 0.0
    pred_tokens, truth_tokens = pred.split(), truth.split()
    same = sum((Counter(pred_tokens) & Counter(truth_tokens)).values())
    if same == 0:
        return 0.0, 0.0, 0.0
    precision, recall = same / len(pred_tokens), same / len(truth_tokens)
    return 2 * precision * recall / (precision + recall), precision, recall


def token_em(prediction: str, golds: Iterable[str]) -> bool:
    """HotpotQA's `exact_match_score`, the best over the gold answers and aliases."""
    pred = hotpot_normalise(prediction)
    return any(pred == hotpot_normalise(g) for g in golds)


def token_f1(prediction: str, golds: Iterable[str]) -> float:
    """HotpotQA's token F1, the best over the gold answers and aliases (0 with no gold)."""
    return max((token_scores(prediction, g)[0] for g in golds), default=0.0)


def matches(prediction: str, groups: AnswerGroups) -> bool:
    """Whether one prediction equals some gold answer or alias after normalisation."""
    key = _key(prediction)
    return bool(key) and any(key in g for g in _group_keys(groups))


def hits_at_1(predictions: Sequence[str], groups: AnswerGroups) -> bool:
    """The best prediction matches a gold answer (or alias)."""
    return bool(predictions) and matches(predictions[0], groups)


def set_scores(predictions: Sequence[str], groups: AnswerGroups) -> tuple[float, float, float]:
    """(precision, recall, F1) of the distinct normalised predictions against the gold groups."""
    gold = _group_keys(groups)
    keys = list(dict.fromkeys(k for k in (_key(p) for p in predictions) if k))
    if not gold or not keys:
        return 0.0, 0.0, 0.0
    right_predictions = sum(1 for k in keys if any(k in g for g in gold))
    found_answers = sum(1 for g in gold if any(k in g for k in keys))
    precision = right_predictions / len(keys)
    recall = found_answers / len(gold)
    f1 = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
    return precision, recall, f1


def exact_match(predictions: Sequence[str], groups: AnswerGroups) -> bool:
    """The prediction set equals the gold set (every answer found, nothing wrong)."""
    precision, recall, _ = set_scores(predictions, groups)
    return precision == 1.0 and recall == 1.0


def paper_em(prediction: str, answers: Iterable[str]) -> bool:
    """ToG's `exact_match`: space-free lower-case equality or substring in either direction."""
    clean = str(prediction or "").strip().replace(" ", "").lower()
    if not clean:
        return False
    for answer in answers:
        gold = str(answer).strip().replace(" ", "").lower()
        if gold and (clean == gold or clean in gold or gold in clean):
            return True
    return False


@dataclass
class Correctness:
    """How one record scores: what the batch stores in `AnswerRecord.correct`."""

    hits1: bool
    em: bool
    f1: float
    precision: float
    recall: float
    paper_em: bool
    path_overlap: float | None = None  # share of the gold relation path explored (None: no gold path)
    em_tok: bool = False  # HotpotQA's token-level EM of the prediction (best over gold and aliases)
    f1_tok: float = 0.0  # HotpotQA's token-level F1 of the prediction (best over gold and aliases)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def score(prediction: str, predictions: Sequence[str] | None, answers: Sequence[str],
          groups: Sequence[Sequence[str]] | None = None, answer_text: str | None = None) -> Correctness:
    """All per-question metrics of one prediction against the gold answers."""
    gold = answer_groups(answers, groups)
    ranked = prediction_list(prediction, predictions)
    precision, recall, f1 = set_scores(answer_set(prediction, predictions, answer_text), gold)
    best = ranked[0] if ranked else ""
    all_names = [name for group in gold for name in group]
    return Correctness(
        hits1=hits_at_1(ranked, gold),
        em=precision == 1.0 and recall == 1.0,
        f1=round(f1, 6),
        precision=round(precision, 6),
        recall=round(recall, 6),
        paper_em=paper_em(best, all_names),
        em_tok=bool(best.strip()) and token_em(best, all_names),  # no answer (an abstention) never matches
        f1_tok=round(token_f1(best, all_names), 6) if best.strip() else 0.0,
    )


def explored_relations(paths: Iterable[Any]) -> list[str]:
    """Relation ids and labels along a record's KG evidence paths (dicts or EvidencePaths)."""
    found: list[str] = []
    for path in paths or []:
        if isinstance(path, dict):
            path = EvidencePath.from_dict({"source": "kg", **path})
        if isinstance(path, EvidencePath):
            found.extend(path.explored_relations())
    return found


def score_record(record: Mapping[str, Any]) -> Correctness | None:
    """Every per-question metric of a record (its dict form): the one function behind both
    the `correct` field a batch stores and `eval`'s averages. None without gold answers."""
    extra = record.get("extra") or {}
    gold = extra.get("gold") or {}
    answers = [str(a) for a in record.get("answers") or []]
    if not answer_groups(answers, gold.get("answer_groups")):
        return None
    result = score(str(record.get("prediction") or ""), record.get("predictions"), answers,
                   gold.get("answer_groups"), extra.get("answer_text"))
    gold_relations = [str(r) for r in gold.get("relations") or []]
    if gold_relations:
        result.path_overlap = path_overlap(explored_relations(record.get("paths") or []), gold_relations)
    return result


# ---- relation paths ------------------------------------------------------------------------


def normalise_relation(relation: str) -> str:
    """A comparison form of a relation id or label.

    The local name of an IRI (`.../relation/directed_by` -> `directed_by`,
    `.../prop/direct/P27` -> `p27`, Freebase keeps `film.film.directed_by`), case-folded, with
    MetaQA's `_reverse` suffix dropped (direction does not count) and spaces/hyphens as `_`.
    """
    from ingest.terms import local_name

    text = str(relation).strip()
    if text.startswith("<") and text.endswith(">"):
        text = text[1:-1]
    if "://" in text or text.startswith("urn:"):
        text = local_name(text)
    elif re.fullmatch(r"[a-z]+:[A-Za-z0-9_.]+", text):  # prefixed name: wdt:P27, ns:film.film.x
        text = text.split(":", 1)[1]
    text = text.casefold()
    text = re.sub(r"[\s\-]+", "_", text)
    if text.endswith("_reverse"):
        text = text[: -len("_reverse")]
    return text


def path_overlap(explored: Iterable[str], gold: Iterable[str]) -> float | None:
    """|Rel(explored) ∩ Rel(gold)| / |Rel(gold)| over unduplicated relations (ToG App. / HydraRAG
    App. B.3); None when there is no gold path."""
    gold_set = {normalise_relation(r) for r in gold if str(r).strip()}
    gold_set.discard("")
    if not gold_set:
        return None
    explored_set = {normalise_relation(r) for r in explored if str(r).strip()}
    return len(gold_set & explored_set) / len(gold_set)
