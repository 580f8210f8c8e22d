#!/bin/bash
# Writes bench/results/CHAIN-RANK-REPEAT.md: the chains scorer's LLM-free ranking (bench.chain_rank) with the
# method's defaults before `repeat_mentions` and since (neighbouring words that each name a relation's whole
# label are a mention each), on MetaQA 1/2/3-hop and PQ-3H (samples of 50, seeds 0-3) and the demo. 34 runs
# of about 20 s on a 2-core machine, one at a time. (`unasked_spans`, the default since the same runs,
# changes what the answer call is offered, not the ranking.)
# Usage: bash bench/chain_rank_repeat_md.sh
# Also adds the counts to bench/results/chain_rank.json (scorers `unasked_last`, the defaults before, as
# bench/chain_rank_unasked_md.sh keeps them, and `repeat_mentions_default`), which docs/methods/chains.md's
# table reads.
set -e
cd "$(dirname "$0")/.."
out=bench/results/CHAIN-RANK-REPEAT.md
. bench/chain_rank_jobs.sh
D="$DEFAULTS --set unnamed_hops=1.0 --set kin_synonyms=true --set unasked_last=0.5"
each() {  # $1: the JSON part, then the questions' arguments
  local part=$1; shift
  run $part "$@" $D
  run $part "$@" $D --set repeat_mentions=true
}
samples
finish "chains: the LLM-free chain ranking before and since repeat_mentions, samples of 50" \
  "The method's defaults before \`repeat_mentions\` (\`$D\`), then with \`repeat_mentions=true\` (the default since). Seed 0 is the tables' sample; seeds 1-3 were used to check. \`bash bench/chain_rank_repeat_md.sh\` writes this file."
