"""Time of the cache-aware bound (``solar-io bound --cache-aware``) and of single-einsum ILPs.

Target (issue 8): one einsum's ILP under 1 s; identical einsums solved once; the cache-aware bound
of a 32-layer transformer graph under 60 s. The graph is ``synthetic.transformer_like(32 * 7)``
(7 nodes a layer). Phases: ``roofline`` (metrics and the unfused/fused bound), ``einsum ILPs`` (one
per node, cached by shape; ``ILPs`` distinct ones solved, ``hits`` answered from the cache),
``partition`` (fused-chain ILPs, ``chains`` distinct ones solved, and the dynamic program). Caches are
cleared before each row, so each row is a cold run.
Run: ``.venv/bin/python benchmarks/bench_tiling.py [layers] [capacities...]``.
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from synthetic import transformer_like  # noqa: E402

import solar_io  # noqa: E402
from solar_io.backends.roofline import bound  # noqa: E402
from solar_io.backends.tiling import clear_cache, einsum_of, solve  # noqa: E402
from solar_io.backends.tiling.curve import capacities  # noqa: E402
from solar_io.backends.tiling.ilp import STATS  # noqa: E402

warnings.filterwarnings("ignore", category=DeprecationWarning)


def single_einsums() -> None:
    """The slowest single ILP over a Q(S) curve of each representative einsum."""
    root = Path(__file__).parent.parent / "examples" / "graphs"
    cases = []
    conv = solar_io.load(root / "conv2d.yaml")
    cases.append(einsum_of(conv, conv.node_map["conv"]))
    att = solar_io.load(root / "attention.yaml")
    cases += [einsum_of(att, att.node_map[n]) for n in ("q_proj", "qk", "pv", "softmax_max")]
    tl = transformer_like(7)
    cases += [einsum_of(tl, n) for n in tl.nodes[:5]]
    print(f"{'einsum':>12} {'ILPs':>5} {'max s':>7} {'mean s':>7}")
    for e in cases:
        assert e is not None
        clear_cache()
        times = []
        for cap in capacities(e, 10):
            t0 = time.perf_counter()
            solve(e, cap)
            times.append(time.perf_counter() - t0)
        print(f"{e.name:>12} {len(times):>5} {max(times):>7.3f} {sum(times) / len(times):>7.3f}")


def graph(layers: int, caps: list[str | None]) -> None:
    g = transformer_like(layers * 7)
    print(f"\n{g.name}: {len(g.nodes)} nodes ({layers} layers) on h100-pcie")
    print(f"{'capacity':>10} {'roofline s':>10} {'ILPs s':>7} {'part. s':>8} {'total s':>8} {'ILPs':>5} "
          f"{'hits':>5} {'chains':>6} {'groups':>6} {'fused us':>9} {'cache us':>9} {'unfused us':>10}")
    for cap in caps:
        clear_cache()
        t0 = time.perf_counter()
        plain = bound(g, "h100-pcie")
        t_roof = time.perf_counter() - t0
        clear_cache()
        t0 = time.perf_counter()
        r = bound(g, "h100-pcie", cache_aware=True, capacity=cap)
        total = time.perf_counter() - t0
        c = r.cache
        assert c is not None and r.cache_aware.time is not None
        print(f"{cap or 'spec':>10} {t_roof:>10.2f} {c.phases['einsum ILPs']:>7.2f} {c.phases['partition']:>8.2f} "
              f"{total:>8.2f} {STATS['solved']:>5} {STATS['hits']:>5} {c.chain_ilps:>6} {len(c.groups):>6} "
              f"{plain.fused.time * 1e6:>9.1f} {r.cache_aware.time * 1e6:>9.1f} {plain.unfused.time * 1e6:>10.1f}")


def main(argv: list[str]) -> None:
    layers = int(argv[0]) if argv else 32
    caps: list[str | None] = list(argv[1:]) or [None, "4MiB", "256KiB"]
    single_einsums()
    graph(layers, caps)


if __name__ == "__main__":
    main(sys.argv[1:])
