"""The reference executor's opaque nodes: they run the implementation the caller supplies.

An opaque node's compute is unknown to the format; to execute a graph that has one, the caller maps
the node's name (or its ``op``) to a function of the node's input arrays returning its output
arrays (:func:`solar_io.executor.execute`'s ``opaque``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .dtypes import numpy_dtype
from .graph import Graph, Node


def run_opaque(graph: Graph, node: Node, env: dict[str, np.ndarray],
               opaque: Mapping[str, Callable[..., Any]]) -> tuple[np.ndarray, ...]:
    """The outputs of opaque ``node``: its implementation (by node name, else op) on its input arrays,
    checked against the output shapes and cast to their dtypes; ExecutionError naming the node otherwise."""
    from .executor import ExecutionError  # defined there (its public home); imported when a node runs
    fn = opaque.get(node.name, opaque.get(node.op))
    where = f"opaque node {node.name} (op {node.op})"
    if fn is None:
        raise ExecutionError(f"{where} has no implementation ({node.reason}); pass opaque={{{node.name!r}: fn}} "
                             f"or opaque={{{node.op!r}: fn}}")
    try:
        res = fn(*(env[a.tensor] for a in node.inputs))
    except Exception as e:  # a user function: report it as this node's failure
        raise ExecutionError(f"{where}: implementation raised {type(e).__name__}: {e}") from e
    arrays = (res,) if isinstance(res, np.ndarray) else tuple(res)
    if len(arrays) != len(node.outputs):
        raise ExecutionError(f"{where}: implementation returned {len(arrays)} arrays, node writes "
                             f"{len(node.outputs)}")
    out = []
    for a, arr in zip(node.outputs, arrays, strict=True):
        shape, arr = graph.shape(a.tensor), np.asarray(arr)
        if arr.shape != shape:
            raise ExecutionError(f"{where}: output {a.tensor} must have shape {shape}, got {arr.shape}")
        out.append(arr.astype(numpy_dtype(graph.tensor_map[a.tensor].dtype), copy=False))
    return tuple(out)
