"""Load + validate and dump times of synthetic graphs at 10k, 30k and 100k nodes.

Target (issue 2): 100,000 nodes load + validate < 10 s and dump < 10 s on a 2-core
machine, growing linearly. Run: ``.venv/bin/python benchmarks/bench_io.py [sizes...]``.
"""

from __future__ import annotations

import gc
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from synthetic import transformer_like  # noqa: E402

import solar_io  # noqa: E402


def main(sizes: list[int]) -> None:
    print(f"{'nodes':>8} {'MB':>7} {'dump s':>8} {'load+validate s':>16} {'metrics s':>10} {'us/node load':>13}")
    for n in sizes:
        g = transformer_like(n)
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "g.yaml"
            gc.collect()
            t0 = time.perf_counter()
            solar_io.dump(g, path)
            t_dump = time.perf_counter() - t0
            size = path.stat().st_size / 1e6
            gc.collect()
            t0 = time.perf_counter()
            g2 = solar_io.load(path)
            t_load = time.perf_counter() - t0
            assert g2 == g
            t0 = time.perf_counter()
            solar_io.graph_metrics(g2)
            t_metrics = time.perf_counter() - t0
        print(f"{len(g.nodes):>8} {size:>7.1f} {t_dump:>8.2f} {t_load:>16.2f} {t_metrics:>10.2f} "
              f"{1e6 * t_load / len(g.nodes):>13.1f}")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [10_000, 30_000, 100_000])
