#!/bin/bash
# Writes bench/results/CHAIN-RANK-UNASKED.md: the chains scorer's LLM-free ranking (bench.chain_rank) with the
# method's defaults before `unasked_last` and since (0.5: a route whose last step no question word names
# costs, where every word is accounted for), and with the weight 1.0, on MetaQA 1/2/3-hop and PQ-3H
# (samples of 50, seeds 0-3) and the demo. 51 runs of about 20 s on a 2-core machine, one at a time.
# Usage: bash bench/chain_rank_unasked_md.sh
# Also adds the counts to bench/results/chain_rank.json (scorers `kin_synonyms`, the defaults before, as
# bench/chain_rank_kin_md.sh keeps them, `unasked_last` and `unasked_last_1`), which
# docs/methods/chains.md's table reads.
set -e
cd "$(dirname "$0")/.."
out=bench/results/CHAIN-RANK-UNASKED.md
. bench/chain_rank_jobs.sh
D="$DEFAULTS --set unnamed_hops=1.0 --set kin_synonyms=true"
each() {  # $1: the JSON part, then the questions' arguments
  local part=$1; shift
  run $part "$@" $D
  run $part "$@" $D --set unasked_last=0.5
  run $part "$@" $D --set unasked_last=1.0
}
samples
finish "chains: the LLM-free chain ranking before and since unasked_last, samples of 50" \
  "The method's defaults before \`unasked_last\` (\`$D\`), then with \`unasked_last=0.5\` (the default since) and \`unasked_last=1.0\`. Seed 0 is the tables' sample; seeds 1-3 were used to check. \`bash bench/chain_rank_unasked_md.sh\` writes this file."
