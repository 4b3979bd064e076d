"""Time of ``solar-io reorder``: costing every order of a chain, path search, and --apply.

Rows: a matrix chain of n operands written as n-1 left-to-right nodes (sizes cycle through
64, 512, 16, 256, 32, 1024, ...), analysed by flops and by SOL on a chip (one roofline bound per
distinct contraction); n <= 6 enumerates every order ((2n-3)!! of them), larger n uses opt_einsum.
``gain`` is the written order's FLOPs over the best. The last rows time the MLA decode example:
analysis, and --apply (rewrite + reference-executor check at reduced sizes).
Run: ``.venv/bin/python benchmarks/bench_reorder.py [max_operands]``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import solar_io
from solar_io.dse.reorder import analyse
from solar_io.dse.reorder_apply import apply
from solar_io.graph import Graph, Node, Tensor
from solar_io.hardware import load_spec

SIZES = (64, 512, 16, 256, 32, 1024, 8, 128)
MLA = Path(__file__).parent.parent / "examples" / "graphs" / "mla_decode_naive.yaml"


def matrix_chain(n: int) -> Graph:
    """out[r0, rn] = x0[r0, r1] x1[r1, r2] ... written ((x0 x1) x2) ..."""
    ranks = tuple((f"r{i}", SIZES[i % len(SIZES)]) for i in range(n + 1))
    tensors = [Tensor(f"x{i}", (f"r{i}", f"r{i + 1}"), "bf16", "input") for i in range(n)]
    nodes = []
    prev = "x0"
    for i in range(1, n):
        out = "y" if i == n - 1 else f"t{i}"
        tensors.append(Tensor(out, ("r0", f"r{i + 1}"), "bf16", "output" if out == "y" else "intermediate"))
        access = [solar_io.parse_access(f"{prev}[r0, r{i}]"), solar_io.parse_access(f"x{i}[r{i}, r{i + 1}]")]
        nodes.append(Node(f"n{i}", "einsum", "bench.mm", tuple(access),
                          (solar_io.parse_access(f"{out}[r0, r{i + 1}]"),), space=("r0", f"r{i + 1}", f"r{i}"),
                          map="mul", reduce="add"))
        prev = out
    return Graph(ranks, tuple(tensors), tuple(nodes), name=f"chain{n}")


def main() -> None:
    top = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    spec = load_spec("h100-sxm")
    print(f"{'operands':>8} {'method':>11} {'orders':>7} {'by flops':>10} {'by sol':>10} {'gain':>7}")
    for n in range(3, top + 1):
        g = matrix_chain(n)
        t0 = time.perf_counter()
        (r,) = analyse(g)
        t1 = time.perf_counter()
        analyse(g, spec, "sol")
        t2 = time.perf_counter()
        print(f"{n:>8} {r.method:>11} {len(r.orders):>7} {t1 - t0:>9.3f}s {t2 - t1:>9.3f}s "
              f"{r.gain('flops'):>6.2f}x")
    g = solar_io.load(MLA)
    t0 = time.perf_counter()
    reports = analyse(g, spec, "sol")
    t1 = time.perf_counter()
    _, check = apply(g, reports)
    t2 = time.perf_counter()
    print(f"MLA decode example: analyse (3 chains, by SOL on {spec.name}) {t1 - t0:.3f}s; --apply with check "
          f"{t2 - t1:.3f}s ({check.describe()})")


if __name__ == "__main__":
    main()
