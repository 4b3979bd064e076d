"""Synthetic transformer-like graphs of any size, for benchmarks (not a test fixture)."""

from __future__ import annotations

from solar_io.affine import parse_access
from solar_io.graph import Graph, Node, Producer, Tensor


def transformer_like(n_nodes: int) -> Graph:
    """A chain of layers (matmul, bias add, gelu, reduction-based norm, reshape) of ~n_nodes nodes."""
    ranks = (("B", 8), ("S", 512), ("D", 1024), ("F", 4096), ("H", 16), ("E", 64))
    tensors = [Tensor("x0", ("B", "S", "D"), "bf16", "input")]
    nodes: list[Node] = []
    cur = "x0"
    i = 0
    while len(nodes) < n_nodes:
        w, h, a, s, m, y, r = (f"w{i}", f"h{i}", f"a{i}", f"s{i}", f"m{i}", f"y{i}", f"r{i}")
        tensors += [Tensor(w, ("D", "F"), "bf16", "weight"), Tensor(h, ("B", "S", "F"), "bf16", "intermediate"),
                    Tensor(a, ("B", "S", "F"), "bf16", "intermediate"), Tensor(s, ("B", "S"), "fp32", "intermediate"),
                    Tensor(m, ("B", "S", "F"), "bf16", "intermediate"),
                    Tensor(f"v{i}", ("F", "D"), "bf16", "weight"), Tensor(y, ("B", "S", "D"), "bf16", "intermediate"),
                    Tensor(r, ("B", "S", "H", "E"), "bf16", "intermediate")]
        nodes += [
            Node(f"fc1_{i}", "einsum", "aten.matmul", (parse_access(f"{cur}[B, S, D]"), parse_access(f"{w}[D, F]")),
                 (parse_access(f"{h}[B, S, F]"),), space=("B", "S", "F", "D"), map="mul", reduce="add",
                 location=f"model.py:{10 + i}"),
            Node(f"act_{i}", "einsum", "aten.gelu", (parse_access(f"{h}[B, S, F]"),), (parse_access(f"{a}[B, S, F]"),),
                 space=("B", "S", "F"), map="gelu", reduce="none"),
            Node(f"sum_{i}", "einsum", "aten.sum", (parse_access(f"{a}[B, S, F]"),), (parse_access(f"{s}[B, S]"),),
                 space=("B", "S", "F"), map="identity", reduce="add"),
            Node(f"scale_{i}", "einsum", "aten.div", (parse_access(f"{a}[B, S, F]"), parse_access(f"{s}[B, S]")),
                 (parse_access(f"{m}[B, S, F]"),), space=("B", "S", "F"), map="div", reduce="none"),
            Node(f"fc2_{i}", "einsum", "aten.matmul", (parse_access(f"{m}[B, S, F]"), parse_access(f"v{i}[F, D]")),
                 (parse_access(f"{y}[B, S, D]"),), space=("B", "S", "D", "F"), map="mul", reduce="add"),
            Node(f"split_{i}", "data_movement", "aten.view", (parse_access(y),), (parse_access(r),),
                 movement="reshape", view=True),
        ]
        cur_t = f"z{i}"
        tensors.append(Tensor(cur_t, ("B", "S", "D"), "bf16", "intermediate"))
        nodes.append(Node(f"merge_{i}", "data_movement", "aten.view", (parse_access(r),), (parse_access(cur_t),),
                          movement="reshape", view=True))
        cur = cur_t
        i += 1
    tensors = [t if t.name != cur else Tensor(t.name, t.ranks, t.dtype, "output") for t in tensors]
    return Graph(ranks=ranks, tensors=tuple(tensors), nodes=tuple(nodes),
                 producer=Producer(tool_version="bench", frontend="synthetic"), name=f"synthetic-{n_nodes}")
