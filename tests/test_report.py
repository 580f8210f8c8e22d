"""The run report without a browser: the page's data and markup from hand-made runs (errors,
missing records, a torn line, a method without paths, hostile text), the evidence graphs, the
plots, and the `report` / `show` commands. The browser tests are in test_report_browser.py."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from report_runs import HOSTILE, QUESTIONS, awkward_run, doc_path, kg_path, record, topic, write_run

from cli import main
from engine.report.evidence import MAX_NODES, record_evidence
from engine.report.html_report import write_report
from engine.report.stage_recall import stage_recall


def page_data(html: str) -> tuple[dict[str, Any], list[list[dict[str, Any]]]]:
    """The index and detail blocks embedded in a report page, decoded as the browser does."""
    packed = dict(re.findall(r"<script type='application/x-gzip-base64' id='([\w-]+)'>([^<]*)</script>", html))
    decode = lambda text: json.loads(gzip.decompress(base64.b64decode(text)))  # noqa: E731
    index = decode(packed.pop("index-data"))
    blocks = [decode(packed[f"blk-{k}"]) for k in range(len(packed))]
    return index, blocks


def test_report_of_an_awkward_run_holds_every_case(tmp_path: Path) -> None:
    run = awkward_run(tmp_path / "run")
    stats = write_report([run], tmp_path / "r.html", block_size=2)
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    index, blocks = page_data(html)
    assert stats.questions == 3 and stats.records == 10
    assert index["methods"] == ["tog", "rag", "io", "hydra"] and index["datasets"] == ["run"]
    by_id = {q[0]: q for q in index["questions"]}
    assert [q[0] for q in index["questions"]] == ["q1", "q2", "q3"]  # the run's order
    assert by_id["q1"][4]["tog"][1] == 1 and by_id["q1"][4]["io"][1] == 0  # eval's Hits@1
    assert "tog" not in by_id["q3"][4] and "hydra" not in by_id["q3"][4]  # missing records
    assert by_id["q2"][4]["rag"][2] == 1  # the error record
    assert by_id["q1"][4]["tog"][3:5] == [2, 210]  # calls and prompt tokens
    details = [d for block in blocks for d in block]
    assert len(blocks) == 2 and len(details) == 3
    assert details[1]["rag"]["e"].startswith("RuntimeError") and details[0]["io"]["g"]["n"] == []
    (stage, messages, reply, _) = details[1]["tog"]["tx"][0]
    assert stage == "reasoning"
    assert index["strings"][messages[0][1]] == "You answer from triples." and HOSTILE in messages[1][1]
    assert HOSTILE in reply
    # the torn last line of hydra.jsonl is reported by eval's reading, not hidden
    assert "torn" in html
    # eval's metrics table: one row per method, rag with its error
    table = html[html.index("id='metrics'"):html.index("</table>")]
    assert table.count("<tr>") == 5 and "<td>rag</td>" in table


def test_hostile_text_never_becomes_markup(tmp_path: Path) -> None:
    run = awkward_run(tmp_path / "run")
    html = write_report([run], tmp_path / "r.html").out.read_text(encoding="utf-8")
    assert "onerror" not in html  # only inside the base64 data, where no tag can end
    assert html.count("</script>") == html.count("<script")
    assert re.search(r"<img", html) is None


def test_evidence_graph_layers_nodes_by_hop_and_keeps_sources() -> None:
    q = QUESTIONS[0]
    rec = record(q, "tog2", "x", topic_entities=topic("A"),
                 paths=[kg_path(("A", "r1", "B"), ("B", "r2", "C")), kg_path(("D", "r3", "A"), source="wiki"),
                        doc_path("doc#1", "C", "C is a city named after A.", source="web")])
    graph = record_evidence(rec)
    layers = {label: layer for label, layer, _ in graph.nodes}
    assert layers == {"A": 0, "B": 1, "C": 2, "D": 1, "C [doc#1]": 1}  # the doc names A: one hop from it
    assert graph.nodes[0][2] == "topic"
    assert ["B", "r2", "C"] in [[graph.nodes[a][0], rel, graph.nodes[b][0]] for a, b, rel, _ in graph.edges]
    assert {src for *_, src in graph.edges} == {"kg", "wiki", "web"}
    assert graph.chunks == [["doc#1", "C", "C is a city named after A.", "web", []]]  # no model text


def test_evidence_graph_is_capped_and_counts_the_rest() -> None:
    rec = record(QUESTIONS[0], "hydra", "x", topic_entities=topic("hub"),
                 paths=[kg_path(("hub", "r", f"n{k}")) for k in range(MAX_NODES + 15)])
    graph = record_evidence(rec)
    assert len(graph.nodes) == MAX_NODES and graph.left_out == 16
    assert all(a < MAX_NODES and b < MAX_NODES for a, b, *_ in graph.edges)


def test_plots_hold_a_point_per_method_and_dataset_and_the_hydra_funnel(tmp_path: Path) -> None:
    one = awkward_run(tmp_path / "a" / "one")
    two = awkward_run(tmp_path / "b" / "two")
    html = write_report([one, two], tmp_path / "r.html").out.read_text(encoding="utf-8")
    cost = html[html.index("id='cost-plots'"):html.index("id='group-plots'")]
    assert cost.count("<svg") == 3 and cost.count('class="pm"') == 3 * 8  # 4 methods x 2 runs per plot
    groups = html[html.index("id='group-plots'"):html.index("id='funnels'")]
    assert groups.count("<svg") == 2 and "Hits@1 by hops" in groups
    funnels = html[html.index("id='funnels'"):html.index("<h2>Questions")]
    assert funnels.count("<svg") == 2 and "in the final answer (Hits@1)" in funnels


def test_stage_recall_matches_the_funnel_input(tmp_path: Path) -> None:
    run = awkward_run(tmp_path / "run")
    records = [json.loads(line) for line in (run / "hydra.jsonl").read_text().splitlines()[:2]]
    recall = stage_recall(records)
    assert recall["n"] == 2 and recall["subgraph"] == 1.0 and recall["selected"] == 0.5
    assert recall["answer"] == 0.5 and recall["lost"] == {"relevance": 1}


def test_run_with_only_unscored_records_and_no_run_json_still_reports(tmp_path: Path) -> None:
    q = dict(QUESTIONS[0], answers=[])
    run = write_run(tmp_path / "run", {"io": [record(q, "io", "x")]})
    (run / "run.json").unlink()
    html = write_report([run], tmp_path / "r.html").out.read_text(encoding="utf-8")
    assert "nothing to plot" in html and "no run.json" in html
    index, _ = page_data(html)
    assert index["questions"][0][4]["io"][1] is None


def test_cli_report_and_show(tmp_path: Path) -> None:
    run = awkward_run(tmp_path / "run")
    runner = CliRunner()
    result = runner.invoke(main, ["report", str(run), "--out", str(tmp_path / "out" / "r.html"), "--no-calls"])
    assert result.exit_code == 0, result.output
    assert "3 questions, 10 records" in result.output and (tmp_path / "out" / "r.html").exists()
    _, blocks = page_data((tmp_path / "out" / "r.html").read_text(encoding="utf-8"))
    assert blocks[0][1]["tog"]["tx"] == []
    bad = runner.invoke(main, ["report", str(tmp_path / "nope"), "--out", str(tmp_path / "x.html")])
    assert bad.exit_code == 2 and "no such run folder" in bad.output
    shown = runner.invoke(main, ["show", str(run), "q2", "--method", "tog", "--prompts"])
    assert shown.exit_code == 0, shown.output
    for text in ("Kestrel Cell Works -subsidiary of-> Lumera Industrial Trust", "-headquartered in-> Lumera",
                 "reasoning", "You answer from triples.", "total"):
        assert text in shown.output, text
    rag = runner.invoke(main, ["show", str(run), "q1", "--method", "rag"])
    assert "reports/norvale.md#0" in rag.output and "Norvale Motors was founded" in rag.output
    missing = runner.invoke(main, ["show", str(run), "q3", "--method", "tog"])
    assert missing.exit_code == 2 and "no record of question 'q3'" in missing.output
    unknown = runner.invoke(main, ["show", str(run), "q1", "--method", "tog9"])
    assert unknown.exit_code == 2 and "no method 'tog9'" in unknown.output
