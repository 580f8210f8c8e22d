#!/bin/bash
# Writes bench/results/CHAIN-RANK-MEANING.md: the chains scorer's LLM-free ranking (bench.chain_rank)
# with `meaning_cover=0.5` (the default) beside the default before it (`meaning_cover=0`), on the samples of
# bench/chain_rank_md.sh (seeds 0, 1, 2) and on a fourth one (seed 3, drawn after the option was
# settled). 20 runs of 1-2 min on a 2-core machine, two at a time.
# Usage: bash bench/chain_rank_meaning_md.sh
# Also adds the counts to bench/results/chain_rank.json (scorer `meaning_cover`; seed 3: `default`,
# the one before, too), which docs/methods/chains.md's table reads.
set -e
cd "$(dirname "$0")/.."
out=bench/results/CHAIN-RANK-MEANING.md
M="--set meaning_cover=0.5"
D="--set meaning_cover=0"  # the default before meaning_cover
. bench/chain_rank_jobs.sh
sets() {  # $1 the job's JSON file, $2 seed, then the scorers
  local part=$1 seed=$2; shift 2
  for h in 1 2 3; do for v in "$@"; do run "$part" --index data/indexes/metaqa --questions $S/metaqa/questions/$h-hop/qa_dev.txt --seed $seed $v; done; done
  for v in "$@"; do run "$part" --index data/indexes/pq3h --questions $S/pathquestion/PQ-3H.txt --seed $seed $v; done
}
{ for seed in 0 1 2; do echo "## Seed $seed"; echo; sets $json.a $seed "$M"; done; } > $out.a &
{ echo "## Seed 3 (fresh)"; echo; sets $json.b 3 "$D" "$M"; } > $out.b &
wait
finish "chains: the LLM-free chain ranking with \`meaning_cover\`, MetaQA dev and PQ-3H, samples of 50" \
  "\`$M\` beside the default before it, \`$D\` (its counts for seeds 0-2 are in CHAIN-RANK.md). Seeds 0 and 1: the samples the weight (0.5 of 0.5 and 1.0) was chosen on and the class-noun and one-mention rules were read from; seed 2: the first check (a \`meaning_margin\` variant, not kept, was tried on it after); seed 3: a fresh sample. \`bash bench/chain_rank_meaning_md.sh\` writes this file."
