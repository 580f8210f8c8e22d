r"""The long help texts of cli.py's commands (those with examples), one constant per command,
so that cli.py holds only the commands. Each is what `python cli.py COMMAND --help` prints above
the options; a `\b` line keeps click from rewrapping the paragraph below it. Shorter help texts
stay in cli.py as the commands' docstrings.
"""

from __future__ import annotations

INDEX = """Build or update an index folder from KG dumps and document collections.

Builds are atomic (a temp folder renamed at the end) and incremental: sources recorded by
earlier builds are kept, and a stage whose inputs are unchanged is skipped. Options not
given are those the index was last built with (manifest.json), else the defaults; an option
given overrides them and rebuilds the stages it affects (--replace forgets them). Malformed
input lines are skipped, counted and written to DIR/rejects.jsonl.

\b
Examples:
  python cli.py index --out data/indexes/metaqa --kg ../shared/data/metaqa/kb --kg-format metaqa
  python cli.py index --out data/indexes/demo --kg data/demo/kg.ttl --docs data/demo/reports \\
      --docs-format files --collection domain
  python cli.py index --config data/demo/index.toml          # the same, from its recipe (make index)
"""


DOCS_SEARCH = """Search the chunks of an index for TEXT.

\b
Example:
  python cli.py docs search --index data/indexes/demo --k 3 "who supplies Veridian Sugar Estates"
"""


LINK = """Link QUESTION to entities of the index's KG.

Topic entities marked in [brackets] (MetaQA) are resolved directly; otherwise mentions are
found by n-gram matching against labels and aliases, then by label-embedding similarity.

\b
Example:
  python cli.py link --index data/indexes/metaqa --json "what movies did [Temuera Morrison] act in"
"""


EMBED_SERVE = """Serve the embedding model as an OpenAI-compatible POST /v1/embeddings endpoint.

Requests wait their turn (one model call at a time, several requests' texts in it) instead of
being refused; a body over 16 MB gets 413, malformed JSON 400, another model name 404, and each
text is cut to the model's window (its max_seq_length tokens), as TEI's --auto-truncate does.

\b
Example:
  python cli.py embed serve --port 8090 --embed-backend onnx-int8 &
  python cli.py index --out /tmp/hp --docs hotpot.json --docs-format hotpot --embed-server http://127.0.0.1:8090/v1
"""


ASK = """Answer QUESTION with one method; print the answer and the reasoning paths.

QUESTION (and each --topic) is read as UTF-8 text: bytes that are not UTF-8, lone surrogates
and control characters are replaced with U+FFFD, with a warning on stderr (check the
terminal's encoding), and the repaired question is answered.

\b
Examples:
  python cli.py ask --index data/indexes/metaqa "what movies did [Temuera Morrison] act in"
  python cli.py ask --index data/indexes/metaqa --method tog-r --set depth=2 "who directed Heat"
  python cli.py ask --index data/indexes/metaqa --method io --json "who directed Heat"
  python cli.py ask --index data/indexes/demo --method rag --set abstain=true --trace "..."
"""


BATCH = """Answer every question of a file with each method; resumable at any moment.

Each record is appended and synced as soon as it exists, so a killed run (even kill -9)
continues where it stopped when the same command runs again: every question ends with
exactly one record per method. A failing question records its error and the batch goes on.

\b
Example:
  python cli.py batch --index data/indexes/metaqa --methods io,tog \\
      --questions ../shared/data/metaqa/questions/2-hop/qa_dev.txt --sample 200 --out data/runs/m2
  python cli.py eval data/runs/m2
  python cli.py batch ... --shard 2/4 --out data/runs/m2/shard-2   # one of 4 jobs anywhere
  python cli.py eval data/runs/m2                                   # the 4 shard folders as one run
  python cli.py batch ... --ray local --workers 2 --out data/runs/m2r
"""


EVAL = """Score batch runs: Hits@1, EM and F1 over answer sets and over tokens (HotpotQA), paper EM,
abstentions, LLM cost, path overlap, answer sources.

Reads RUN/<method>.jsonl and run.json, writes RUN/eval.json. One RUN: a Markdown table (or
JSON). Several: per metric one table of methods x runs, side by side (e.g. two models or two
settings). Missing, extra and duplicate records are reported.

A sharded run (`batch --shard K/N`) is one RUN: the folder holding its shard folders, or the
shard folders named one by one. Missing shards and questions are reported; folders of
different runs or a question recorded twice are refused.

\b
Examples:
  python cli.py eval data/runs/m2
  python cli.py eval data/runs/eval/metaqa-2-hop data/runs/eval-follow-back/metaqa-2-hop --metric hits1
  python cli.py eval data/runs/m2-sharded        # holds shard-1 ... shard-N
"""


REPORT = """Write one self-contained HTML report of batch runs: eval's metrics per dataset and method,
plots of accuracy against cost and by question group, HydraRAG's stage recall, and a question
browser (filters, every method's prediction, LLM calls, evidence graphs).

Each RUN is what `eval` takes (a run folder or a folder of shard folders); each is one dataset.

\b
Examples:
  python cli.py report data/runs/demo --out data/runs/demo/report.html
  python cli.py report data/runs/eval/metaqa-1-hop data/runs/eval/metaqa-2-hop --out eval.html
"""


SHOW = """Show one question of a run in the terminal: prediction against gold, the evidence paths
as a tree, the quoted chunks, and the LLM calls with tokens and seconds.

\b
Examples:
  python cli.py show data/runs/demo demo-001 --method hydra
"""


CHECK_SCORES = """Re-run every evaluation number the README quotes and compare: OK / FAIL / MISSING per row.

The numbers, the commands that make them and their tolerances are data, in
bench/expected_scores.json. Exit status 0 only when every selected row is OK.

\b
Examples:
  python cli.py check-scores --subset eval          # the README's evaluation table (make eval)
  python cli.py check-scores --subset ci            # the tiny-model demo subset CI runs
  python cli.py check-scores --subset eval --no-run # score existing runs only
"""
