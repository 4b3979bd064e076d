"""The probe's GEMM measurement: square GEMMs sized by a time budget, best of several runs.

Why the measured rate must not fall short: the probe's GEMM rate sets the clock of the theoretical
peaks (:func:`solar_io.hardware.probe.choose_clock` raises the reported clock to the one the
fastest measured GEMM proves; a VM hides its boost clock), so a probe that *under*-measures makes
every peak too low and every bound too high, and a real kernel could then beat its bound. Three
things keep the rate as high as anything here can run:

- *Best of N.* Each size keeps its fastest timed run, after an untimed warm-up: noise (other
  processes, page faults, thread start) only ever slows a run down, so the minimum time is the one
  closest to what the chip does. At least ``min_runs`` runs are taken at every size.
- *Every BLAS at hand* (numpy's, torch's when installed) at every size, the fastest kept.
- *Sizes up to the ones that matter.* Sizes double from ``start`` (256) to ``cap`` (2048 by
  default: the largest GEMMs of the zero-violation check, benchmarks/sol_models, so those run at a
  size the probe measured), and every size on the way is measured (on this 2-core VM the fp64 best
  was at 256, the fp32 one at 512 or 2048). The growth stops early only where a run takes long
  (``grow_below_s``, or the next size's 8x the work expected over ``next_run_below_s``): a rate
  that low is far below the chip's SIMD units.

What the time budget buys: a dtype that runs in software never reaches the large sizes (one bf16
2048^3 ``torch.mm`` took 58.6 s on an AVX2 CPU without bf16 units, and the old probe ran it 11
times), and a large size stops after ``size_budget_s`` of timed runs once ``min_runs`` are done.
Such a dtype's note says it runs in software (best rate below ``EMULATED_BELOW`` of fp32's);
a kernel in it runs at the same software speed, far below any peak, so its low rate decides nothing.
``--thorough`` raises the cap to 4096 and takes every run.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from solar_io.hardware.spec import MeasuredGemm

__all__ = ["EMULATED_BELOW", "GemmPlan", "Maker", "best_time", "measure_gemm_plan"]

# A dtype whose best GEMM is slower than this fraction of the best fp32 GEMM runs in software (a note
# only): native fp64 runs at about 1/2 of fp32, native bf16 at 1x or more; software bf16 far below.
EMULATED_BELOW = 1 / 16

Run = Callable[[], object]
Maker = Callable[[np.ndarray, np.ndarray, np.ndarray], Run]


@dataclass(frozen=True)
class GemmPlan:
    """How the GEMM sizes and runs are chosen.

    ``sizes`` set: exactly those sizes. Otherwise sizes double from ``start`` while one run takes
    less than ``grow_below_s`` and the next (8x the work) is expected to take less than
    ``next_run_below_s``, up to ``cap``. At each size at least ``min_runs`` and at most
    ``max_runs`` timed runs are taken (after one warm-up); once ``min_runs`` are done the runs stop
    when ``size_budget_s`` seconds of timed runs have been spent at that size.
    """

    sizes: tuple[int, ...] | None = None
    start: int = 256
    cap: int = 2048
    grow_below_s: float = 0.2
    min_runs: int = 3
    max_runs: int = 10
    size_budget_s: float = 0.6
    next_run_below_s: float = 1.0

    def grows_after(self, seconds: float) -> bool:
        """Whether a size whose fastest run took ``seconds`` is followed by the next, twice as large
        (8x the work): the run was short, and the next one is expected to stay short."""
        return seconds < self.grow_below_s and 8 * seconds < self.next_run_below_s

    def describe(self) -> str:
        """The sizing rule in words, for the spec's notes."""
        if self.sizes:
            where = f"sizes {list(self.sizes)}"
        else:
            where = (f"sizes doubling from {self.start} while one run took < {self.grow_below_s:g} s "
                     f"and the next was expected to take < {self.next_run_below_s:g} s, up to {self.cap}")
        if self.min_runs >= self.max_runs:
            runs = f"best of {self.max_runs} runs per size"
        else:
            runs = (f"best of {self.min_runs}-{self.max_runs} runs per size (runs stop after "
                    f"{self.size_budget_s:g} s at a size)")
        return f"n x n x n, {where}, {runs}"


def best_time(fn: Run, runs: int, min_runs: int | None = None, budget_s: float = float("inf")) -> tuple[float, int]:
    """Fastest of at most ``runs`` timed calls of ``fn`` and how many were made: at least
    ``min_runs`` (default: all ``runs``), then the calls stop once ``budget_s`` seconds are spent."""
    least = runs if min_runs is None else min(min_runs, runs)
    best, spent, done = float("inf"), 0.0, 0
    while done < runs and (done < least or spent < budget_s):
        t0 = time.perf_counter()
        fn()
        seconds = time.perf_counter() - t0
        best, spent, done = min(best, seconds), spent + seconds, done + 1
    return best, done


@dataclass
class _Best:
    rate: float = 0.0
    size: int = 0
    runs: int = 0
    library: str = ""


def _operands(rng: np.random.Generator, n: int, host: type) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a = rng.standard_normal((n, n)).astype(host)
    b = rng.standard_normal((n, n)).astype(host)
    return a, b, np.empty((n, n), dtype=host)


def _sizes(plan: GemmPlan) -> list[int]:
    if plan.sizes:
        return list(plan.sizes)
    sizes, n = [], plan.start
    while n <= plan.cap:
        sizes.append(n)
        n *= 2
    return sizes or [plan.cap]


def measure_gemm_plan(dtypes: list[tuple[str, type, list[tuple[Maker, str]]]], plan: GemmPlan,
                      seed: int = 0) -> dict[str, MeasuredGemm]:
    """Best GEMM rate per dtype over its libraries, sized by ``plan``.

    ``dtypes`` lists (name, host numpy dtype of the operands, [(maker, library name)]); fp32, when
    present, must come first: it is the yardstick that recognises an emulated dtype.
    """
    rng = np.random.default_rng(seed)
    out: dict[str, MeasuredGemm] = {}
    fp32_rate = 0.0
    for dtype, host, libraries in dtypes:
        best, operands = _Best(), {}  # operands of each size, shared by the libraries
        for make, lib in libraries:
            for n in _sizes(plan):
                if n not in operands:
                    operands[n] = _operands(rng, n, host)
                run = make(*operands[n])
                run()  # warm-up: BLAS threads, page faults, packing buffers
                seconds, runs = best_time(run, plan.max_runs, plan.min_runs, plan.size_budget_s)
                rate = 2.0 * n**3 / seconds
                if rate > best.rate:
                    best = _Best(rate, n, runs, lib)
                if not plan.sizes and not plan.grows_after(seconds):
                    break
        if dtype == "fp32":
            fp32_rate = best.rate
        names = " and ".join(lib for _, lib in libraries)
        note = f"best of {names}, {plan.describe()}; fastest: {best.library} at n = {best.size}"
        if fp32_rate and dtype != "fp32" and best.rate < EMULATED_BELOW * fp32_rate:
            note += (f"; below {EMULATED_BELOW:g}x the fp32 GEMM: {dtype} runs in software here (no {dtype} "
                     "GEMM units), and its sizes stopped growing where one run took long")
        out[dtype] = MeasuredGemm(best.rate, best.size, (1,), best.runs, note)
    return out
