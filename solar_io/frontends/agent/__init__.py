"""LLM frontend: translate any source program into a validated Affine Loop IR program.

Golden outputs from running the source (PyTorch, JAX, NumPy adapters; ``golden=`` an .npz
for sources that cannot run here) → ask the model for an IR program (system prompt: the IR's
SPEC.md verbatim + the adapter's conventions) → run it in a sandboxed process → compare
(dtype-aware) → on failure send a diagnostic and retry → lift with the deterministic lifter.
``fallback.resolve_opaque`` (``solar-io capture --agent-fallback``) applies the same loop to
the opaque nodes of a PyTorch capture, one op at a time, and splices the results in.
Only this package imports ``anthropic``, lazily (``client.AnthropicClient``).
"""

from __future__ import annotations

from .client import DEFAULT_MODEL, AnthropicClient, Client, ReplayClient, Reply
from .translate import METHOD, capture_file

__all__ = ["DEFAULT_MODEL", "METHOD", "AnthropicClient", "Client", "ReplayClient", "Reply", "capture_file"]
