#!/bin/bash
# Writes bench/results/CHAIN-RANK-CO.md: the chains scorer's LLM-free ranking (bench.chain_rank) with the
# method's defaults since `co_words` (a relation word prefixed "co-" or said before "together" asks for its
# relation there and back), on MetaQA 1/2/3-hop and PQ-3H (samples of 50, seeds 0-3) and the demo. 17 runs
# of about 20 s on a 2-core machine, one at a time. The defaults before it are bench/chain_rank_repeat_md.sh's
# `repeat_mentions=true` runs.
# Usage: bash bench/chain_rank_co_md.sh
# Also adds the counts to bench/results/chain_rank.json (scorer `co_words`; the defaults before are its
# `repeat_mentions_default`), which docs/methods/chains.md's table reads.
set -e
cd "$(dirname "$0")/.."
out=bench/results/CHAIN-RANK-CO.md
. bench/chain_rank_jobs.sh
D="$DEFAULTS --set unnamed_hops=1.0 --set kin_synonyms=true --set unasked_last=0.5 --set repeat_mentions=true"
each() {  # $1: the JSON part, then the questions' arguments
  local part=$1; shift
  run $part "$@" $D --set co_words=true
}
samples
finish "chains: the LLM-free chain ranking since co_words, samples of 50" \
  "The method's defaults since \`co_words\` (\`$D --set co_words=true\`; the defaults before it are in CHAIN-RANK-REPEAT.md, with \`repeat_mentions=true\`). Seed 0 is the tables' sample; seeds 1-3 were used to check. \`bash bench/chain_rank_co_md.sh\` writes this file."
