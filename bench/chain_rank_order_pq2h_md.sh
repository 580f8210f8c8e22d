#!/bin/bash
# Writes bench/results/CHAIN-RANK-ORDER-PQ2H.md: the chains scorer's LLM-free ranking (bench.chain_rank) on
# PathQuestion's two-hop set over its own graph (PQ-2H, 2H-kb.txt: no option was built or tuned on it), samples
# of 50, seeds 0-3, with the method's defaults before `mention_order` and `verb_mentions` ($CO) and with
# `mention_order=0.3` (as first offered, before it was the default). 8 runs of about 20 s on a 2-core
# machine, one at a time; builds the index data/indexes/pq2h if it is not there (`pq2h_index`).
# Usage: bash bench/chain_rank_order_pq2h_md.sh
# Also adds the counts to bench/results/chain_rank.json (set `pq-2h`, scorers `co_words` and `mention_order`),
# which docs/methods/chains.md's table reads.
set -e
cd "$(dirname "$0")/.."
out=bench/results/CHAIN-RANK-ORDER-PQ2H.md
. bench/chain_rank_jobs.sh
pq2h_index
D=$CO
for seed in 0 1 2 3; do
  run $json.a --index data/indexes/pq2h --questions $S/pathquestion/PQ-2H.txt --seed $seed $D
done > $out.a
for seed in 0 1 2 3; do
  run $json.b --index data/indexes/pq2h --questions $S/pathquestion/PQ-2H.txt --seed $seed $D --set mention_order=0.3
done > $out.b
finish "chains: the LLM-free chain ranking on PQ-2H, the defaults and mention_order=0.3, samples of 50" \
  "PathQuestion's two-hop questions over their own graph, which no option of the scorer was built or tuned on: the method's defaults (\`$D\`), then with \`--set mention_order=0.3\`. \`bash bench/chain_rank_order_pq2h_md.sh\` writes this file."
