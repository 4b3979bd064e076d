"""Sweeps and what-ifs: wall time of a model sweep per executor, and of a 10,000-point hardware what-if.

1. A sweep of ``examples/models/sweep_transformer.py`` (a bf16 transformer block) over a
   ``batch x seq`` grid of ``--points`` points (default 256 = 16 x 16: batch 1..16, seq
   128..2048 in steps of 128) on four chips (b200, h100-pcie, a6000, thor): every point is
   re-captured (torch.export on meta tensors) and bounded (unfused and fused). Timed with the local
   executor at 1 worker (in-process) and 2 workers, and with the Ray executor on a local Ray
   instance of 2 CPUs (its start-up is timed apart). ``s/point`` is wall / points; the scaling rule
   is wall ~= points * t_point / workers plus the workers' start-up (imports).
2. A what-if on the block's graph (captured once at batch 8, seq 1024): dram_bw 0.25x..4x x peak
   0.25x..4x, 100 x 100 = 10,000 hardware points on one chip. ``evaluate`` is the vectorised bound
   alone; ``table`` builds the 20,000 rows as well (``run_whatif``), then the files and plots the
   command writes are timed; ``loop`` is the backend called on
   a scaled spec per point, timed on 50 points and extrapolated, for comparison. Target: < 10 s.

Run: ``.venv/bin/python benchmarks/bench_sweep.py [--points 256] [--no-ray] [--skip-sweep]``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "examples" / "models" / "sweep_transformer.py"
CHIPS = ["b200", "h100-pcie", "a6000", "thor"]


def _grid(points: int) -> dict[str, list[int]]:
    side = max(1, round(math.sqrt(points)))
    other = max(1, points // side)
    return {"batch": list(range(1, side + 1)), "seq": [128 * k for k in range(1, other + 1)]}


def bench_sweep(points: int, ray: bool) -> None:
    from solar_io.dse.sweep import run_sweep

    params = _grid(points)
    n = len(params["batch"]) * len(params["seq"])
    print(f"sweep of {MODEL.name}: {n} points (batch 1..{params['batch'][-1]} x seq 128..{params['seq'][-1]}) "
          f"on {len(CHIPS)} chips")
    print(f"{'executor':<24} {'wall s':>8} {'s/point':>8} {'rows':>6} {'failed':>6}")
    runs: list[tuple[str, dict]] = [("local, 1 worker", {"jobs": 1}), ("local, 2 workers", {"jobs": 2})]
    if ray:
        runs.append(("ray, 2 CPUs", {"executor": "ray", "jobs": 2}))
    tables = []
    for name, kw in runs:
        if kw.get("executor") == "ray":  # started only now: its daemons would share the CPUs
            import logging

            import ray as ray_mod

            t0 = time.perf_counter()
            ray_mod.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
            print(f"{'(ray start-up)':<24} {time.perf_counter() - t0:>8.1f}")
        t0 = time.perf_counter()
        result = run_sweep(MODEL, params, CHIPS, progress=False, **kw)
        wall = time.perf_counter() - t0
        tables.append(result.rows)
        print(f"{name:<24} {wall:>8.1f} {wall / n:>8.3f} {len(result.rows):>6} {len(result.failures):>6}")
    print(f"identical tables across executors: {all(t == tables[0] for t in tables)}")


def bench_whatif() -> None:
    from solar_io.backends.roofline import bound
    from solar_io.cli.sweep import write_report
    from solar_io.dse.sweep import bind_source
    from solar_io.dse.whatif import evaluate, hardware_grid, parse_vary, prepare, run_whatif, scaled_spec
    from solar_io.frontends.torch import capture_file
    from solar_io.hardware import load_spec

    tmp = ROOT / "build" / "bench_sweep"
    tmp.mkdir(parents=True, exist_ok=True)
    src = tmp / MODEL.name
    src.write_text(bind_source(MODEL.read_text(), MODEL.name, {"batch": 8, "seq": 1024}))
    g = capture_file(src, validate=False)
    varies = ["dram_bw=0.25x..4x:100", "peak=0.25x..4x:100"]
    _, scales = hardware_grid([parse_vary(v) for v in varies])
    spec = load_spec("h100-sxm")
    t0 = time.perf_counter()
    model = prepare(g, spec)
    t_prepare = time.perf_counter() - t0
    t0 = time.perf_counter()
    ev = evaluate(model, scales)
    t_eval = time.perf_counter() - t0
    t0 = time.perf_counter()
    result = run_whatif(g, ["h100-sxm"], varies)
    t_table = time.perf_counter() - t0
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        write_report("what-if", result, tmp / "whatif", plot=True)
    t_files = time.perf_counter() - t0
    sample = 50
    t0 = time.perf_counter()
    for i in range(sample):
        bound(g, scaled_spec(spec, {k: float(v[i]) for k, v in scales.items()}))
    t_loop = (time.perf_counter() - t0) / sample * ev.unfused.size
    print(f"what-if on {g.name} ({len(g.nodes)} nodes, {model.fixed.shape[0]} distinct), h100-sxm, "
          f"{ev.unfused.size} hardware points:")
    print(f"  prepare (one bound) {t_prepare:.3f} s, evaluate {t_eval:.3f} s, table of {len(result.rows)} rows "
          f"{t_table:.2f} s, CSV + YAML + plots + regime shifts {t_files:.2f} s; backend loop (extrapolated "
          f"from {sample}) {t_loop:.1f} s; fused SOL range {np.min(ev.fused):.3g}..{np.max(ev.fused):.3g} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=256)
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--skip-sweep", action="store_true")
    args = ap.parse_args()
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs "
          "(times are wall clock: other processes on the machine stretch them)")
    bench_whatif()
    if not args.skip_sweep:
        bench_sweep(args.points, not args.no_ray)
    print(f"load average at end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
