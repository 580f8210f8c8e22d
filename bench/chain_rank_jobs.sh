# Sourced by the chain-rank result scripts (bench/chain_rank_{meaning,options,unnamed,offered,kin,unasked,repeat,co,order,order_pq2h,verb,frame,inverse}_md.sh): each runs
# jobs of bench.chain_rank, writing $out.a / $out.b and their counts to $json.a / $json.b (cleared when
# sourced). Needs $out (the results page) set; sets $S (the shared data), $json (bench/results/chain_rank.json),
# $DEFAULTS, $CO, $VERB, $FRAME and $NOW, and the functions pq2h_index and defaults_page.
S=../shared/data
json=bench/results/chain_rank.json
# the method's defaults since `inverse_steps` (bench.chain_rank pins them off unless set); the scripts add the later ones
DEFAULTS="--set doc_steps=20 --set kind_nouns=true --set converse_nouns=true --set step_direction=0.3 --set kin_terms=true --set same_twice=true --set kind_once=true --set inverse_steps=true"
# the method's defaults from `co_words` to `mention_order` (the mention_order scripts start here)
CO="$DEFAULTS --set unnamed_hops=1.0 --set kin_synonyms=true --set unasked_last=0.5 --set repeat_mentions=true --set co_words=true"
# the method's defaults since `mention_order` and `verb_mentions`
VERB="$CO --set mention_order=0.3 --set verb_mentions=true"
# the method's defaults since `frame_words`
FRAME="$VERB --set frame_words=true"
# the method's defaults now (those since `inverse_scope=graph`)
NOW="$FRAME --set inverse_scope=graph"
rm -f "$out.a" "$out.b" "$json.a" "$json.b"  # what a stopped run left

pq2h_index() {  # PathQuestion's two-hop graph as an index (data/indexes/pq2h), unless it is there
  [ -f data/indexes/pq2h/manifest.json ] || .venv/bin/python cli.py index --out data/indexes/pq2h \
    --kg $S/pathquestion/2H-kb.txt --kg-format tsv --kg-as-docs
}

run() {  # $1: the JSON file this job writes; then bench.chain_rank's arguments
  local part=$1; shift
  echo "\$ python -m bench.chain_rank $*"; echo '```'
  HF_HUB_OFFLINE=1 .venv/bin/python -m bench.chain_rank "$@" --json "$part" 2>/dev/null; echo '```'; echo
}

finish() {  # $1: the page's title, $2: its introduction; after `wait`
  { echo "# $1"; echo; echo "$2"; echo; cat "$out.a" "$out.b"; } > "$out.tmp"
  mv "$out.tmp" "$out"
  HF_HUB_OFFLINE=1 .venv/bin/python -m bench.chain_rank --merge "$json" "$json.a" "$json.b"
  rm -f "$out.a" "$out.b"
}

samples() {  # the script's `each` (its JSON part, then the questions' arguments) over MetaQA 1/2/3-hop and
  # PQ-3H (samples of 50, seeds 0-3) and the demo, one job at a time, into $out.a / $out.b
  { for seed in 0 1 2 3; do echo "## MetaQA, seed $seed"; echo
    for h in 1 2 3; do each $json.a --index data/indexes/metaqa --questions $S/metaqa/questions/$h-hop/qa_dev.txt --seed $seed; done
  done; } > $out.a
  { for seed in 0 1 2 3; do echo "## PQ-3H, seed $seed"; echo
    each $json.b --index data/indexes/pq3h --questions $S/pathquestion/PQ-3H.txt --seed $seed
  done
  echo "## The demo (54 questions)"; echo
  each $json.b --index data/indexes/demo --questions data/demo/questions.jsonl --sample 100; } > $out.b
}

defaults_page() {  # $1: the settings; $2: the page's title, $3: its introduction. The defaults on every set:
  # MetaQA 1/2/3-hop, PQ-3H and the demo (`samples`), then PQ-2H (seeds 0-3), into $out
  D=$1
  each() {  # $1: the JSON part, then the questions' arguments
    local part=$1; shift
    run $part "$@" $D
  }
  samples
  pq2h_index
  { for seed in 0 1 2 3; do echo "## PQ-2H, seed $seed"; echo
    each $json.b --index data/indexes/pq2h --questions $S/pathquestion/PQ-2H.txt --seed $seed
  done; } >> $out.b
  finish "$2" "$3"
}
