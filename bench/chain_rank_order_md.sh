#!/bin/bash
# Writes bench/results/CHAIN-RANK-ORDER.md: the chains scorer's LLM-free ranking (bench.chain_rank) with the
# method's defaults before `mention_order` and `verb_mentions` ($CO) and `mention_order=0.3` (as first
# offered, before it was the default: the question's relation mentions, in the order English nests them
# from the entity out, answered by the route's steps in that order), on MetaQA
# 1/2/3-hop and PQ-3H (samples of 50, seeds 0-3) and the demo. 17 runs of about 20 s on a 2-core machine, one
# at a time. The defaults alone are bench/chain_rank_co_md.sh's runs.
# Usage: bash bench/chain_rank_order_md.sh
# Also adds the counts to bench/results/chain_rank.json (scorer `mention_order`; the defaults alone are its
# `co_words`), which docs/methods/chains.md's table reads.
set -e
cd "$(dirname "$0")/.."
out=bench/results/CHAIN-RANK-ORDER.md
. bench/chain_rank_jobs.sh
D=$CO
each() {  # $1: the JSON part, then the questions' arguments
  local part=$1; shift
  run $part "$@" $D --set mention_order=0.3
}
samples
finish "chains: the LLM-free chain ranking with mention_order=0.3, samples of 50" \
  "The method's defaults with \`mention_order=0.3\` (\`$D --set mention_order=0.3\`; the defaults alone are in CHAIN-RANK-CO.md). Seed 0 is the tables' sample; seeds 1-3 were used to check. \`bash bench/chain_rank_order_md.sh\` writes this file."
