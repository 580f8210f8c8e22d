#!/bin/bash
# Writes bench/results/CHAIN-RANK-OPTIONS.md: the chains scorer's LLM-free ranking (bench.chain_rank)
# with two options beside the default (meaning_cover=0.5): `unnamed_step=0.8` on MetaQA 1/2/3-hop
# and PQ-3H, and `inverse_steps=true` on PQ-3H (the only set whose question subgraphs hold a pair of
# inverse relations, parents/children; on MetaQA it changes nothing), on the samples of
# bench/chain_rank_meaning_md.sh (seeds 0-3). 20 runs of 1-3 min on a 2-core machine, two at a time.
# Usage: bash bench/chain_rank_options_md.sh
# Also adds the counts to bench/results/chain_rank.json (scorers `unnamed_step=0.8`,
# `inverse_steps=true`), which docs/methods/chains.md's table reads.
set -e
cd "$(dirname "$0")/.."
out=bench/results/CHAIN-RANK-OPTIONS.md
. bench/chain_rank_jobs.sh
{ for seed in 0 1 2 3; do echo "## unnamed_step=0.8, seed $seed"; echo
  for h in 1 2 3; do run $json.a --index data/indexes/metaqa --questions $S/metaqa/questions/$h-hop/qa_dev.txt --seed $seed --set unnamed_step=0.8; done
done; } > $out.a &
{ for seed in 0 1 2 3; do echo "## PQ-3H, seed $seed"; echo
  run $json.b --index data/indexes/pq3h --questions $S/pathquestion/PQ-3H.txt --seed $seed --set unnamed_step=0.8
  run $json.b --index data/indexes/pq3h --questions $S/pathquestion/PQ-3H.txt --seed $seed --set inverse_steps=true
done; } > $out.b &
wait
finish "chains: the LLM-free chain ranking with the options \`unnamed_step\` and \`inverse_steps\`, samples of 50" \
  "Beside the default (its counts, \`meaning_cover\`, are in CHAIN-RANK-MEANING.md). \`bash bench/chain_rank_options_md.sh\` writes this file."
