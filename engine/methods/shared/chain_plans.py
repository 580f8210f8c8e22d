"""Relation chains of the `chains` method: enumerated in the question subgraph and scored without
the LLM, then shown to the model as plain sentences (ours; see `engine/methods/chains/method.py`).

A chain is a topic entity and a sequence of (relation, direction) steps; executing it on the
subgraph walks entity *sets* (every entity reached by the steps so far), so one chain stands for
all the paths that share its relations, the way a question's wording does ("the directors of the
films written by the writer of X" is one chain whatever the number of films):

    sub = subgraph_within(kg, [topic], hops=3)
    chains = enumerate_chains(sub, topic, max_hops=3, keep=scorer_of(question))
    chains[0].sentence(kg.label, kg.relation_label)
    # "Kill Bill -written by-> Quentin Tarantino -written by (reverse)-> Pulp Fiction, … -directed by-> …"

Several topic entities: every pair of chains from two topic entities whose end sets meet is a
joined chain ending at the meeting entities ("films that starred both A and B").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from engine.access.graph import Subgraph
from engine.access.kg_protocol import is_literal
from index.mentions_kg import MENTIONS

Step = tuple[str, str]  # (relation id, direction "out" | "in")

Label = Callable[[str], str]
ChainScorer = Callable[[Sequence["Chain"]], list[float]]

REVERSE = " (reverse)"


def starts_with_fact(steps: Sequence[Step], mentions: Sequence[str] = ()) -> bool:
    """Whether the first step is a fact of the graph, not a document's mention of the topic (a
    mentions graph's `mentions`, or the caller's own mention relations): the documents along a
    mention already speak of the topic, those past a fact speak of another entity (`chains`'
    `topic_docs`, `hydra`'s `topic_windows`)."""
    return bool(steps) and steps[0][0] != MENTIONS and steps[0][0] not in mentions


@dataclass
class Chain:
    """A relation chain from a topic entity and what it reaches.

    `sets[i]` holds the entities after i steps (`sets[0]` is the topic), first-seen order and
    capped at `max_set` (`truncated` then says so). `also` is a second chain from another topic
    entity whose end set met this one's: `ends` is then their meeting set.
    """

    topic: str
    steps: tuple[Step, ...]
    sets: list[list[str]]
    truncated: bool = False
    score: float = 0.0
    also: Chain | None = None
    meet: list[str] = field(default_factory=list)

    @property
    def ends(self) -> list[str]:
        """The entities the chain reaches (the meeting set of a joined chain)."""
        return self.meet if self.also is not None else self.sets[-1]

    @property
    def hops(self) -> int:
        return len(self.steps) + (len(self.also.steps) if self.also else 0)

    @property
    def parts(self) -> tuple[Chain, ...]:
        """The chain and, for a joined one, the chain from the other topic entity."""
        return (self,) if self.also is None else (self, self.also)

    @property
    def all_steps(self) -> list[Step]:
        """The steps of every part, this chain's first."""
        return [step for part in self.parts for step in part.steps]

    def key(self) -> str:
        own = self.topic + "|" + ">".join(f"{r}:{d}" for r, d in self.steps)
        return own + (" & " + self.also.key() if self.also else "")

    def relation_words(self, relation_label: Label) -> str:
        """The steps as relation words only ("written by, then written by (reverse)"): what the
        LLM-free scorer compares with the question (no entity names, so cached across questions)."""
        own = ", then ".join(step_text(s, relation_label) for s in self.steps)
        if self.also is None:
            return own
        return own + "; and also " + self.also.relation_words(relation_label)

    def sentence(self, label: Label, relation_label: Label, max_shown: int = 3) -> str:
        """The chain as the model reads it: entity sets joined by relation arrows, the sets
        shortened to `max_shown` names and a count."""
        text = _walk(self, label, relation_label, max_shown)
        if self.also is None:
            return text
        other = _walk(self.also, label, relation_label, max_shown)
        return f"{text}; {other}; both reach {_names(self.meet, label, max_shown)}"


def step_text(step: Step, relation_label: Label) -> str:
    relation, direction = step
    return relation_label(relation) + (REVERSE if direction == "in" else "")


def _names(entities: Sequence[str], label: Label, max_shown: int) -> str:
    names = list(dict.fromkeys(label(e) for e in entities))
    shown = ", ".join(names[:max_shown])
    return shown + (f" and {len(names) - max_shown} more" if len(names) > max_shown else "")


def _walk(chain: Chain, label: Label, relation_label: Label, max_shown: int) -> str:
    parts = [label(chain.topic)]
    for i, step in enumerate(chain.steps, 1):
        parts.append(f"-{step_text(step, relation_label)}-> {_names(chain.sets[i], label, max_shown)}")
    return " ".join(parts)


def _step(sub: Subgraph, entities: Sequence[str], avoid: str,
          max_expand: int) -> dict[Step, dict[str, None]]:
    """Every (relation, direction) leaving `entities` (the first `max_expand` of them, literals
    never expanded) and the entities it reaches, never the topic entity itself."""
    reached: dict[Step, dict[str, None]] = {}
    for node in entities[:max_expand]:
        if is_literal(node) or node not in sub.graph:
            continue
        for hop in sub.neighbours(node):
            if hop.tail != avoid:
                reached.setdefault((hop.relation, hop.direction), {})[hop.tail] = None
    return reached


def walk_sets(sub: Subgraph, start: Sequence[str], steps: Sequence[Step], avoid: str,
              max_expand: int = 200, max_set: int = 500) -> list[list[str]] | None:
    """The entity sets `steps` reach from `start` in the subgraph (`start` first), as
    `enumerate_chains` walks them; None when a step reaches nothing."""
    sets = [list(start)]
    for step in steps:
        reached = list(_step(sub, sets[-1], avoid, max_expand).get(step, {}))
        if not reached:
            return None
        sets.append(reached[:max_set])
    return sets


def enumerate_chains(sub: Subgraph, topic: str, max_hops: int, *, scorer: ChainScorer | None = None,
                     beam: int = 40, max_set: int = 500, max_expand: int = 200) -> list[Chain]:
    """Every relation chain of 1..`max_hops` steps from `topic` in the subgraph, both directions.

    Level by level: the chains of one level are extended by every step that leaves their end
    set. With `scorer`, each level is scored and only the best `beam` chains are extended (a
    hub with hundreds of relations cannot blow up the next level); every chain that was scored
    is returned, best first. A chain that reaches no entity other than the topic is dropped.
    """
    if topic not in sub.graph or max_hops < 1:
        return []
    found: list[Chain] = []
    level = [Chain(topic, (), [[topic]])]
    for _ in range(max_hops):
        grown: list[Chain] = []
        for chain in level:
            for step, reached in _step(sub, chain.sets[-1], topic, max_expand).items():
                ends = list(reached)
                grown.append(Chain(topic, (*chain.steps, step), [*chain.sets, ends[:max_set]],
                                   chain.truncated or len(ends) > max_set))
        if not grown:
            break
        if scorer is not None:
            for chain, score in zip(grown, scorer(grown), strict=True):
                chain.score = score
            grown.sort(key=lambda c: -c.score)
        found.extend(grown)
        level = grown[:beam] if scorer is not None else grown
    found.sort(key=lambda c: -c.score)
    return found


def joined_chains(first: Sequence[Chain], second: Sequence[Chain], limit: int = 20) -> list[Chain]:
    """Pairs of chains (the best `limit` of each) from two topic entities whose end sets meet:
    a chain ending at the meeting entities, scored by the mean of the two."""
    joined: list[Chain] = []
    for a in first[:limit]:
        ends_a = dict.fromkeys(a.sets[-1])
        for b in second[:limit]:
            if a.topic == b.topic:
                continue
            meet = [e for e in b.sets[-1] if e in ends_a and e not in (a.topic, b.topic)]
            if meet:
                joined.append(Chain(a.topic, a.steps, a.sets, a.truncated or b.truncated,
                                    (a.score + b.score) / 2, also=b, meet=meet))
    joined.sort(key=lambda c: -c.score)
    return joined


def distinct_best(chains: Sequence[Chain], k: int) -> list[Chain]:
    """The best `k` chains with distinct end sets (two wordings of the same answer set are one
    choice for the model), best first."""
    seen: set[tuple[str, ...]] = set()
    kept: list[Chain] = []
    for chain in sorted(chains, key=lambda c: -c.score):
        ends = tuple(sorted(chain.ends))
        if not ends or ends in seen:
            continue
        seen.add(ends)
        kept.append(chain)
        if len(kept) >= k:
            break
    return kept
