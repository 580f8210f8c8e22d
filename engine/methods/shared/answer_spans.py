"""Answer-shaped spans of passages: the names, titles, dates and numbers a passage could answer a
question with. The `chains` method offers them (beside KG entity names) as the only answers its
answer call may give, so an answer is always a span of the evidence the model was shown.

    spans_of("The board appointed Sabine Oduya as chief executive officer in March 2021.")
    # ["Sabine Oduya", "March 2021", "2021"]
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

from index.entities import normalise

# A run of capitalised words, allowing a few lower-case joiners inside ("Bank of England",
# "Jean de Florette"); digits may follow ("Apollo 11"). A full stop ends a run ("John Pinette.
# Simon Sez" is two names).
_NAME = re.compile(
    r"(?:[A-Z][\w'’&-]*|\d+[\w-]*)(?:\s+(?:(?:of|the|and|de|la|le|von|van|der|du|del|da|for|on|in|&)\s+)*"
    r"(?:[A-Z][\w'’&-]*|\d+\w*))*")
_MONTHS = ("January|February|March|April|May|June|July|August|September|October|November|December|"
           "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec")
_DATE = re.compile(rf"\b(?:\d{{1,2}}\s+(?:{_MONTHS})\.?\s+\d{{3,4}}|(?:{_MONTHS})\.?\s+\d{{1,2}},?\s+\d{{3,4}}"
                   rf"|(?:{_MONTHS})\.?\s+\d{{3,4}}|\d{{4}}-\d{{2}}-\d{{2}})\b")
# a figure's measure ("517 km", "12 percent"): a bare number the passages state only so is given so
# (`stated_form`); counts and durations ("45 years") are units too, but left to the question
_MEASURES = (r"%|percent|million|billion|km/h|mph|kph|km|kilometres|kilometers|miles|metres|meters|m|cm|mm|ft|"
             r"feet|inches|kg|kilograms|lb|pounds|tonnes|tons|acres|hectares|ha")
_UNITS = (rf"{_MEASURES}|thousand|square \w+|years?|months?|days?|hours?|minutes?|people|inhabitants|seats|"
          r"episodes|seasons|members|employees|students|copies|games|goals|points|floors|storeys|stories")
_NUMBER = re.compile(rf"(?<![\w.])(?:[$€£¥]\s?)?\d[\d,]*(?:\.\d+)?(?:\s?(?:{_UNITS}))?(?![\w])")
# "about 700 km", "nearly 2,000 people": the qualifier is part of how a source states a figure
_QUALIFIED = re.compile(rf"\b(?:about|approximately|around|nearly|almost|over|more than|less than|roughly|some|"
                        rf"up to|at least)\s+(?:[$€£¥]\s?)?\d[\d,]*(?:\.\d+)?(?:\s?(?:{_UNITS}))?(?![\w])")
# "from 1973 to 1996", "1973-1996", "between 1990 and 1995"
_RANGE = re.compile(r"\b(?:from\s+\d{3,4}\s+(?:to|until)\s+\d{3,4}|between\s+\d{3,4}\s+and\s+\d{3,4}"
                    r"|\d{4}\s?[-–]\s?\d{2,4})\b")
# where a name run is cut into its parts ("Fredric March and Charles Laughton": two names;
# "Sierras Chicas on the Suquía River": a place on a river); "of", "de"... stay inside a name
_SPLIT = re.compile(r"\s+(?:and|&|on|in|for|the)\s+(?:(?:the)\s+)?")
# a demonym or adjective before its noun ("a Canadian comedian", "an American drama film")
_DEMONYM = re.compile(r"\b([A-Z][a-z]+(?:an|ian|ese|ish|ic|i))\s+([a-z][a-z-]{2,}(?:\s+(?:film|series|band|game|company))?)\b")
# what a thing is: "X is a massively multiplayer online role-playing video game set in ..."
_PHRASE = (r"((?:[\w-]+\s+){0,7}?[\w-]+)"
           r"(?=\s+(?:set|that|which|who|whose|in|on|at|by|from|with|for|of|and|based|located)\b|[,.;:()]|$)")
_KIND = re.compile(r"\b(?:is|was|are|were)\s+(?:a|an)\s+" + _PHRASE)
# what a thing is, by name: "The flagship product is the Weaver-6 welding arm, which ..." (`definite`)
_DEFINITE = re.compile(r"\b(?:is|was|are|were)\s+the\s+" + _PHRASE)
# a nickname inside a name: Duane "Dewy" Clarridge
_NICKNAMED = re.compile(r"[A-Z][\w'’-]+\s+[\"“][A-Z][\w'’-]*[\"”]\s+[A-Z][\w'’-]+")
# "Kaunas, Lithuania": a place and the country or region it lies in
_PLACE = re.compile(r"\b([A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*),\s+([A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*)\b")
# the subject of a copular clause, a name and the lower-case nouns after it: "the AF-28 microcontroller
# remains its flagship product" (`copular_subjects`); the nouns hold no function word ("the Brattvik
# Plant in Brattvik is ..." is a name run already)
_SUBJECT = re.compile(r"\b[Tt]he\s+((?:[A-Z0-9][\w'’&-]*\s+)+(?:[a-z][\w-]*\s+){1,3}?)"
                      r"(?:is|was|remains|remained|becomes|became|stays|stayed)\s+(?:its|the|their|his|her|a|an|our)\b")
_QUOTED = re.compile(r"[\"“]([^\"”]{2,80})[\"”]")
# Sentence-initial words that are capitalised only because they start the sentence.
_FUNCTION = frozenset(["a", "an", "the", "this", "that", "these", "those", "it", "its", "he", "she", "they", "his", "her", "their", "we", "our", "in", "on", "at", "of", "for", "by", "with", "from", "to", "as", "and", "or", "but", "if", "when", "while", "after", "before", "during", "since", "until", "he", "is", "was", "were", "are", "be", "been", "there", "here", "what", "which", "who", "whom", "whose", "where", "why", "how", "also", "however", "although", "though", "other", "another", "some", "many", "most"])
_YES_NO = re.compile(r"^\s*(?:is|are|was|were|do|does|did|can|could|has|have|had|will|would|should|shall)\b"
                     r"(?!\s+(?:you|we)\b)", re.IGNORECASE)  # "can you describe ..." asks for more than yes

MAX_SPAN_CHARS = 80


def _clean(span: str) -> str:
    span = " ".join(span.split()).strip(" ,;:.'’\"")
    words = span.split()
    while words and words[0].lower() in _FUNCTION:
        words = words[1:]
    return " ".join(words)


def spans_of(text: str, definite: bool = False) -> list[str]:
    """Distinct answer-shaped spans of `text` in order of appearance: dates, quoted titles,
    capitalised names and numbers (a date's year also on its own), what a thing "is a" (and, with
    `definite`, what it "is the": "the Weaver-6 welding arm", where a name run stops at "welding")."""
    found: list[tuple[int, str]] = []
    for match in _DATE.finditer(text):
        found.append((match.start(), match.group(0)))
        year = re.search(r"\d{4}", match.group(0))
        if year:
            found.append((match.start() + 1, year.group(0)))
    for match in _QUOTED.finditer(text):
        found.append((match.start(), match.group(1)))
    for match in _NAME.finditer(text):
        found.append((match.start(), match.group(0)))
        parts = _SPLIT.split(match.group(0))
        if len(parts) > 1:
            found.extend((match.start() + 1, part) for part in parts)
    for match in _PLACE.finditer(text):
        found.append((match.start() + 2, match.group(0)))
    for match in _DEMONYM.finditer(text):
        found.append((match.start() + 2, match.group(0)))
    for match in (*_KIND.finditer(text), *(_DEFINITE.finditer(text) if definite else ())):
        found.append((match.start(1), match.group(1)))
    for match in _NUMBER.finditer(text):
        found.append((match.start(), match.group(0)))
    kept_whole = {m.group(0) for p in (_QUALIFIED, _RANGE, _NICKNAMED) for m in p.finditer(text)}
    found.extend((text.index(span), span) for span in kept_whole)
    spans: dict[str, None] = {}
    for _, span in sorted(found, key=lambda item: item[0]):
        cleaned = " ".join(span.split()) if span in kept_whole else _clean(span)
        if cleaned and len(cleaned) <= MAX_SPAN_CHARS and any(ch.isalnum() for ch in cleaned):
            spans.setdefault(cleaned, None)
    return list(spans)


def copular_subjects(passage: str) -> list[str]:
    """The names with their nouns that open a copular clause after "the": "the AF-28 microcontroller
    remains its flagship product" -> "AF-28 microcontroller" (the name run stops at the lower-case
    noun, and "AF-28" alone is not what the passage says the product is)."""
    found = []
    for match in _SUBJECT.finditer(passage):
        words = match.group(1).split()
        if not any(w.lower() in _FUNCTION for w in words[1:]):
            found.append(" ".join(words))
    return found


def whole_spans(passage: str, spans: Sequence[str], known: Collection[str],
                unoffered: Collection[str] = ()) -> list[str]:
    """`spans` of `passage` with the `known` names it says whole where the span patterns cut them
    ("Harry L. Fraser" at its full stop, "Sinbad and the Eye of the Tiger" at its lower-case "and
    the"), in order of appearance, and without the spans that the passage says only inside known
    names ("Harry L", "Tiger"). A known name no span falls inside of is not added (the patterns did
    not offer it: "charles_iii_of_spain"); one in `unoffered` (lower case: the topic's own) still
    cuts its parts but is not offered."""
    found = [(a, b, name) for name in known if len(name) > 1 and name in passage for a, b in _said(passage, name)]
    if not found:
        return list(spans)
    def inside(a: int, b: int, start: int, end: int) -> bool:
        return start <= a and b <= end and b - a < end - start

    said = {span: _said(passage, span) for span in spans}
    placed = [(start, name) for start, end, name in found if name.lower() not in unoffered
              and any(inside(a, b, start, end) for hits in said.values() for a, b in hits)]
    for span, hits in said.items():
        if not hits or not all(any(inside(a, b, s, e) for s, e, _ in found) for a, b in hits):
            at = passage.find(span)
            placed.append((at if at >= 0 else len(passage), span))
    return list(dict.fromkeys(span for _, span in sorted(placed, key=lambda item: item[0])))


def _said(passage: str, name: str) -> list[tuple[int, int]]:
    """Where `passage` says `name` as whole words."""
    return [m.span() for m in re.finditer(rf"(?<!\w){re.escape(name)}(?!\w)", passage)]


def is_yes_no(question: str) -> bool:
    """Whether the question opens as one asking for yes or no ("Are both X and Y American?");
    `alternatives` tells one that asks which of two ("Are X and Y democratic or republican?")."""
    return bool(_YES_NO.match(question))


# "democratic or republican", "north or south": the words either side of "or" in a question
# that opens like a yes/no one ("either X or Y", "whether": still yes or no, `alternatives`)
_ALTERNATIVES = re.compile(r"\b(\w[\w-]*)\s+or\s+(\w[\w-]*)\b", re.IGNORECASE)


def alternatives(question: str) -> list[str]:
    """The alternatives a question offers ("Is X north or south of Y?": north, south), else []."""
    if not _YES_NO.match(question) or re.search(r"\beither\b|\bwhether\b", question, re.IGNORECASE):
        return []
    match = _ALTERNATIVES.search(question)
    return [match.group(1), match.group(2)] if match else []


# "how many employees ...": the noun the question counts
_COUNTED = re.compile(r"\bhow\s+(?:many|much)\s+([a-z][\w-]*)", re.IGNORECASE)


def bare_count(question: str, span: str) -> str:
    """A number span stated with the noun the question counts, as the bare number ("How many
    employees ...?": "16,400 employees" -> "16,400"; the question already names the unit); any
    other span as it is."""
    counted = _COUNTED.search(question)
    if counted is None:
        return span
    number, _, unit = span.partition(" ")
    if unit and _NUMBER.fullmatch(number) and unit.lower().rstrip("s") == counted.group(1).lower().rstrip("s"):
        return number
    return span


# the question's first question word; "what year", "in which year": a year
_WH = re.compile(r"\b(who|whom|whose|what|which|where|when|how)\b", re.IGNORECASE)
_YEAR_ASKED = re.compile(r"\b(?:what|which)\s+year\b", re.IGNORECASE)
_DATE_PART = re.compile(rf"(?:\d{{1,4}}|(?:{_MONTHS})\.?\s+\d{{1,2}}|\d{{1,2}}\s+(?:{_MONTHS})|(?:{_MONTHS}))")


def date_asked(question: str) -> str | None:
    """"year" for a question that asks for a year ("In what year ...?"), "date" for one whose
    first question word is "when", else None."""
    if _YEAR_ASKED.search(question):
        return "year"
    first = _WH.search(question)
    return "date" if first is not None and first.group(1).lower() == "when" else None


def date_at_grain(question: str, answer: str, passages: Sequence[str]) -> str:
    """The answer at the grain the question asks a date in (`date_asked`). For a "when" question,
    an answer that is a part of a date or period a passage states (its year, its day and month)
    becomes that date or period as the passage states it ("1845" -> "August 6, 1845", "1973" ->
    "from 1973 to 1996"; the first passage that holds one); for a "what year" question, a whole
    date becomes its year. Any other answer, or question, stays as it is."""
    asked = date_asked(question)
    if asked is None or not answer:
        return answer
    if asked == "year":
        whole = _DATE.fullmatch(answer)
        year = re.search(r"\d{4}", answer) if whole else None
        return year.group(0) if year else answer
    if not _DATE_PART.fullmatch(answer):
        return answer
    inside = re.compile(rf"(?<!\w){re.escape(answer)}(?!\w)")
    for passage in passages:
        for match in (*_DATE.finditer(passage), *_RANGE.finditer(passage)):
            if match.group(0) != answer and inside.search(match.group(0)):
                return " ".join(match.group(0).split())
    return answer


_BARE_NUMBER = re.compile(r"[$€£¥]?\d[\d,]*(?:\.\d+)?")


def stated_form(question: str, answer: str, passages: Sequence[str]) -> str:
    """A bare number the passages never state bare, as they state it: with its ordinal suffix ("What
    number president ...?": "45" -> "45th") or its measure ("517" -> "517 km"), the first passage
    that holds one. A number the passages also state bare, a "how many/much N" question's answer
    (`bare_count`: the question names the unit) and any other answer stay as they are."""
    if not _BARE_NUMBER.fullmatch(answer) or _COUNTED.search(question):
        return answer
    at = re.compile(rf"(?<![\w.,$€£¥]){re.escape(answer)}(?:(st|nd|rd|th)\b|\s?(?:{_MEASURES})(?![\w]))?(?![\w]|[.,]\d)")
    stated = [" ".join(m.group(0).split()) for passage in passages for m in at.finditer(passage)]
    if not stated or answer in stated:
        return answer
    return stated[0]


def echoes(question: str, answer: str) -> bool:
    """The answer is words the question itself says ("Where is the host of ... The Island,
    originally from?": The Island), not a part of a longer name there ("In which city was the
    board chair of Pellin Rail Freight born?": Pellin), in a question that offers no answer of its
    own words (yes/no, "A or B"). Case- and accent-insensitive, word by word."""
    tokens = re.findall(r"\w+", question)
    said, words = [normalise(t) for t in tokens], re.findall(r"\w+", normalise(answer))
    if not words or is_yes_no(question) or "or" in said:
        return False
    n = len(words)
    return any(said[i:i + n] == words and not _named_on(tokens, i - 1, i + n) for i in range(len(said) - n + 1))


def _named_on(tokens: Sequence[str], before: int, after: int) -> bool:
    """A capitalised word next to a run of the question's words (not its first word): the run is
    part of a longer name ("Pellin" of "Pellin Rail Freight", the city the company is named after)."""
    return (before > 0 and tokens[before][:1].isupper()) or (after < len(tokens) and tokens[after][:1].isupper())


def allowed_answers(question: str, names: Sequence[str], passages: Sequence[str],
                    limit: int = 60, choices: bool = False, withheld: Collection[str] = (),
                    counts: bool = False, definite: bool = False, known: Collection[str] = (),
                    unoffered: Collection[str] = (), subjects: bool = False) -> list[str]:
    """The answers the model may give: "yes"/"no" for a yes/no question, the candidate entity
    names, then the spans of the passages, at most `limit` in all. With `choices`, a question that
    offers alternatives ("... democratic or republican?") gets them in place of yes and no. A span
    in `withheld` (lower case) is not offered; a candidate name always is. With `counts` a "how
    many N" question is offered a span "<number> N" as the bare number (`bare_count`); `definite`:
    `spans_of`'s. `known`: entity names a passage may say whole (`whole_spans`); `unoffered` (lower
    case) among them cut spans but are not offered themselves (the topic's own name). With `subjects`
    a passage's `copular_subjects` are known names of it too ("AF-28 microcontroller" for "AF-28")."""
    allowed: dict[str, None] = {}
    offered = alternatives(question) if choices else []
    if is_yes_no(question) and not offered:
        allowed.update({"yes": None, "no": None})
    allowed.update(dict.fromkeys(offered))
    for name in names:
        if name.strip():
            allowed.setdefault(name.strip(), None)
    for passage in passages:
        said = [*known, *copular_subjects(passage)] if subjects else known
        for span in whole_spans(passage, spans_of(passage, definite), said, unoffered):
            if span.lower() not in withheld:
                allowed.setdefault(bare_count(question, span) if counts else span, None)
    return list(allowed)[:limit]
