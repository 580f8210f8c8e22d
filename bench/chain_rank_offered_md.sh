#!/bin/bash
# Writes bench/results/CHAIN-RANK-OFFERED.md: the chains scorer's LLM-free ranking (bench.chain_rank)
# with the method's defaults, alone and with each of three options that are offered, not on by
# default (`repeat_mentions`, `reverse_words`, `doc_words=1.0`), on MetaQA 1/2/3-hop and PQ-3H
# (samples of 50, seeds 0-3) and the demo. 68 runs of about 20 s on a 2-core machine, one at a
# time (two at once contend for the cores). Usage: bash bench/chain_rank_offered_md.sh
# Also adds the counts to bench/results/chain_rank.json (scorers `unnamed_hops`, the defaults, as
# bench/chain_rank_unnamed_md.sh keeps them; `repeat_mentions`, `reverse_words`, `doc_words`), which
# docs/methods/chains.md's table reads.
set -e
cd "$(dirname "$0")/.."
out=bench/results/CHAIN-RANK-OFFERED.md
. bench/chain_rank_jobs.sh
D="$DEFAULTS --set unnamed_hops=1.0"
each() {  # $1: the JSON part, then the questions' arguments
  local part=$1; shift
  run $part "$@" $D
  run $part "$@" $D --set repeat_mentions=true
  run $part "$@" $D --set reverse_words=true
  run $part "$@" $D --set doc_words=1.0
}
samples
finish "chains: the LLM-free chain ranking with the options offered beside the defaults, samples of 50" \
  "The method's defaults (\`$D\`) alone, then with \`repeat_mentions=true\`, \`reverse_words=true\` or \`doc_words=1.0\` (each off by default). Seed 0 is the tables' sample; seeds 1-3 were used to check. \`bash bench/chain_rank_offered_md.sh\` writes this file."
