"""Kernels declared in the file (node field ``kernel``, since 1.3), and the 1.2 rule they migrate from.

A frontend lowers one source op (``aten.scaled_dot_product_attention``, ``aten._softmax``) into
several nodes; the source program runs them as one kernel that never writes the inner tensors to
memory. Since 1.3 those nodes declare it: they share a ``kernel`` id (the call's name) and stand
consecutively. Before 1.3 the kernel was read from the nodes' names: a maximal run of consecutive
nodes with the same op and name prefix ``CALL`` (``sdpa.scores``, ``sdpa.max``, ..., ``sdpa``).
:func:`declare_kernels` applies that rule once, when a 1.0-1.2 file is read and when a frontend
finishes a graph, so backends only read the declaration (:func:`kernel_spans`).

>>> from solar_io.affine import parse_access
>>> def node(name, op): return Node(name, "einsum", op, (parse_access("x[i]"),), (parse_access(name + "[i]"),))
>>> nodes = declare_kernels([node("sdpa.scores", "sdpa"), node("sdpa", "sdpa"), node("relu", "relu")])
>>> [n.kernel for n in nodes]
['sdpa', 'sdpa', None]
>>> kernel_spans(nodes)
[(0, 1), (2, 2)]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..graph import Node


def call_key(node: Node) -> tuple[str, str]:
    """``(op, call)``: the source op and the name prefix before the first ``.`` (the 1.2 rule)."""
    return node.op, node.name.split(".", 1)[0]


def _prefix_runs(keys: Sequence[tuple[str, str] | None]) -> list[tuple[int, int]]:
    """Maximal runs of two or more consecutive equal keys (None never joins a run), half-open."""
    runs = []
    i = 0
    while i < len(keys):
        j = i + 1
        if keys[i] is not None:
            while j < len(keys) and keys[j] == keys[i]:
                j += 1
            if j - i >= 2:
                runs.append((i, j))
        i = j
    return runs


def declare_kernels(nodes: Sequence[Node]) -> tuple[Node, ...]:
    """``nodes`` with ``kernel`` set on every run of two or more consecutive undeclared nodes that
    share op and call prefix (the 1.2 rule); declared nodes and single nodes are left as they are."""
    out = list(nodes)
    ids = _run_ids([n.kernel for n in out], [call_key(n)[1] for n in out],
                   _prefix_runs([call_key(n) if n.kernel is None else None for n in out]))
    for (i, j), kid in ids:
        out[i:j] = [replace(n, kernel=kid) for n in out[i:j]]
    return tuple(out)


def declare_kernels_doc(nodes: list) -> list:
    """The same rule on a document's node mappings (``solar-io migrate`` of a file before 1.3)."""
    out = [dict(n) if isinstance(n, dict) else n for n in nodes]
    keys = [(n.get("op"), n["name"].split(".", 1)[0]) if isinstance(n, dict) and isinstance(n.get("name"), str)
            and "kernel" not in n else None for n in out]
    declared = [n.get("kernel") if isinstance(n, dict) else None for n in out]
    calls = [k[1] if k is not None else "" for k in keys]
    for (i, j), kid in _run_ids(declared, calls, _prefix_runs(keys)):
        for n in out[i:j]:
            n["kernel"] = kid
    return out


def _run_ids(declared: Sequence, calls: Sequence[str],
             runs: list[tuple[int, int]]) -> list[tuple[tuple[int, int], str]]:
    """A kernel id per run: its call prefix, or ``CALL#2``, ``CALL#3``, ... where an earlier run (or a
    declared kernel) already holds that id, so runs the rule keeps apart stay apart."""
    used = {k for k in declared if isinstance(k, str)}
    out = []
    for i, j in runs:
        kid, n = calls[i], 1
        while kid in used:
            n += 1
            kid = f"{calls[i]}#{n}"
        used.add(kid)
        out.append(((i, j), kid))
    return out


def kernel_id(node: Node) -> str:
    """The kernel a node runs in: its declared ``kernel``, else its own name (a kernel of one node)."""
    return node.kernel if node.kernel is not None else "\0" + node.name


def kernel_spans(nodes: Sequence[Node]) -> list[tuple[int, int]]:
    """The kernels as inclusive node-index ranges in order: maximal runs of one declared kernel id."""
    out: list[tuple[int, int]] = []
    prev: str | None = None
    for i, n in enumerate(nodes):
        k = kernel_id(n)
        if out and k == prev:
            out[-1] = (out[-1][0], i)
        else:
            out.append((i, i))
        prev = k
    return out


def split_kernels(nodes: Sequence[Node]) -> list[str]:
    """Kernel ids declared by nodes that do not stand consecutively (a validation error)."""
    seen: set[str] = set()
    bad: list[str] = []
    for i, _ in kernel_spans(nodes):
        k = nodes[i].kernel
        if k is None:
            continue
        if k in seen and k not in bad:
            bad.append(k)
        seen.add(k)
    return bad
