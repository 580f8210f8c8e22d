#!/bin/bash
# Writes bench/results/CHAIN-RANK-INVERSE.md: the chains scorer's LLM-free ranking (bench.chain_rank) with the
# method's defaults since `inverse_scope=graph` (inverse relations, `parents` and `children`, found over the
# whole graph instead of each question's subgraph) joined them, on MetaQA 1/2/3-hop and PQ-3H (samples of 50,
# seeds 0-3), the demo and PQ-2H (seeds 0-3). 21 runs of about 20 s on a 2-core machine, one at a time. The
# defaults before it are bench/chain_rank_frame_md.sh's runs.
# Usage: bash bench/chain_rank_inverse_md.sh
# Also adds the counts to bench/results/chain_rank.json (scorer `inverse_scope`), which docs/methods/chains.md's
# table reads.
set -e
cd "$(dirname "$0")/.."
out=bench/results/CHAIN-RANK-INVERSE.md
. bench/chain_rank_jobs.sh
defaults_page "$NOW" "chains: the LLM-free chain ranking with the defaults since inverse_scope=graph, samples of 50" \
  "The method's defaults (\`$NOW\`; those before \`inverse_scope=graph\` are in CHAIN-RANK-FRAME.md). Seed 0 is the tables' sample; seeds 1-3 were used to check. \`bash bench/chain_rank_inverse_md.sh\` writes this file."
