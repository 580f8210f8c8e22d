#!/bin/bash
# Regenerates bench/results/CHAIN-RANK.md: the chains scorer's LLM-free ranking (bench.chain_rank)
# with its terms added one at a time, on samples of 50 dev questions per set and on the demo.
# 44 runs of about 30 s on a quiet 2-core machine.  Usage: bash bench/chain_rank_md.sh
# Also writes bench/results/chain_rank.json, the same counts (`bench.chain_rank --json`), which
# docs/methods/chains.md's table reads.
set -e
cd "$(dirname "$0")/.."
S=../shared/data
out=bench/results/CHAIN-RANK.md
json=bench/results/chain_rank.json
rm -f $json.tmp
V0="--set asked_type=0 --set word_overlap=0 --set relation_cover=0 --set relation_order=0 --set meaning_cover=0"
V1="--set relation_cover=0 --set relation_order=0 --set meaning_cover=0"
V2="--set relation_order=0 --set cover_counts=false --set meaning_cover=0"
V3="--set meaning_cover=0"  # the default before meaning_cover (bench/chain_rank_meaning_md.sh has it)
run() { echo "\$ python -m bench.chain_rank $*"; echo '```'; HF_HUB_OFFLINE=1 .venv/bin/python -m bench.chain_rank "$@" --json $json.tmp 2>/dev/null; echo '```'; echo; }
sets() {  # $1 seed, then the scorers
  local seed=$1; shift
  for h in 1 2 3; do for v in "$@"; do run --index data/indexes/metaqa --questions $S/metaqa/questions/$h-hop/qa_dev.txt --seed $seed $v; done; done
  for v in "$@"; do run --index data/indexes/pq3h --questions $S/pathquestion/PQ-3H.txt --seed $seed $v; done
}
{
echo "# chains: the LLM-free chain ranking alone (no LLM call), MetaQA dev and PQ-3H, samples of 50"
echo
echo "Four scorers: without the \`asked_type\`, \`word_overlap\`, \`relation_cover\` and \`relation_order\` terms (\`$V0\`); with \`asked_type\` and \`word_overlap\` (\`$V1\`); with \`relation_cover\` too, counting each relation word once (\`$V2\`: the default before \`relation_order\` and \`cover_counts\`); the default before \`meaning_cover\` (\`$V3\`). Seed 0 is the sample the weights were chosen on; seed 1 the one \`asked_type\`, \`word_overlap\` and \`relation_cover\` were checked on; seed 2 a fresh one on which \`relation_order\` and \`cover_counts\` were checked. \`bash bench/chain_rank_md.sh\` writes this file."
echo
for seed in 0 1; do echo "## Seed $seed"; echo; sets $seed "$V0" "$V1" "$V2" "$V3"; done
echo "## Seed 2"; echo; sets 2 "$V2" "$V3"
echo "## The demo (54 questions)"
echo
for v in "$V0" "$V1" "$V2" "$V3"; do run --index data/indexes/demo --questions data/demo/questions.jsonl --sample 100 $v; done
} > $out.tmp
mv $out.tmp $out
mv $json.tmp $json
