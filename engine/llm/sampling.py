"""Token sampling under a grammar, with the replies of llama-cpp-python's sampler chain and a
small part of its cost.

llama-cpp-python samples every token with one llama.cpp chain: penalties (off at our
settings), the grammar, then greedy, or top-k 40, typical (off), top-p, min-p, temperature and
a seeded draw. The grammar step checks every token of the vocabulary against the grammar:
about 12 ms a token for Qwen's 151,936 tokens, as long as a 0.5B model takes to compute one.
`GrammarSampler` gets the same token by checking only the tokens that can matter, best first,
in tiers by logit (the best token and its ties, then those within 10 and 20 of it, then all):
every token outside the tiers checked so far scores below all of them, so

- greedy: the best accepted token of the first tier with one is the best accepted token.
- sampling: top-k takes the 40 best accepted tokens; once 40 are found, nothing else counts.
  With fewer, the missing ones (below the tiers' floor) could only weigh in top-p's sum:
  `_top_p_settled` checks that top-p and min-p keep the same tokens whatever they weigh, else
  the scan goes on down from the best accepted token (10, 14, then 18 logits below it). A
  token 18 below has a probability under e^-18 of the best one's: added last to a sum of at
  least 1 in float32, it leaves the sum, top-p's cut and everything after it as they were.
- no accepted token in the tiers: all tokens, as the chain does (`full_scans` counts these).

The rest of the chain is llama-cpp-python's own (`Llama._init_sampler` without the grammar),
applied to the accepted tokens in token-id order, as the chain sees them. Equal logits are the
only case where the two could part: top-k's partial sort may order ties differently.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

# llama-cpp-python's create_completion defaults, which LlamaCppLLM uses
TOP_K, TOP_P, MIN_P = 40, 0.95, 0.05
TIERS = (10.0, 20.0)  # logits below the best token, checked tier by tier before all tokens
NEAR = (10.0, 14.0)  # then below the best accepted token, while top-p's cut is not settled
GAP = 18.0
MARGIN = 1e-5  # float32 rounding of llama.cpp's top-p sums, with room to spare

_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])


class GrammarSampler:
    """One call's sampler: `grammar` (a llama.cpp grammar sampler this object owns and frees)
    plus llama-cpp-python's chain for `temperature` (seeded with the Llama's seed)."""

    def __init__(self, llama: Any, grammar: Any | None, *, temperature: float) -> None:
        import llama_cpp

        self._lib = llama_cpp
        self._llama = llama
        self._ctx = llama._ctx
        self._n_vocab = llama.n_vocab()
        self._grammar = grammar
        self._greedy = temperature == 0.0
        # exactly the chain create_completion builds, less the grammar
        self._chain = llama._init_sampler(top_k=TOP_K, top_p=TOP_P, min_p=MIN_P, typical_p=1.0,
                                          temp=temperature, repeat_penalty=1.0,
                                          frequency_penalty=0.0, presence_penalty=0.0)
        self.full_scans = 0

    def close(self) -> None:
        if self._grammar is not None:
            self._lib.llama_sampler_free(self._grammar)
            self._grammar = None
        self._chain.close()

    def sample(self) -> int:
        """The next token from the last evaluated position's logits (and accept it)."""
        if self._grammar is None:
            return int(self._chain.sample(self._ctx, -1))
        ptr = self._lib.llama_get_logits_ith(self._llama.ctx, -1)
        logits = np.ctypeslib.as_array(ptr, shape=(self._n_vocab,))
        ids = self._candidates(logits)
        token = self._choose(ids, logits)
        self._lib.llama_sampler_accept(self._chain.sampler, token)
        self._lib.llama_sampler_accept(self._grammar, token)
        return token

    # -- internals ---------------------------------------------------------------------------
    def _candidates(self, logits: np.ndarray) -> np.ndarray:
        """The accepted token ids (ascending) that decide the choice (see the module docstring)."""
        top = float(logits.max())
        if self._greedy:
            accepted = self._accepted(np.flatnonzero(logits >= top), logits)
            if accepted.size:
                return accepted
        floor = np.inf
        for distance in TIERS:
            tier = np.flatnonzero((logits >= top - distance) & (logits < floor))
            floor = top - distance
            accepted = self._accepted(tier, logits)
            if accepted.size:
                break
        else:
            self.full_scans += 1
            return self._accepted(np.flatnonzero(logits < floor), logits)
        if self._greedy:
            return accepted
        # every token not checked yet scores below `floor`: look further down from the best
        # accepted token until the choice is settled (at GAP it is, see the module docstring)
        best = float(logits[accepted].max())
        for distance in (*NEAR, GAP):
            if accepted.size >= TOP_K or _top_p_settled(logits[accepted], floor):
                break
            if best - distance < floor:
                near = np.flatnonzero((logits >= best - distance) & (logits < floor))
                accepted = np.sort(np.concatenate([accepted, self._accepted(near, logits)]))
                floor = best - distance
        return accepted

    def _accepted(self, ids: np.ndarray, logits: np.ndarray) -> np.ndarray:
        if not ids.size:
            return ids
        buf = self._buffer(ids, logits)
        self._run(self._grammar, buf)  # only sets logits, in place
        return ids[np.isfinite(buf["logit"])]  # the grammar sets -inf on what it rejects

    def _choose(self, ids: np.ndarray, logits: np.ndarray) -> int:
        """The rest of the chain over the accepted tokens; the token it selects."""
        buf = self._buffer(ids, logits)
        array = self._run(self._chain.sampler, buf)
        if not 0 <= array.selected < array.size:
            raise RuntimeError("llama.cpp's sampler chain selected no token")
        return int(array.data[array.selected].id)

    @staticmethod
    def _buffer(ids: np.ndarray, logits: np.ndarray) -> np.ndarray:
        buf = np.zeros(ids.size, dtype=_TOKEN_DATA)
        buf["id"] = ids
        buf["logit"] = logits[ids]
        return buf

    def _run(self, sampler: Any, buf: np.ndarray) -> Any:
        """Apply `sampler` to `buf` as a llama_token_data_array (unsorted, nothing selected)."""
        lib = self._lib
        array = lib.llama_token_data_array(
            buf.ctypes.data_as(ctypes.POINTER(lib.llama_token_data)), buf.size, -1, False)
        lib.llama_sampler_apply(sampler, ctypes.byref(array))
        return array


def _top_p_settled(logits: np.ndarray, floor: float) -> bool:
    """Whether top-p and min-p keep the same tokens from `logits` (the accepted tokens found)
    whatever the accepted tokens below `floor` not looked at: up to TOP_K - len(logits) of them,
    each with a probability below e^(floor - best) of the best one's. They can only lower the
    cumulative probabilities, which moves top-p's cut later; so the choice stands when min-p
    cuts first (and drops them all), or when top-p's cut holds even with the most they could
    take."""
    x = np.sort(logits.astype(np.float64))[::-1]
    weights = np.exp(x - x[0])
    cumulative = np.cumsum(weights) / weights.sum()
    min_logit = x[0] + np.log(MIN_P)  # min-p keeps the leading tokens at or above it
    kept = int(np.count_nonzero(x >= min_logit - 1e-4))  # the larger count at a tie
    # min-p decides when top-p keeps at least as many, and the missing tokens (after every
    # found one) cannot pass min-p: a found one fails it first, or they are all below it
    if ((kept < x.size or floor <= min_logit - 1e-4)
            and (kept == 1 or cumulative[kept - 2] < TOP_P - MARGIN)):
        return True
    cut = int(np.searchsorted(cumulative, TOP_P))  # top-p keeps cut + 1 tokens
    missing = (TOP_K - x.size) * float(np.exp(floor - x[0]))
    return ((cut == 0 or cumulative[cut - 1] < TOP_P - MARGIN)
            and cumulative[min(cut, x.size - 1)] / (1 + missing) >= TOP_P + MARGIN)
