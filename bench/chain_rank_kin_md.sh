#!/bin/bash
# Writes bench/results/CHAIN-RANK-KIN.md: the chains scorer's LLM-free ranking (bench.chain_rank) with the
# method's defaults before `kin_synonyms` and since (a general kin noun's thesaurus synonyms name its
# relation: "heir" names `children`), on MetaQA 1/2/3-hop and PQ-3H (samples of 50, seeds 0-3) and the
# demo. 34 runs of about 20 s on a 2-core machine, one at a time. Usage: bash bench/chain_rank_kin_md.sh
# Also adds the counts to bench/results/chain_rank.json (scorers `unnamed_hops`, the defaults before, as
# bench/chain_rank_unnamed_md.sh keeps them, and `kin_synonyms`), which docs/methods/chains.md's table reads.
set -e
cd "$(dirname "$0")/.."
out=bench/results/CHAIN-RANK-KIN.md
. bench/chain_rank_jobs.sh
D="$DEFAULTS --set unnamed_hops=1.0"
each() {  # $1: the JSON part, then the questions' arguments
  local part=$1; shift
  run $part "$@" $D
  run $part "$@" $D --set kin_synonyms=true
}
samples
finish "chains: the LLM-free chain ranking before and since kin_synonyms, samples of 50" \
  "The method's defaults before \`kin_synonyms\` (\`$D\`), then with \`kin_synonyms=true\` (the default since). Seed 0 is the tables' sample; seeds 1-3 were used to check. \`bash bench/chain_rank_kin_md.sh\` writes this file."
