"""Time of ``solar_io.bound`` on synthetic transformer-like graphs of 10k, 30k and 100k nodes.

Target (issue 3): the bound of a 100,000-node graph in under 5 s on a 2-core machine, growing
linearly. Columns: ``metrics`` is ``graph_metrics`` alone (the core's work and traffic counts);
``bound`` is the whole ``solar_io.bound`` call (metrics included) on one chip; ``+inverse`` the same
with a target latency; ``4 chips`` is ``bound_many`` on four chips (metrics computed once);
``yaml`` renders every node of the one-chip report; ``cache-aware`` is the bound with the cache-aware
fidelity too (the default of ``solar-io bound``; tiling caches emptied first, issue 8). The graph is
built in memory (loading a file is ``benchmarks/bench_io.py``).
Run: ``.venv/bin/python benchmarks/bench_bound.py [sizes...]``.
"""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from synthetic import transformer_like  # noqa: E402

import solar_io  # noqa: E402
from solar_io.backends import bound_many  # noqa: E402
from solar_io.backends.roofline import to_yaml  # noqa: E402
from solar_io.backends.tiling import clear_cache, clear_chain_cache  # noqa: E402


def _timed(fn):  # noqa: ANN001, ANN202
    gc.collect()
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main(sizes: list[int]) -> None:
    print(f"{'nodes':>8} {'metrics s':>10} {'bound s':>8} {'+inverse s':>11} {'4 chips s':>10} {'yaml s':>7} "
          f"{'us/node':>8} {'cache-aware s':>13}")
    for n in sizes:
        g = transformer_like(n)
        _, t_metrics = _timed(lambda g=g: solar_io.graph_metrics(g))
        r, t_bound = _timed(lambda g=g: solar_io.bound(g, "h100"))
        _, t_inverse = _timed(lambda g=g: solar_io.bound(g, "h100", target_latency="10ms"))
        _, t_many = _timed(lambda g=g: bound_many(g, ["b200", "h100-pcie", "a6000", "thor"]))
        _, t_yaml = _timed(lambda r=r: to_yaml([r]))
        clear_cache()
        clear_chain_cache()
        _, t_cache = _timed(lambda g=g: solar_io.bound(g, "h100", cache_aware=True))
        print(f"{len(g.nodes):>8} {t_metrics:>10.2f} {t_bound:>8.2f} {t_inverse:>11.2f} {t_many:>10.2f} "
              f"{t_yaml:>7.2f} {1e6 * t_bound / len(g.nodes):>8.1f} {t_cache:>13.2f}")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [10_000, 30_000, 100_000])
