"""LLM frontend: translate any source program into a validated Affine Loop IR program.

Golden outputs from running the source (PyTorch, JAX, NumPy adapters; ``golden=`` an .npz
for sources that cannot run here) → ask the model for an IR program (system prompt: the IR's
SPEC.md verbatim + the adapter's conventions) → run and lift it in the jail (``jail.py``:
bubblewrap, seccomp, user nobody, limits; ``unsafe_exec`` / ``--unsafe-exec`` only where no jail
works) → compare (dtype-aware) → on failure send a diagnostic and retry. PyTorch sources are
read by the PyTorch frontend's loader (KernelBench's ``Model(*get_init_inputs())`` convention).
``fallback.resolve_opaque`` (``solar-io capture --agent-fallback``) applies the same loop to
the opaque nodes of a PyTorch capture, one op at a time, and splices the results in.
Only this package imports ``anthropic``, lazily (``client.AnthropicClient``).
"""

from __future__ import annotations

from .client import DEFAULT_MODEL, AnthropicClient, Client, ReplayClient, Reply
from .translate import METHOD, capture_file

__all__ = ["DEFAULT_MODEL", "METHOD", "AnthropicClient", "Client", "ReplayClient", "Reply", "capture_file"]
