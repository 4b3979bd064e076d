"""The live Anthropic client with a fake HTTP transport: request construction and retries,
no network."""

from __future__ import annotations

import importlib.util
import json

import pytest

# find_spec, not importorskip: importing the SDK takes ~6 s, paid at collection by every pytest worker;
# AnthropicClient imports it when a test here first builds one.
if importlib.util.find_spec("anthropic") is None:
    pytest.skip("the anthropic SDK is not installed (extra: llm)", allow_module_level=True)
try:  # recent anthropic SDKs use httpx2, older ones httpx
    import httpx2 as httpx
except ImportError:
    httpx = pytest.importorskip("httpx")

from solar_io.frontends.agent import AnthropicClient  # noqa: E402
from solar_io.frontends.common.errors import CaptureError  # noqa: E402

KEY = "sk-ant-test-SECRET-42"


def _ok(text: str) -> httpx.Response:
    return httpx.Response(200, json={
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 123, "output_tokens": 45}})


def _client(responses: list, seen: list) -> AnthropicClient:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return responses.pop(0)

    return AnthropicClient(api_key=KEY, max_retries=3, http_client=httpx.Client(transport=httpx.MockTransport(handler)))


def test_request_construction_and_retries():
    seen: list = []
    busy = {"retry-after-ms": "5"}
    c = _client([httpx.Response(429, headers=busy, json={"type": "error", "error": {"type": "rate_limit_error",
                                                                                      "message": "slow down"}}),
                 httpx.Response(529, headers=busy, json={"type": "error", "error": {"type": "overloaded_error",
                                                                                      "message": "busy"}}),
                 _ok("```python\nx = 1\n```")], seen)
    r = c.complete(["SPEC TEXT", "CONVENTIONS"], [{"role": "user", "content": "translate"}], "claude-test", 777)
    assert r.text.startswith("```python") and (r.input_tokens, r.output_tokens) == (123, 45)
    assert len(seen) == 3
    body = json.loads(seen[-1].content)
    assert body["model"] == "claude-test" and body["max_tokens"] == 777
    assert [s["text"] for s in body["system"]] == ["SPEC TEXT", "CONVENTIONS"]
    assert body["messages"] == [{"role": "user", "content": "translate"}]
    h = seen[-1].headers
    assert KEY in (h.get("x-api-key", ""), h.get("authorization", "").removeprefix("Bearer "))
    assert str(seen[-1].url).endswith("/v1/messages")


def test_api_error_is_one_line_without_key():
    seen: list = []
    c = _client([httpx.Response(400, json={"type": "error", "error": {"type": "invalid_request_error",
                                                                        "message": "bad model"}})], seen)
    with pytest.raises(CaptureError, match="Anthropic API call failed") as e:
        c.complete(["s"], [{"role": "user", "content": "u"}], "nope", 10)
    assert KEY not in str(e.value) and "\n" not in str(e.value)


def test_missing_key(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(CaptureError, match="ANTHROPIC_API_KEY is not set"):
        AnthropicClient()
