#!/bin/bash
# Writes bench/results/CHAIN-RANK-FRAME.md: the chains scorer's LLM-free ranking (bench.chain_rank) with the
# method's defaults since `frame_words` (the words that frame a question, "can you name ..." and the noun
# between an article and the topic, "the movie X", are no words it leaves unplaced) joined them, on MetaQA
# 1/2/3-hop and PQ-3H (samples of 50, seeds 0-3), the demo and PQ-2H (seeds 0-3, a graph no option was tuned
# on). 21 runs of about 20 s on a 2-core machine, one at a time. The defaults before it are
# bench/chain_rank_verb_md.sh's runs.
# Usage: bash bench/chain_rank_frame_md.sh
# Also adds the counts to bench/results/chain_rank.json (scorer `frame_words`), which docs/methods/chains.md's
# table reads.
set -e
cd "$(dirname "$0")/.."
out=bench/results/CHAIN-RANK-FRAME.md
. bench/chain_rank_jobs.sh
defaults_page "$FRAME" "chains: the LLM-free chain ranking with the defaults since frame_words, samples of 50" \
  "The method's defaults (\`$FRAME\`; those before \`frame_words\` are in CHAIN-RANK-VERB.md). Seed 0 is the tables' sample; seeds 1-3 were used to check. \`bash bench/chain_rank_frame_md.sh\` writes this file."
