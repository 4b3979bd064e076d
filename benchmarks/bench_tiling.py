"""Time of the cache-aware bound (``solar-io bound --cache-aware``) and of single-einsum ILPs.

Target (issue 8): one einsum's ILP under 1 s; identical einsums solved once; the cache-aware bound
of a 32-layer transformer graph under 60 s; (issue 3) large graphs bounded quickly. The graph is
``synthetic.transformer_like(32 * 7)`` (7 nodes a layer). Phases: ``roofline`` (metrics and the
unfused/fused bound), ``struct.`` (alias view and structural keys), ``part.`` (segment analysis:
einsum and chain ILPs, each distinct segment once, and the dynamic program). ``ILPs``: distinct
einsum ILPs solved; ``chains``: distinct chain ILPs; ``segs``/``reused``: distinct candidate groups
analysed / answered from an identical one. Caches are cleared before each row (cold runs).
The scale table times ``bound(..., cache_aware=True)`` on synthetic graphs of 10k-100k nodes and on
graph files given with ``--graph`` (e.g. a 32-layer Llama-3-8B capture, see bench_capture.py).
Run: ``.venv/bin/python benchmarks/bench_tiling.py [layers] [capacities...] [--scale N ...] [--graph FILE ...]``.
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
from solar_io.backends.tiling.segments import clear_chain_cache  # noqa: E402

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
    print(f"{'capacity':>10} {'roofline s':>10} {'struct. s':>9} {'part. s':>8} {'total s':>8} {'ILPs':>5} "
          f"{'chains':>6} {'segs':>5} {'reused':>7} {'groups':>6} {'fused us':>9} {'cache us':>9} {'unfused us':>10}")
    for cap in caps:
        _cold()
        t0 = time.perf_counter()
        plain = bound(g, "h100-pcie")
        t_roof = time.perf_counter() - t0
        _cold()
        t0 = time.perf_counter()
        r = bound(g, "h100-pcie", cache_aware=True, capacity=cap)
        total = time.perf_counter() - t0
        c = r.cache
        assert c is not None and r.cache_aware.time is not None
        print(f"{cap or 'spec':>10} {t_roof:>10.2f} {c.phases['structure']:>9.2f} {c.phases['partition']:>8.2f} "
              f"{total:>8.2f} {c.ilps_solved:>5} {c.chain_ilps:>6} {c.segments_solved:>5} {c.segments_reused:>7} "
              f"{len(c.groups):>6} {plain.fused.time * 1e6:>9.1f} {r.cache_aware.time * 1e6:>9.1f} "
              f"{plain.unfused.time * 1e6:>10.1f}")


def _cold() -> None:
    clear_cache()
    clear_chain_cache()


def scale(sizes: list[int], files: list[str]) -> None:
    """Cache-aware bound time on large graphs (h100-pcie, the spec's capacity), cold caches."""
    print(f"\n{'graph':>28} {'nodes':>7} {'roofline s':>10} {'cache-aware s':>13} {'ILPs':>5} {'chains':>6} "
          f"{'segs':>5} {'fallbacks':>9} {'cache/fused':>11}")
    graphs = [(f"synthetic-{n}", lambda n=n: transformer_like(n)) for n in sizes]
    graphs += [(Path(f).name, lambda f=f: solar_io.load(f)) for f in files]
    for name, make in graphs:
        g = make()
        _cold()
        t0 = time.perf_counter()
        plain = bound(g, "h100-pcie")
        t_roof = time.perf_counter() - t0
        _cold()
        t0 = time.perf_counter()
        r = bound(g, "h100-pcie", cache_aware=True)
        total = time.perf_counter() - t0
        c = r.cache
        print(f"{name:>28} {len(g.nodes):>7} {t_roof:>10.2f} {total:>13.2f} {c.ilps_solved:>5} {c.chain_ilps:>6} "
              f"{c.segments_solved:>5} {len(c.fallbacks):>9} {r.cache_aware.time / plain.fused.time:>11.3f}")


def main(argv: list[str]) -> None:
    files = [argv[i + 1] for i, a in enumerate(argv) if a == "--graph"]
    sizes = [int(argv[i + 1]) for i, a in enumerate(argv) if a == "--scale"]
    rest = [a for i, a in enumerate(argv) if a not in ("--graph", "--scale") and (i == 0 or argv[i - 1] not in
                                                                                   ("--graph", "--scale"))]
    layers = int(rest[0]) if rest else 32
    caps: list[str | None] = list(rest[1:]) or [None, "4MiB", "256KiB"]
    single_einsums()
    graph(layers, caps)
    scale(sizes or [10_000, 30_000, 100_000], files)


if __name__ == "__main__":
    main(sys.argv[1:])
