"""FlashInfer-Trace / SOL-ExecBench definitions: ``definition.json`` + ``workload.jsonl`` -> one graph per workload.

Read by ``definition`` (axes, constraints, tensor specs, dtypes) and ``workload`` (plain and
Trace-shaped lines); ``inputs`` makes the arguments of the reference's ``run``; ``capture`` hands
them to the PyTorch frontend; ``problems`` captures a problem folder or a corpus of them. Only
``capture``, ``inputs`` and ``problems`` import torch.
"""

from __future__ import annotations

from .detect import is_trace_source, problem_dirs

NAME = "trace"

__all__ = ["NAME", "is_trace_source", "problem_dirs"]
