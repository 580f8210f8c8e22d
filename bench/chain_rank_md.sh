#!/bin/bash
# Regenerates bench/results/CHAIN-RANK.md: the chains scorer's LLM-free ranking (bench.chain_rank)
# with its terms added one at a time, on three samples of 50 dev questions per set and on the demo.
# About 30 s a run on a quiet 2-core machine; 52 runs.  Usage: bash bench/chain_rank_md.sh
set -e
cd "$(dirname "$0")/.."
S=../shared/data
out=bench/results/CHAIN-RANK.md
V0="--set asked_type=0 --set word_overlap=0 --set relation_cover=0 --set relation_order=0"
V1="--set relation_cover=0 --set relation_order=0"
V2="--set relation_order=0"
run() { echo "\$ python -m bench.chain_rank $*"; echo '```'; HF_HUB_OFFLINE=1 .venv/bin/python -m bench.chain_rank "$@" 2>/dev/null; echo '```'; echo; }
{
echo "# chains: the LLM-free chain ranking alone (no LLM call), MetaQA dev and PQ-3H, three samples of 50"
echo
echo "Four scorers: without the \`asked_type\`, \`word_overlap\`, \`relation_cover\` and \`relation_order\` terms (\`$V0\`); with the first two (\`$V1\`); with the first three (\`$V2\`); the defaults (all four). Seed 0 is the sample the weights were chosen on, seed 1 the one they were checked on, seed 2 a fresh one. \`bash bench/chain_rank_md.sh\` writes this file."
echo
for seed in 0 1 2; do
  echo "## Seed $seed"
  echo
  for h in 1 2 3; do for v in "$V0" "$V1" "$V2" ""; do run --index data/indexes/metaqa --questions $S/metaqa/questions/$h-hop/qa_dev.txt --seed $seed $v; done; done
  for v in "$V0" "$V1" "$V2" ""; do run --index data/indexes/pq3h --questions $S/pathquestion/PQ-3H.txt --seed $seed $v; done
done
echo "## The demo (54 questions)"
echo
for v in "$V0" "$V1" "$V2" ""; do run --index data/indexes/demo --questions data/demo/questions.jsonl --sample 100 $v; done
} > $out.tmp
mv $out.tmp $out
