#!/bin/bash
# Writes bench/results/CHAIN-RANK-VERB.md: the chains scorer's LLM-free ranking (bench.chain_rank) with the
# method's defaults since `mention_order` (0.3) and `verb_mentions` (a word right before an article and a
# relation mention is the mention's verb: "complete a bulk transaction with") joined them, on MetaQA 1/2/3-hop
# and PQ-3H (samples of 50, seeds 0-3), the demo and PQ-2H (seeds 0-3, a graph no option was tuned on). 21 runs
# of about 20 s on a 2-core machine, one at a time. The defaults before them are bench/chain_rank_co_md.sh's
# runs (PQ-2H: bench/chain_rank_order_pq2h_md.sh's); `mention_order` alone is bench/chain_rank_order_md.sh's.
# Usage: bash bench/chain_rank_verb_md.sh
# Also adds the counts to bench/results/chain_rank.json (scorer `verb_mentions`), which docs/methods/chains.md's
# table reads.
set -e
cd "$(dirname "$0")/.."
out=bench/results/CHAIN-RANK-VERB.md
. bench/chain_rank_jobs.sh
defaults_page "$VERB" "chains: the LLM-free chain ranking with the defaults since mention_order and verb_mentions, samples of 50" \
  "The method's defaults (\`$VERB\`; those before \`mention_order\` and \`verb_mentions\` are in CHAIN-RANK-CO.md and, for PQ-2H, CHAIN-RANK-ORDER-PQ2H.md). Seed 0 is the tables' sample; seeds 1-3 were used to check. \`bash bench/chain_rank_verb_md.sh\` writes this file."
