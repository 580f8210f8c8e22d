"""ScriptedLLM: the LLM protocol answered from canned replies, for control-flow tests.

    llm = ScriptedLLM([{"relations": ["r1"]}, "plain text", lambda req: {"answer": "x"}])
    llm = ScriptedLLM(lambda req: {"answer": "Paris"} if req.stage == "answer" else "...")

A reply may be a str (used as is), any other JSON value (serialised), or a callable taking the
`ScriptedRequest` and returning one of those. Replies are validated against the schema exactly
like a real model's, including the one retry (which takes the next reply), so a test can
exercise the invalid-reply path. `requests` keeps every request for assertions. Token counts
are rough word counts. Never proof that a method works: see STYLE.md.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.llm.base import BaseLLM
from engine.llm.cache import ResponseCache
from engine.llm.protocol import Generation, Message
from ingest.base.errors import ModelError


@dataclass(frozen=True)
class ScriptedRequest:
    stage: str
    messages: list[Message]
    schema: dict[str, Any] | None
    temperature: float
    max_tokens: int
    seed: int


Reply = Any  # str | JSON value | Callable[[ScriptedRequest], str | JSON value]


class ScriptedLLM(BaseLLM):
    """Canned replies in order (a sequence) or computed per request (a callable)."""

    def __init__(self, replies: Sequence[Reply] | Callable[[ScriptedRequest], Any], *,
                 name: str = "scripted", cache: ResponseCache | None = None) -> None:
        super().__init__(cache=cache)
        self.fingerprint = f"scripted:{name}"
        self._script = replies if callable(replies) else list(replies)
        self._next = 0
        self._lock = threading.Lock()
        self.requests: list[ScriptedRequest] = []

    @classmethod
    def from_spec(cls, spec: str) -> ScriptedLLM:
        """`scripted:` (no replies: any call is a ModelError) or `scripted:FILE.json` (a JSON
        list of replies, used in order). The backend name `--llm` accepts for control-flow
        runs without a model; its fingerprint names the file's content."""
        path = spec.partition(":")[2]
        if not path:
            return cls([], name="none")
        try:
            data = Path(path).read_bytes()
            replies = json.loads(data)
        except (OSError, ValueError) as exc:
            raise ModelError(f"{path}: not a readable JSON list of scripted replies ({exc})") from None
        if not isinstance(replies, list):
            raise ModelError(f"{path}: scripted replies must be a JSON list")
        return cls(replies, name=f"{Path(path).name}:{hashlib.sha256(data).hexdigest()[:12]}")

    @property
    def remaining(self) -> int:
        """Replies not used yet (0 for a callable script)."""
        return 0 if callable(self._script) else len(self._script) - self._next

    def _generate(self, messages: list[Message], *, schema: dict[str, Any] | None,
                  temperature: float, max_tokens: int, seed: int, stage: str) -> Generation:
        request = ScriptedRequest(stage, list(messages), schema, temperature, max_tokens, seed)
        with self._lock:
            self.requests.append(request)
            if callable(self._script):
                reply = self._script
            else:
                if self._next >= len(self._script):
                    raise ModelError(f"ScriptedLLM ran out of replies at call "
                                     f"{len(self.requests)} (stage {stage!r})")
                reply = self._script[self._next]
                self._next += 1
        if callable(reply):
            reply = reply(request)
        text = reply if isinstance(reply, str) else json.dumps(reply, ensure_ascii=False)
        prompt_words = sum(len(m["content"].split()) for m in messages)
        return Generation(text, prompt_words, 0, len(text.split()))
