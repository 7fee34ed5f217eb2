"""The LLM the product itself uses (segmenting, attributing, writing interventions, judging).

Any OpenAI-compatible endpoint, configured by environment:

    TRACEFIX_LLM_BASE_URL   e.g. http://127.0.0.1:8000/v1   (unset: no LLM, every stage falls back)
    TRACEFIX_LLM_MODEL      model name (default "gpt-4o-mini")
    TRACEFIX_LLM_API_KEY    API key (default "unused", for local servers that ignore it)

Every stage asks for one JSON object. A reply that is not JSON gets one retry with the
parse error quoted back; a second failure raises :class:`LLMError`, which the pipeline
turns into that stage's deterministic fallback (and says so in the result).
"""
from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import dataclass, field

from tracefix.errors import TracefixError

DEFAULT_MODEL = "gpt-4o-mini"


class LLMError(TracefixError, RuntimeError):
    """The LLM endpoint failed or kept answering something that is not a JSON object."""

    def __init__(self, stage: str, detail: str):
        super().__init__(f"LLM stage {stage!r}: {detail}")
        self.stage = stage
        self.detail = detail


def parse_json_object(text: str) -> dict:
    """The JSON object in a model reply: the whole text, a ```json fence, or the outermost braces."""
    text = (text or "").strip()
    candidates = [text]
    fence = re.search(r"```(?:json)?\s*(.*?)```", text, re.S)
    if fence:
        candidates.append(fence.group(1).strip())
    first, last = text.find("{"), text.rfind("}")
    if 0 <= first < last:
        candidates.append(text[first:last + 1])
    error = "empty reply"
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError as exc:
            error = str(exc)
            continue
        if isinstance(value, dict):
            return value
        error = f"expected a JSON object, got {type(value).__name__}"
    raise ValueError(error)


@dataclass
class ProductLLM:
    base_url: str
    model: str = DEFAULT_MODEL
    api_key: str = "unused"
    timeout_s: float = 60.0
    requests: int = 0  # completions sent, for the result's bookkeeping
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _client: object = field(default=None, repr=False)

    @classmethod
    def from_env(cls, base_url: str | None = None, model: str | None = None) -> "ProductLLM | None":
        """The configured LLM, or None when no endpoint is set (the pipeline then uses fallbacks)."""
        base_url = base_url or os.environ.get("TRACEFIX_LLM_BASE_URL")
        if not base_url:
            return None
        return cls(base_url=base_url,
                   model=model or os.environ.get("TRACEFIX_LLM_MODEL") or DEFAULT_MODEL,
                   api_key=os.environ.get("TRACEFIX_LLM_API_KEY") or "unused")

    def _openai(self):
        if self._client is None:
            import openai  # the replay extra; never imported by `import tracefix`

            self._client = openai.OpenAI(base_url=self.base_url, api_key=self.api_key,
                                         timeout=self.timeout_s, max_retries=1)
        return self._client

    def _ask(self, stage: str, messages: list[dict]) -> str:
        import openai

        with self._lock:
            self.requests += 1
        try:
            response = self._openai().chat.completions.create(
                model=self.model, messages=messages, temperature=0)
        except openai.OpenAIError as exc:
            raise LLMError(stage, f"request to {self.base_url} failed: {exc}") from exc
        if not response.choices:
            raise LLMError(stage, "the reply has no choices")
        return response.choices[0].message.content or ""

    def complete_json(self, stage: str, system: str, user: str) -> dict:
        """Ask once, retry once if the reply is not a JSON object, else raise LLMError."""
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        reply = self._ask(stage, messages)
        try:
            return parse_json_object(reply)
        except ValueError as first_error:
            messages += [
                {"role": "assistant", "content": reply},
                {"role": "user", "content": f"That reply was not a valid JSON object ({first_error}). "
                                            "Answer again with the JSON object only."},
            ]
        reply = self._ask(stage, messages)
        try:
            return parse_json_object(reply)
        except ValueError as exc:
            raise LLMError(stage, f"reply is not a JSON object after one retry ({exc}): {reply[:200]!r}") from exc
