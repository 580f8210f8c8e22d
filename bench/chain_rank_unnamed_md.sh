#!/bin/bash
# Writes bench/results/CHAIN-RANK-UNNAMED.md: the chains scorer's LLM-free ranking (bench.chain_rank)
# with the method's defaults, without and with `unnamed_hops=1.0`, on MetaQA 1/2/3-hop and PQ-3H
# (the samples of bench/chain_rank_meaning_md.sh, seeds 0-3) and the demo. 34 runs of 0.5-2 min
# on a 2-core machine, two at a time. Usage: bash bench/chain_rank_unnamed_md.sh
# Also adds the counts to bench/results/chain_rank.json (scorers `before_unnamed_hops`,
# `unnamed_hops`), which docs/methods/chains.md's table reads.
set -e
cd "$(dirname "$0")/.."
out=bench/results/CHAIN-RANK-UNNAMED.md
. bench/chain_rank_jobs.sh
D="$DEFAULTS"
both() {  # $1: the JSON part, then the questions' arguments
  local part=$1; shift
  run $part "$@" $D --set unnamed_hops=0
  run $part "$@" $D --set unnamed_hops=1.0
}
{ for seed in 0 1 2 3; do echo "## MetaQA, seed $seed"; echo
  for h in 1 2 3; do both $json.a --index data/indexes/metaqa --questions $S/metaqa/questions/$h-hop/qa_dev.txt --seed $seed; done
done; } > $out.a &
{ for seed in 0 1 2 3; do echo "## PQ-3H, seed $seed"; echo
  both $json.b --index data/indexes/pq3h --questions $S/pathquestion/PQ-3H.txt --seed $seed
done
echo "## The demo (54 questions)"; echo
both $json.b --index data/indexes/demo --questions data/demo/questions.jsonl --sample 100; } > $out.b &
wait
finish "chains: the LLM-free chain ranking without and with \`unnamed_hops\`, samples of 50" \
  "The method's defaults (\`$D\`), \`unnamed_hops=0\` (the default before it) beside \`unnamed_hops=1.0\` (the default since). Seed 0 is the tables' sample; seeds 1-3 were used to check, not to choose. \`bash bench/chain_rank_unnamed_md.sh\` writes this file."
