#!/bin/bash
# Writes bench/results/CHAINS-TARGETS.md: where the `chains` default (qwen2.5-coder-0.5b) loses the answers of
# the targets of docs/methods/chains.md it misses, stage by stage (bench.trace_stats, no LLM call): MetaQA 1-hop
# by question type (MetaQA's qa_dev_qtype.txt; the two tag types pooled against the rest, then each type) on
# the tables' sample (seed 0) and two more (seeds 1, 2), MetaQA 2-hop on a fresh sample (seed 5), and the demo
# by `needs`. Also writes bench/results/chains_targets.json, the same counts, which docs/methods/chains.md's
# tables read.
# Needs the runs (their commands are the rows chains-td-*-metaqa-1-hop-hits1 and chains-td-demo-hits1 of
# bench/expected_scores.json): data/runs/chains-td/{metaqa-1-hop,demo}, data/runs/chains-td-seed{1,2}/metaqa-1-hop,
# data/runs/chains-td-seed5/metaqa-2-hop.
# Usage: bash bench/chains_targets_md.sh
set -e
cd "$(dirname "$0")/.."
out=bench/results/CHAINS-TARGETS.md
json=bench/results/chains_targets.json
rm -f $json.tmp
run() {  # the records, then trace_stats' other arguments
  echo "\$ python -m bench.trace_stats $*"; echo '```'
  .venv/bin/python -m bench.trace_stats "$@" 2>/dev/null; echo '```'
}
Q=../shared/data/metaqa/questions/1-hop/qa_dev.txt
TAGS="tags=movie_to_tags,tag_to_movie"
{
echo "# chains: where the two missed targets are lost (qwen2.5-coder-0.5b, the default)"
echo
echo '`bash bench/chains_targets_md.sh` writes this file and bench/results/chains_targets.json.'
echo
echo "## MetaQA 1-hop dev: its question types"
echo
echo "\$ sort ${Q%.txt}_qtype.txt | uniq -c | sort -rn"; echo '```'
sort ${Q%.txt}_qtype.txt | uniq -c | sort -rn; echo '```'
echo
for run in chains-td chains-td-seed1 chains-td-seed2; do
  echo "## MetaQA 1-hop, $run"
  echo
  run data/runs/$run/metaqa-1-hop/chains.jsonl --questions $Q --by qtype --pool $TAGS --json $json.tmp --key "$run/metaqa-1-hop-tags"
  echo
  run data/runs/$run/metaqa-1-hop/chains.jsonl --questions $Q --by qtype --json $json.tmp --key "$run/metaqa-1-hop-qtype"
  echo
done
echo "## MetaQA 2-hop, a fresh sample (chains-td-seed5)"
echo
run data/runs/chains-td-seed5/metaqa-2-hop/chains.jsonl --json $json.tmp --key chains-td-seed5/metaqa-2-hop
echo
echo "## The demo, chains-td"
echo
run data/runs/chains-td/demo/chains.jsonl --questions data/demo/questions.jsonl --by needs --json $json.tmp --key chains-td/demo
} > $out.tmp
mv $out.tmp $out
mv $json.tmp $json
