"""Where the seconds of an LLM call go: the model's own work and everything around it.

A `CallTimings` rides on each `CallRecord` of `llm.recording()` (not in a record's
`llm_calls` cost lines); the llama.cpp backend fills it, other backends leave it empty.
`bench/bench_llm_profile.py` adds them up per method.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

# the parts of a call's seconds, in the order a profile lists them
PARTS = ("prompt_eval", "generation", "sampling", "grammar_build", "prompt_build", "tokenize",
         "kv_state", "detokenize")


@dataclass
class CallTimings:
    """Seconds (and counts) of one chat() call; attempts of a retried call add up."""

    prompt_eval: float = 0.0  # llama_decode of prompt tokens (a prefix on first use included)
    generation: float = 0.0  # llama_decode of the generated tokens
    sampling: float = 0.0  # choosing each token, the grammar constraint included
    grammar_build: float = 0.0  # schema -> GBNF -> llama.cpp grammar (cached by schema)
    prompt_build: float = 0.0  # the chat template
    tokenize: float = 0.0
    kv_state: float = 0.0  # saving / restoring the KV state of a prompt's fixed prefix
    detokenize: float = 0.0
    prompt_eval_tokens: int = 0
    generated_tokens: int = 0  # decoded (the last token sampled is not)
    sampled_tokens: int = 0
    full_grammar_scans: int = 0  # sampling steps that checked the whole vocabulary
    threads: int = 0

    def add(self, other: CallTimings) -> None:
        for f in fields(self):
            if f.name == "threads":
                self.threads = other.threads or self.threads
            else:
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def parts_seconds(self) -> float:
        return sum(getattr(self, p) for p in PARTS)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
