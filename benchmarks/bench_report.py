"""Corpus report and zero-violation check on this machine, with per-phase times.

Target (issue 10): a report over a corpus of at least 60 problems in under 10 minutes on this
2-core machine. The script probes this CPU (``solar-io hw probe``), runs ``solar-io report`` over
``tests/models`` (the PyTorch corpus, ~100 files) and ``solar-io check-bounds`` over
``benchmarks/sol_models`` (models sized to approach the chip's peaks), and prints the wall time of
each, the per-phase split (capture / bound / measure), the geometric-mean headroom and, for the SOL
models, each model's tightest headroom (fastest run / SOL, which must stay >= 1).

Run: ``.venv/bin/python benchmarks/bench_report.py [OUTDIR]`` (default ``build/bench_report``).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def solar(*args: str) -> tuple[int, str, float]:
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "solar_io", *args], capture_output=True, text=True, cwd=ROOT)
    return res.returncode, res.stdout + res.stderr, time.perf_counter() - t0


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "build" / "bench_report"
    out.mkdir(parents=True, exist_ok=True)
    spec = out / "cpu.yaml"
    rc, text, wall = solar("hw", "probe", "-o", str(spec))
    print(f"probe: {wall:.1f} s ({text.strip().splitlines()[-1] if text.strip() else rc})")

    rc, text, wall = solar("report", "tests/models", "-o", str(out / "corpus"), "--hw", str(spec))
    corpus = yaml.safe_load((out / "corpus" / "report.yaml").read_text())
    n = len(corpus["cases"])
    print(f"report over tests/models: {n} models in {wall:.1f} s (target: >= 60 models under 600 s), exit {rc}")
    print("  " + "\n  ".join(line for line in text.splitlines() if line.startswith(("time:", f"{n} models"))))
    for s in corpus["summary"]:
        print(f"  {s['folder']}: geomean headroom unfused {s['geomean_headroom_unfused']:.3g}x, fused "
              f"{s['geomean_headroom_fused']:.3g}x, cache-aware {s['geomean_headroom_cache_aware']:.3g}x")

    rc, text, wall = solar("check-bounds", "benchmarks/sol_models", "--hw", str(spec), "-o", str(out / "sol.yaml"))
    print(f"check-bounds over benchmarks/sol_models: {wall:.1f} s, exit {rc} (0 = no violation)")
    print("  " + "\n  ".join(line for line in text.splitlines() if line.startswith(("time:", "VIOLATION"))
                             or "models:" in line))
    print(f"  {'model':<18} {'fastest':>10} {'SOL unfused':>12} {'fused':>10} {'cache-aware':>12} "
          f"{'min/SOL':>8}  bound by")
    for c in yaml.safe_load((out / "sol.yaml").read_text())["cases"]:
        sols = [c[k] for k in ("sol_unfused_s", "sol_fused_s", "sol_cache_aware_s") if c.get(k)]
        tight = c["measured_min_s"] / max(sols) if sols and c.get("measured_min_s") else float("nan")
        print(f"  {c['model']:<18} {c['measured_min_s'] or 0:10.3e} {c['sol_unfused_s'] or 0:12.3e} "
              f"{c['sol_fused_s'] or 0:10.3e} {c['sol_cache_aware_s'] or 0:12.3e} {tight:8.2f}  {c['bottleneck']}")


if __name__ == "__main__":
    main()
