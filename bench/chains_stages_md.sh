#!/bin/bash
# Regenerates bench/results/CHAINS-STAGES.md: where the `chains` runs of docs/methods/chains.md
# lose the gold answer, stage by stage (bench.trace_stats on their records in data/runs/, no LLM
# call), and bench/results/chains_stages.json, the same counts (`bench.trace_stats --json`) that
# the docs' stage table reads. Needs the runs the docs name (data/runs/chains-count/... ).
# Usage: bash bench/chains_stages_md.sh
set -e
cd "$(dirname "$0")/.."
out=bench/results/CHAINS-STAGES.md
json=bench/results/chains_stages.json
rm -f $json.tmp
run() {  # $1 the records, then trace_stats' other arguments; NOTE=... adds a comment to the command
  echo "\$ python -m bench.trace_stats $*${NOTE:+   # $NOTE}"; echo '```'
  .venv/bin/python -m bench.trace_stats "$@" --json $json.tmp 2>/dev/null; echo '```'
}
sets() {  # $1 the runs' folder under data/runs
  for s in metaqa-1-hop metaqa-2-hop metaqa-3-hop pq-3h hotpot; do run data/runs/$1/$s/chains.jsonl; echo; done
  run data/runs/$1/demo/chains.jsonl --questions data/demo/questions.jsonl --by needs
}
{
echo "# chains: stage recall of the docs' runs (qwen2.5-coder-0.5b, 50 dev questions, seed 0; demo: 54)"
echo
echo '## The default: `relation_cover` with `cover_counts`, `relation_order`, `choose=top` (data/runs/chains-count)'
echo
sets chains-count; echo
NOTE="MetaQA 2-hop, half KB + text" run data/runs/chains-count-ikg/half/chains.jsonl; echo
echo '## Before `relation_order` and `cover_counts`: `relation_cover`, `choose=top` (data/runs/chains-top)'
echo
sets chains-top; echo
echo '## The previous default: the choice call (`choose=llm`), no `relation_cover` (data/runs/chains)'
sets chains; echo
echo '## qwen2.5-coder-1.5b'
echo
run data/runs/chains-1.5b/pq-3h/chains.jsonl; echo
echo '## choose=answer (qwen2.5-coder-0.5b)'
echo
run data/runs/chains-answer/metaqa-1-hop/chains.jsonl
} > $out.tmp
mv $out.tmp $out
mv $json.tmp $json
