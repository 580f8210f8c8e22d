"""MkDocs hook: the tables of docs/ that report data are rendered from that data, not copied.

`mkdocs.yml` names this module under `hooks:`; `on_page_markdown` replaces three kinds of marker
(HTML comments, so the raw page on a file browser shows nothing in their place):

- `<!-- options: tog -->`: the config keys of a method (default, allowed values, help, paper
  reference), read from its typed config through its `MethodSpec` in
  `engine/methods/registry.py` (what `python cli.py methods` prints).
- `<!-- method-table: table05 -->` (optionally `method=tog`): the comparison table of methods per
  set (set, method, accuracy, LLM calls, prompt tokens, LLM seconds per question, run folder) from
  the rows `table05-<set>-<method>-<metric>` of bench/expected_scores.json.
- `<!-- table ... -->`: a Markdown table written inside the comment whose `{ROW_ID}` (or
  `{ROW_ID:FORMAT}`) cells are replaced by the expected value of that row of
  bench/expected_scores.json, printed as the docs print it (rates in percent with one decimal,
  calls and seconds with one decimal, tokens and counts as integers; FORMAT overrides);
  `{MIN_ID~MAX_ID}` prints a range `low–high` (one value when both are the same). A cell
  `{@NAME/KEY/KEY...}` (or `{@NAME/KEY...:FORMAT}`) is a value of the benchmark results
  bench/results/NAME.json, keys separated by `/` (a list's items by their index), printed as the
  JSON holds it. Its FORMAT may start with a unit change, `*FACTOR` or `/FACTOR` (a number, or
  one of KiB, MiB, GiB, kB, MB, GB), then `:` and the format spec: `{@graph/x/extract_s:*1000:.0f}`
  prints seconds as milliseconds, `{@wikiscale/build/peak_rss_bytes:/GiB:.2f}` bytes as GiB.

`render` is the same function for the tests: tests/test_expected_scores.py checks each row's
phrase in the page as rendered here, so a number shown only in a generated table is still checked.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # mkdocs loads hooks by path; the engine is imported from the root
    sys.path.insert(0, str(ROOT))

from engine.methods import registry  # noqa: E402
from engine.runs.expected_scores import DEFAULT_FILE, Entry, load_entries  # noqa: E402

MARKER = re.compile(r"<!--\s*(options|method-table|table)\b:?(.*?)-->", re.DOTALL)
CELL = re.compile(r"\{(?P<id>@[A-Za-z0-9][^{}:~|\n]*|[A-Za-z0-9][\w.+@-]*)(?:~(?P<to>[A-Za-z0-9][\w.+@-]*))?"
                  r"(?::(?P<fmt>[^{}|\n]*))?\}")
RESULTS = ROOT / "bench" / "results"
# The unit change that may start a benchmark cell's FORMAT: `*1000:.0f` (seconds -> ms), `/GiB:.2f`.
UNITS = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "kB": 1e3, "MB": 1e6, "GB": 1e9}
SCALE = re.compile(r"(?P<op>[*/])(?P<factor>KiB|MiB|GiB|kB|MB|GB|\d+(?:\.\d+)?(?:e\d+)?)(?::(?P<spec>.*))?$")
# Metrics printed as percentages (the eval JSON holds fractions in [0, 1]).
RATES = {"hits1", "em", "f1", "em_tok", "f1_tok", "paper_em", "cache_hit_rate", "mean_all", "mean_correct"}
ONE_DECIMAL = {"llm_calls", "llm_seconds"}
# The columns of a method table and the metric suffix of their rows' ids.
ACCURACY_SUFFIXES = ("hits1", "em-tok")
COST_SUFFIXES = ("llm-calls", "prompt-tokens", "llm-seconds")
SET_ORDER = ("MetaQA 1-hop", "MetaQA 2-hop", "MetaQA 3-hop", "PQ-3H", "MetaQA 2-hop, half KB + text",
             "AdvHotpotQA (EM tok)", "demo")
TABLE_SET = re.compile(r"^\S+ \S+ on (?P<set>.*) \(the HydraRAG comparison table\)")


class DocsTableError(ValueError):
    """A marker of a docs page names a method, row or table that does not exist."""


def display(entry: Entry, fmt: str | None = None) -> str:
    """A row's expected value as the docs print it (`fmt`, a format spec, overrides)."""
    metric = entry.metric.rsplit(".", 1)[-1]
    value = entry.expected * 100 if metric in RATES else entry.expected
    if fmt is None:
        fmt = ".1f" if metric in RATES or metric in ONE_DECIMAL else ".0f"
    return format(value, fmt)


def _cell(value: Any) -> str:
    return "`" + json.dumps(value).replace("|", "\\|") + "`"


def _text(value: str) -> str:
    return value.replace("|", "\\|")


def options_table(method: str) -> str:
    """The config keys of `method` from its registered MethodSpec: default, allowed values, help
    and paper reference (a method without a typed config: key and default)."""
    from engine.methods.registry import get

    try:
        spec = get(method)
    except ValueError as exc:
        raise DocsTableError(f"<!-- options: {method} -->: {exc}") from None
    lines = [f"`{spec.name}`: {spec.summary}", ""]
    options = spec.options()
    if any(o.help for o in options):
        lines += ["| key | default | allowed | what | paper |", "|---|---|---|---|---|"]
        lines += [f"| `{o.key}` | {_cell(o.default)} | {_text(o.allowed)} | {_text(o.help)} | {_text(o.paper)} |"
                  for o in options]
    else:
        lines += ["| key | default |", "|---|---|"]
        lines += [f"| `{key}` | {_cell(value)} |" for key, value in spec.defaults.items()]
    lines += ["", f"(From the method's spec; `python cli.py methods` prints the same. "
                  f"`--set {spec.name}.KEY=VALUE` on `ask` and `batch` overrides one.)"]
    return "\n".join(lines)


def method_table(table: str, entries: Sequence[Entry], method: str | None = None) -> str:
    """Set x method rows of the comparison table `table` (e.g. table05), from its rows' values."""
    by_id = {e.id: e for e in entries}
    groups: dict[str, Entry] = {}  # "<table>-<set>-<method>" -> its accuracy row, in file order
    for entry in entries:
        for suffix in ACCURACY_SUFFIXES:
            if entry.id.startswith(f"{table}-") and entry.id.endswith(f"-{entry.method}-{suffix}"):
                groups[entry.id[: -len(suffix) - 1]] = entry
    if not groups:
        raise DocsTableError(f"<!-- method-table: {table} -->: no rows {table}-<set>-<method>-hits1")
    rows: list[tuple[str, str, str]] = []  # (set, method, line)
    for stem, accuracy in groups.items():
        if method is not None and accuracy.method != method:
            continue
        match = TABLE_SET.match(accuracy.what)
        if match is None:
            raise DocsTableError(f"{accuracy.id}: its 'what' does not name the set: {accuracy.what!r}")
        try:
            costs = [display(by_id[f"{stem}-{suffix}"]) for suffix in COST_SUFFIXES]
        except KeyError as exc:
            raise DocsTableError(f"<!-- method-table: {table} -->: row {exc} is missing") from None
        rows.append((match["set"], accuracy.method, f"| {match['set']} | {accuracy.method} | {display(accuracy)} "
                     f"| {' | '.join(costs)} | {accuracy.runs[0]} |"))
    # sets in the evaluation's order (others after, as the file first names them), methods in the
    # registry's order (baselines first)
    sets = [*SET_ORDER, *dict.fromkeys(s for s, _, _ in rows if s not in SET_ORDER)]
    order = {m: i for i, m in enumerate(registry.names())}
    rows.sort(key=lambda r: (sets.index(r[0]), order.get(r[1], len(order)), r[1]))
    return "\n".join(["| set | method | accuracy (%) | LLM calls/q | prompt tok/q | LLM s/q | run |",
                      "|---|---|---:|---:|---:|---:|---|", *(line for _, _, line in rows)])


def bench_value(reference: str, fmt: str | None = None) -> str:
    """`NAME/KEY/KEY...`: a value of bench/results/NAME.json, as the JSON holds it (or formatted)."""
    name, *keys = reference.split("/")
    path = RESULTS / f"{name}.json"
    try:
        value: Any = json.loads(path.read_text(encoding="utf-8"))
    except OSError:
        raise DocsTableError(f"<!-- table -->: no benchmark results {path.relative_to(ROOT)}") from None
    for key in keys:
        if isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        elif isinstance(value, dict) and key in value:
            value = value[key]
        else:
            raise DocsTableError(f"<!-- table -->: {path.relative_to(ROOT)} has no {'/'.join(keys)}")
    if isinstance(value, dict | list):
        raise DocsTableError(f"<!-- table -->: {reference} is not a single value")
    scale = SCALE.match(fmt or "")
    if scale is not None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise DocsTableError(f"<!-- table -->: {reference} is {value!r}, not a number to scale")
        factor = UNITS.get(scale["factor"]) or float(scale["factor"])
        value = value * factor if scale["op"] == "*" else value / factor
        fmt = scale["spec"]
    return format(value, fmt) if fmt else str(value)


def fill_table(template: str, entries: Sequence[Entry]) -> str:
    """A table written inside `<!-- table ... -->` with its `{ROW_ID}` cells filled in."""
    by_id = {e.id: e for e in entries}

    def shown(row_id: str, fmt: str | None) -> str:
        entry = by_id.get(row_id)
        if entry is None:
            raise DocsTableError(f"<!-- table -->: no row {row_id!r} in {DEFAULT_FILE.name}")
        return display(entry, fmt)

    def value(match: re.Match[str]) -> str:
        if match["id"].startswith("@"):
            return bench_value(match["id"][1:], match["fmt"])
        low = shown(match["id"], match["fmt"])
        high = low if match["to"] is None else shown(match["to"], match["fmt"])
        return low if high == low else f"{low}–{high}"

    return CELL.sub(value, template.strip("\n"))


def render(markdown: str, entries: Sequence[Entry] | None = None) -> str:
    """A page's Markdown with every marker replaced by its table."""
    if MARKER.search(markdown) is None:
        return markdown
    rows = list(load_entries(DEFAULT_FILE) if entries is None else entries)

    def replace(match: re.Match[str]) -> str:
        kind, body = match[1], match[2]
        if kind == "options":
            return options_table(body.strip())
        if kind == "method-table":
            table, *rest = body.split()
            options = dict(part.split("=", 1) for part in rest)
            return method_table(table, rows, options.get("method"))
        return fill_table(body, rows)

    return MARKER.sub(replace, markdown)


def render_file(path: Path | str) -> str:
    """The page at `path` (relative to the repository root) as the docs site renders its tables."""
    return render((ROOT / path).read_text(encoding="utf-8"))


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs event: fill the page's markers before it is converted to HTML."""
    return render(markdown)
