"""Loop-IR benchmarks: numba execution vs numpy/torch, and trace + lift of a 24-layer model.

Prints figures; not a timed test. Run: ``python benchmarks/bench_loopir.py [--quick]``.

1. The IR's matmul, conv2d and masked attention kernels (examples/loopir) executed with
   numba at validation sizes, against the same op in numpy (and torch when installed):
   time per call after compilation, and the ratio numba / numpy.
2. ``capture_file`` of examples/loopir/transformer.py (24 layers) without validation:
   tracing + lifting + graph checks; the target is under 5 s.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

from solar_io import graph_metrics
from solar_io.frontends.loopir import capture_file
from solar_io.frontends.loopir.capture import load_program
from solar_io.frontends.loopir.state import using

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples" / "loopir"
TARGET_S = 5.0


def best(fn, repeat: int) -> float:
    """Best wall time of ``repeat`` calls (seconds)."""
    out = math.inf
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - t)
    return out


def timed_kernel(fn, repeat: int) -> tuple[float, float]:
    """(first call incl. compilation, best later call) of an IR kernel call, with numba."""
    with using(tracer=None, jit=True):
        t = time.perf_counter()
        fn()
        first = time.perf_counter() - t
        return first, best(fn, repeat)


def np_conv(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    n, c, h, wd = x.shape
    k, _, r, s = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    p, q = (h + 2 * pad - r) // stride + 1, (wd + 2 * pad - s) // stride + 1
    win = np.lib.stride_tricks.sliding_window_view(xp, (r, s), axis=(2, 3))[:, :, ::stride, ::stride][:, :, :p, :q]
    return np.einsum("ncpqrs,kcrs->nkpq", win, w, optimize=True)


def np_attention(q, k, v, mask, scale):
    sc = np.einsum("bshe,bthe->bhst", q, k) * scale
    sc = np.where(mask, sc, -np.inf)
    sc = np.exp(sc - sc.max(-1, keepdims=True))
    p = sc / sc.sum(-1, keepdims=True)
    return np.einsum("bhst,bthe->bshe", p, v)


def bench_execution(repeat: int, quick: bool) -> list[tuple[str, float, float, float, float | None]]:
    rng = np.random.default_rng(0)
    f32 = np.float32
    rows = []
    try:
        import torch
    except ImportError:
        torch = None

    mm = load_program(EX / "matmul.py")
    n = 128 if quick else 256
    a, b = rng.standard_normal((n, n)).astype(f32), rng.standard_normal((n, n)).astype(f32)
    first, t_ir = timed_kernel(lambda: mm.matmul(a, b), repeat)
    t_np = best(lambda: a @ b, repeat)
    t_th = best(lambda: torch.from_numpy(a) @ torch.from_numpy(b), repeat) if torch else None
    rows.append((f"matmul {n}x{n}x{n}", first, t_ir, t_np, t_th))

    cv = load_program(EX / "conv2d.py")
    shape = (2, 8, 16, 16) if quick else (4, 16, 32, 32)
    x = rng.standard_normal(shape).astype(f32)
    w = rng.standard_normal((2 * shape[1], shape[1], 3, 3)).astype(f32)
    p = shape[2] // 2
    first, t_ir = timed_kernel(lambda: cv.conv2d(x, w, P=p, Q=p), repeat)
    t_np = best(lambda: np_conv(x, w, 2, 1), repeat)
    t_th = best(lambda: torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), stride=2, padding=1),
                repeat) if torch else None
    rows.append((f"conv2d {shape} k{w.shape[0]} 3x3/2", first, t_ir, t_np, t_th))

    tf = load_program(EX / "transformer.py")
    bsz, s, h, e = (1, 64, 2, 32) if quick else (2, 128, 4, 64)
    q, k, v = (rng.standard_normal((bsz, s, h, e)).astype(f32) for _ in range(3))
    mask = np.tril(np.ones((s, s), dtype=bool))
    scale = 1 / math.sqrt(e)
    first, t_ir = timed_kernel(lambda: tf.attention(q, k, v, mask, scale), repeat)
    t_np = best(lambda: np_attention(q, k, v, mask, scale), repeat)
    t_th = None
    if torch:
        tq, tk, tv = (torch.from_numpy(z).transpose(1, 2) for z in (q, k, v))
        t_th = best(lambda: torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True), repeat)
    rows.append((f"attention b{bsz} s{s} h{h} e{e} causal", first, t_ir, t_np, t_th))
    return rows


def bench_lift() -> tuple[float, int, float]:
    t = time.perf_counter()
    g = capture_file(EX / "transformer.py", validate=False)
    dt = time.perf_counter() - t
    return dt, len(g.nodes), graph_metrics(g).macs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    args = ap.parse_args(argv)
    repeat = 3 if args.quick else 5
    print(f"numba execution of IR kernels (best of {repeat}, after compilation) vs numpy / torch")
    print(f"{'kernel':38} {'compile+1st':>11} {'numba':>10} {'numpy':>10} {'ratio':>7} {'torch':>10} {'ratio':>7}")
    for name, first, t_ir, t_np, t_th in bench_execution(repeat, args.quick):
        th = f"{t_th * 1e3:8.2f}ms {t_ir / t_th:7.1f}" if t_th else f"{'-':>10} {'-':>7}"
        print(f"{name:38} {first:10.2f}s {t_ir * 1e3:8.2f}ms {t_np * 1e3:8.2f}ms {t_ir / t_np:7.1f} {th}")
    dt, nodes, macs = bench_lift()
    ok = dt < TARGET_S
    print(f"\ntrace + lift of a 24-layer transformer: {dt:.2f} s for {nodes} nodes ({macs / 1e9:.1f} GMAC); "
          f"target < {TARGET_S:.0f} s: {'ok' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
