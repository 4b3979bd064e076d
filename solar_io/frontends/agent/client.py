"""The model client behind a small interface: ``complete(system, messages, model, max_tokens)``.

``AnthropicClient`` talks to the Anthropic API (the only place ``anthropic`` is imported,
lazily); ``ReplayClient`` feeds recorded replies through the same code path (tests, offline
runs). The API key comes from ``ANTHROPIC_API_KEY`` only; it is never written or logged.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..common.errors import CaptureError

DEFAULT_MODEL = "claude-sonnet-4-5"
MAX_TOKENS = 16000


@dataclass(frozen=True)
class Reply:
    """One model reply: its text and the tokens it cost."""

    text: str
    input_tokens: int = 0
    output_tokens: int = 0


class Client(Protocol):
    def complete(self, system: list[str], messages: list[dict], model: str, max_tokens: int) -> Reply: ...


class AnthropicClient:
    """The live client (``anthropic`` SDK; retries 429/5xx with backoff).

    ``http_client``: an ``httpx.Client`` (tests pass one with a mock transport)."""

    def __init__(self, api_key: str | None = None, max_retries: int = 4, http_client=None) -> None:
        key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY", "")
        if not key:
            raise CaptureError("ANTHROPIC_API_KEY is not set: the agent frontend needs an Anthropic API key in "
                               "the environment")
        try:
            import anthropic
        except ImportError:
            raise CaptureError("the agent frontend needs the anthropic package: pip install "
                               "'solar-io[llm]'") from None
        kw = {"http_client": http_client} if http_client is not None else {}
        self._api = anthropic.Anthropic(api_key=key, max_retries=max_retries, **kw)
        self._errors = anthropic.APIError

    def __repr__(self) -> str:  # never show the key
        return "AnthropicClient()"

    def complete(self, system: list[str], messages: list[dict], model: str, max_tokens: int) -> Reply:
        try:
            msg = self._api.messages.create(
                model=model, max_tokens=max_tokens, messages=messages,
                system=[{"type": "text", "text": s} for s in system])
        except self._errors as e:
            raise CaptureError(f"the Anthropic API call failed: {type(e).__name__}: "
                               f"{' '.join(str(e).split())[:200]}") from None
        text = "".join(getattr(b, "text", "") for b in msg.content)
        u = msg.usage
        return Reply(text, int(u.input_tokens or 0), int(u.output_tokens or 0))


class ReplayClient:
    """Recorded replies, in order: a list of strings or {"text", "input_tokens",
    "output_tokens"}, or a JSON file holding such a list (or {"replies": [...]}).
    ``requests`` keeps what each call was sent."""

    def __init__(self, replies) -> None:
        if isinstance(replies, (str, Path)):
            data = json.loads(Path(replies).read_text())
            replies = data["replies"] if isinstance(data, dict) else data
        self.replies = [Reply(r) if isinstance(r, str) else Reply(**r) for r in replies]
        self.requests: list[dict] = []

    def complete(self, system: list[str], messages: list[dict], model: str, max_tokens: int) -> Reply:
        self.requests.append({"system": list(system), "messages": [dict(m) for m in messages], "model": model,
                              "max_tokens": max_tokens})
        if len(self.requests) > len(self.replies):
            raise CaptureError(f"replay: no recorded reply #{len(self.requests)}")
        return self.replies[len(self.requests) - 1]
