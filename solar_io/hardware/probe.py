"""Build a hardware spec for the local CPU from its own facts plus a few measurements.

Theoretical peaks come from Linux's description of the machine (``/proc/cpuinfo``,
``/sys/devices/system/cpu``): physical cores x FMA pipes x SIMD lanes x 2 x clock. Measured
figures (numpy GEMM, and read/copy/triad bandwidth on buffers far larger than the last-level
cache) are recorded separately under ``measured``; the DRAM bandwidth that bounds use is the best
measured pattern, since a virtual machine hides the theoretical one.

Assumptions (written into the spec's notes): 2 FMA pipes per core for x86 AVX/AVX-512 and Arm
NEON cores; AMD Zen 4 (family 0x19 with AVX-512) executes 512-bit instructions on 256-bit
datapaths and Zen 1 (family 0x17, model < 0x30) splits 256-bit AVX into 128-bit halves; the matrix
unit equals the SIMD unit unless Intel AMX is present. When the system reports only a nominal clock
(typical of a VM, which hides turbo) and the measured GEMM proves a higher one, the clock implied by
the measurement is used, so the theoretical peaks are never below a measured rate.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import numpy as np

from solar_io.hardware.cpuinfo import CacheInfo, CpuFacts, Simd, read_cpu_facts, simd_of
from solar_io.hardware.probe_gemm import GemmPlan, Maker, best_time, measure_gemm_plan
from solar_io.hardware.spec import (
    Clock,
    HardwareSpec,
    MeasuredBandwidth,
    MeasuredGemm,
    MemoryLevel,
    Peak,
    Source,
    write_spec,
)

__all__ = [
    "CacheInfo",
    "CpuFacts",
    "ProbeConfig",
    "ProbeError",
    "Simd",
    "choose_clock",
    "measure_bandwidth",
    "measure_gemm",
    "probe",
    "probe_to_file",
    "read_cpu_facts",
    "simd_of",
    "theoretical_peaks",
]

_MIB = 1 << 20


class ProbeError(RuntimeError):
    """The local machine could not be described consistently (e.g. the SIMD model contradicts the
    measured GEMM rate)."""


@dataclass(frozen=True)
class ProbeConfig:
    """Knobs of the probe. The default runs in seconds: GEMM sizes grow from 256 while one run takes
    under 0.2 s, up to 2048, and every measurement keeps the best of 3 to 10 (GEMM) or 3 to 5
    (bandwidth) timed runs, stopping early once a size or pattern has had its time budget (see
    :mod:`solar_io.hardware.probe_gemm`). :meth:`fast` gives a smaller probe for tests and
    :meth:`thorough` a longer one (GEMMs up to 4096, every run taken)."""

    name: str = "local-cpu"
    gemm_sizes: tuple[int, ...] | None = None  # explicit square sizes; None: grown by time (below)
    gemm_start: int = 256
    gemm_cap: int = 2048  # the size of the largest GEMMs in benchmarks/sol_models
    gemm_grow_below_s: float = 0.2
    gemm_runs: int = 10  # most timed runs per size (best is kept)
    gemm_min_runs: int = 3  # fewest; between the two, runs stop after gemm_size_budget_s at a size
    gemm_size_budget_s: float = 0.6
    bandwidth_runs: int = 5  # most timed runs per pattern
    bandwidth_min_runs: int = 3  # fewest; between the two, runs stop after bandwidth_budget_s
    bandwidth_budget_s: float = 1.0
    llc_factor: int = 8  # each bandwidth buffer is at least this many times the last-level cache
    min_buffer_bytes: int = 64 * _MIB
    buffer_bytes: int | None = None  # explicit per-array size; overrides llc_factor/min_buffer_bytes
    threads: int | None = None  # bandwidth threads; default: logical CPUs in the affinity mask
    clock_hz: float | None = None  # override when the clock cannot be read
    root: Path = Path("/")  # where /proc and /sys are read from (tests point this elsewhere)

    @classmethod
    def fast(cls, **overrides: object) -> ProbeConfig:
        """GEMMs of 256 and 512 and two runs each: a probe in a few seconds (buffers stay >= 8x LLC)."""
        params: dict[str, object] = {"gemm_cap": 512, "gemm_runs": 2, "gemm_min_runs": 2,
                                     "bandwidth_runs": 2, "bandwidth_min_runs": 2}
        params.update(overrides)
        return cls(**params)  # type: ignore[arg-type]

    @classmethod
    def thorough(cls, **overrides: object) -> ProbeConfig:
        """GEMMs up to 4096 and every run taken (10 per GEMM size, 5 per bandwidth pattern)."""
        params: dict[str, object] = {"gemm_cap": 4096, "gemm_min_runs": 10, "bandwidth_min_runs": 5}
        params.update(overrides)
        return cls(**params)  # type: ignore[arg-type]

    def gemm_plan(self) -> GemmPlan:
        """The GEMM sizing rule these knobs describe."""
        return GemmPlan(sizes=self.gemm_sizes or None, start=self.gemm_start, cap=self.gemm_cap,
                        grow_below_s=self.gemm_grow_below_s, min_runs=min(self.gemm_min_runs, self.gemm_runs),
                        max_runs=self.gemm_runs, size_budget_s=self.gemm_size_budget_s)


def _fp32_flop_per_cycle(facts: CpuFacts, simd: Simd) -> float:
    """FP32 FLOP per cycle of the whole chip: cores x FMA pipes x lanes x 2."""
    return facts.physical_cores * simd.pipes * (simd.width_bits // 32) * 2.0


# No CPU core runs faster; a higher implied clock means the SIMD model is wrong.
MAX_PLAUSIBLE_CLOCK_HZ = 6.5e9


def choose_clock(facts: CpuFacts, simd: Simd, gemm: Mapping[str, MeasuredGemm]) -> tuple[float, str]:
    """The clock for theoretical peaks: the reported one, raised to what the measured GEMM implies.

    A virtual machine often reports only the nominal clock ('cpu MHz') and hides turbo; a measured
    rate above the model's FLOP per cycle for its dtype (cores x pipes x lanes x 2 for fp32, half for
    fp64, the bf16 factor for bf16) x clock proves the real clock is higher. The implied clock
    (a lower bound on the real boost clock) is then used. An implied clock above 6.5 GHz cannot be
    turbo: it means the SIMD width or pipe count was under-detected, and the probe refuses.
    """
    per_cycle = _fp32_flop_per_cycle(facts, simd)
    per_hz = theoretical_peaks(facts, simd, 1.0)["matrix"]  # each dtype's FLOP per cycle, this model
    implied = 0.0
    for dtype, g in gemm.items():
        if dtype in per_hz and per_hz[dtype].value > 0:
            implied = max(implied, g.flops / per_hz[dtype].value)
    if implied > MAX_PLAUSIBLE_CLOCK_HZ:
        raise ProbeError(
            f"measured GEMM implies a {implied / 1e9:.1f} GHz clock for {simd.isa} {simd.width_bits}-bit x "
            f"{simd.pipes} pipes x {facts.physical_cores} cores: the SIMD model of this CPU is wrong"
        )
    reported = facts.clock_hz
    if reported and reported >= implied:
        return reported, facts.clock_note
    if not reported:
        return implied, ("clock not reported by the system: the lowest clock consistent with the "
                         f"measured GEMM at {per_cycle:g} FP32 FLOP/cycle (a lower bound on the real clock)")
    return implied, (f"reported {reported / 1e9:.3f} GHz ({facts.clock_note}) is below the "
                     f"{implied / 1e9:.3f} GHz implied by the measured GEMM at {per_cycle:g} FP32 "
                     "FLOP/cycle, so the implied clock is used (a lower bound on the real boost clock)")


def theoretical_peaks(facts: CpuFacts, simd: Simd, clock: float) -> dict[str, dict[str, Peak]]:
    """Matrix and vector peaks (FLOP/s) from cores, SIMD model and ``clock``; AMX adds matrix peaks."""
    cores = facts.physical_cores
    fp32 = _fp32_flop_per_cycle(facts, simd) * clock
    base = (f"theoretical: {cores} cores x {simd.pipes} FMA pipes x {{lanes}} lanes x 2 x "
            f"{clock / 1e9:.3f} GHz ({simd.isa}; {simd.note})")
    vector = {
        "fp64": Peak(fp32 / 2, (0,), base.format(lanes=simd.width_bits // 64)),
        "fp32": Peak(fp32, (0,), base.format(lanes=simd.width_bits // 32)),
    }
    for dtype, (factor, why) in simd.extra.items():
        vector[dtype] = Peak(fp32 * factor, (0,), f"theoretical: FP32 SIMD peak x {factor:g} ({why})")
    for dtype in ("bf16", "fp16"):  # no native arithmetic: the values are widened and computed as fp32
        vector.setdefault(dtype, Peak(fp32, (0,), f"theoretical: no {dtype} arithmetic in {simd.isa}: {dtype} "
                                                  "values are widened to fp32 (a shift or F16C) and computed at "
                                                  "most at the FP32 SIMD peak"))
    matrix = {dt: Peak(p.value, p.sources, f"no matrix engine (AMX) detected: equals the SIMD peak; {p.note}")
              for dt, p in vector.items()}
    amx = {"amx_bf16": ("bf16", 1024), "amx_fp16": ("fp16", 1024), "amx_int8": ("int8", 2048)}
    for flag, (dtype, per_cycle) in amx.items():
        if flag in facts.flags:
            matrix[dtype] = Peak(cores * per_cycle * clock, (0,),
                                 f"theoretical: Intel AMX TMUL {per_cycle} {dtype} ops per cycle per core x "
                                 f"{cores} cores x {clock / 1e9:.3f} GHz")
    return {"matrix": matrix, "vector": vector}


def _torch_matmul(np_dtype: type | str) -> tuple[Maker, str] | None:
    """torch's CPU GEMM for ``np_dtype`` when torch is installed (its BLAS may beat numpy's)."""
    try:
        import torch  # an optional extra: the probe works without it
    except ImportError:
        return None
    tdt = {np.float32: torch.float32, np.float64: torch.float64, "bf16": torch.bfloat16}[np_dtype]

    def mm(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> Callable[[], object]:
        ta, tb, tc = (torch.from_numpy(x).to(tdt) for x in (a, b, c))
        return lambda: torch.mm(ta, tb, out=tc)
    return mm, f"torch.mm {torch.__version__}"


def measure_gemm(config: ProbeConfig) -> dict[str, MeasuredGemm]:
    """Best GEMM rate for fp32 and fp64 (and bf16 through torch) over the sizes of
    ``config.gemm_plan()`` and every BLAS at hand (numpy's, and torch's when installed): the fastest
    GEMM anything here can run is what the implied clock (and so the theoretical peaks) must cover."""
    dtypes: list[tuple[str, type, list[tuple[Maker, str]]]] = []
    for dtype, np_dtype in (("fp32", np.float32), ("fp64", np.float64), ("bf16", "bf16")):
        libraries: list[tuple[Maker, str]] = []
        if dtype != "bf16":  # numpy has no bf16
            libraries.append((lambda a, b, c: (lambda: np.matmul(a, b, out=c)), f"numpy.matmul {np.__version__}"))
        extra = _torch_matmul(np_dtype)
        if extra is not None:
            libraries.append(extra)
        if libraries:  # bf16 operands are made in fp32 and cast by torch
            dtypes.append((dtype, np.float32 if dtype == "bf16" else np_dtype, libraries))
    return measure_gemm_plan(dtypes, config.gemm_plan())


def _buffer_bytes(config: ProbeConfig, facts: CpuFacts) -> tuple[int, str]:
    if config.buffer_bytes is not None:
        return config.buffer_bytes, "explicit buffer size"
    llc = max((c.size * c.count for c in facts.caches), default=0)
    want = max(config.llc_factor * llc, config.min_buffer_bytes)
    why = f"{config.llc_factor}x the last-level cache ({llc} bytes)" if llc else "no cache sizes found"
    if facts.mem_available_bytes and 3 * want > facts.mem_available_bytes // 2:
        want = facts.mem_available_bytes // 6
        why += "; capped at 1/6 of available memory (three arrays in half of it)"
    return int(want) // 4096 * 4096, why


def measure_bandwidth(config: ProbeConfig, facts: CpuFacts) -> dict[str, MeasuredBandwidth]:
    """Best read-only, copy and triad bandwidth (STREAM byte counting) with one thread per CPU."""
    nbytes, why = _buffer_bytes(config, facts)
    n = max(nbytes // 8, 1)
    threads = max(1, config.threads or facts.logical_cpus)
    a, b, c = np.zeros(n), np.ones(n), np.full(n, 2.0)
    edges = np.linspace(0, n, threads + 1).astype(int)
    spans = [(int(lo), int(hi)) for lo, hi in zip(edges[:-1], edges[1:], strict=True) if hi > lo]
    budget = (config.bandwidth_runs, config.bandwidth_min_runs, config.bandwidth_budget_s)
    upto = ("" if config.bandwidth_min_runs >= config.bandwidth_runs else
            f" (of at most {config.bandwidth_runs}: runs stop after {config.bandwidth_budget_s:g} s)")
    block = 1 << 15  # triad works in cache-sized blocks so its two numpy passes touch DRAM once

    def read(lo: int, hi: int) -> object:
        return np.add.reduce(b[lo:hi])

    def copy(lo: int, hi: int) -> None:
        np.copyto(a[lo:hi], b[lo:hi])

    def triad(lo: int, hi: int) -> None:
        for s in range(lo, hi, block):
            e = min(s + block, hi)
            np.multiply(c[s:e], 3.0, out=a[s:e])
            np.add(a[s:e], b[s:e], out=a[s:e])

    patterns = {"read": (read, 1, "read-only: numpy.add.reduce over a"),
                "copy": (copy, 2, "copy: a = b (numpy.copyto)"),
                "triad": (triad, 3, "triad: a = b + 3*c in cache-sized blocks")}
    out: dict[str, MeasuredBandwidth] = {}
    with ThreadPoolExecutor(max_workers=len(spans)) as pool:
        for name, (fn, arrays, what) in patterns.items():
            def run(fn: Callable[[int, int], object] = fn) -> None:
                list(pool.map(lambda span: fn(*span), spans))

            run()  # warm-up
            seconds, runs = best_time(run, *budget)
            if name == "read":
                other = _torch_read_time(b, len(spans), budget)
                if other is not None and other[0] < seconds:
                    seconds, runs, what = other
            out[name] = MeasuredBandwidth(
                arrays * n * 8 / seconds, n * 8, (1,), len(spans), runs,
                f"{what}; {arrays} array(s) of {n * 8} bytes ({why}) counted once each, "
                f"{len(spans)} threads, best of {runs} runs{upto}",
            )
    return out


def _torch_read_time(b: np.ndarray, threads: int,
                     budget: tuple[int, int, float]) -> tuple[float, int, str] | None:
    """Best time of torch's own parallel sum over ``b`` when torch is installed (its reduction
    kernels may stream faster than numpy's; the read bandwidth must cover the faster one)."""
    try:
        import torch  # an optional extra: the probe works without it
    except ImportError:
        return None
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        tb = torch.from_numpy(b)
        tb.sum()  # warm-up
        seconds, runs = best_time(tb.sum, *budget)
        return seconds, runs, f"read-only: torch.sum {torch.__version__} over a (faster than numpy)"
    finally:
        torch.set_num_threads(saved)


def _memory_levels(facts: CpuFacts, dram_bw: float, best: str) -> tuple[MemoryLevel, ...]:
    levels = [MemoryLevel(
        "dram", float(facts.mem_total_bytes) if facts.mem_total_bytes else None, dram_bw, (0, 1), kind="DRAM",
        note=(f"capacity: MemTotal from /proc/meminfo; bandwidth: measured, best pattern ({best}); the "
              f"theoretical DRAM bandwidth is not visible to the probe"),
    )]
    for cache in sorted(facts.caches, key=lambda c: -c.level):
        name = f"l{cache.level}d" if cache.type == "Data" else f"l{cache.level}"
        if cache.count == 1:
            per, count = None, None
        else:
            per, count = ("core" if cache.count == facts.physical_cores else "cluster"), cache.count
        levels.append(MemoryLevel(
            name, float(cache.size), None, (0,), kind="SRAM", per=per, count=count,
            note="size from /sys/devices/system/cpu/cpu*/cache (KiB converted); instances counted by "
                 "distinct shared_cpu_list; bandwidth not measured",
        ))
    return tuple(levels)


def probe(config: ProbeConfig | None = None) -> HardwareSpec:
    """Describe the local CPU: theoretical peaks, caches, measured GEMM and bandwidth."""
    config = config or ProbeConfig()
    facts = read_cpu_facts(config.root, config.clock_hz)
    simd = simd_of(facts)
    gemm = measure_gemm(config)
    clock, clock_note = choose_clock(facts, simd, gemm)
    units = theoretical_peaks(facts, simd, clock)
    bandwidth = measure_bandwidth(config, facts)
    best = max(bandwidth, key=lambda k: bandwidth[k].bandwidth)
    notes = (
        f"Theoretical peaks (units) use {facts.physical_cores} physical cores of {facts.logical_cpus} "
        f"logical CPUs in this process's affinity mask, {simd.isa} with an effective "
        f"{simd.width_bits}-bit datapath and {simd.pipes} FMA pipes per core ({simd.note}), at "
        f"{clock / 1e9:.3f} GHz ({clock_note}).",
        "Measured figures are under 'measured'; the DRAM bandwidth is the best measured pattern, not a "
        "theoretical figure. Transcendentals run as instruction sequences on the SIMD units: no special "
        "unit.",
    )
    clock_sources = (0,) if clock == facts.clock_hz else (0, 1)
    return HardwareSpec(
        name=config.name, full_name=f"{facts.model_name} ({facts.physical_cores} cores)", vendor=facts.vendor,
        units=MappingProxyType({k: MappingProxyType(v) for k, v in units.items()}),
        memory=_memory_levels(facts, bandwidth[best].bandwidth, best),
        sources=(
            Source("Local system facts: /proc/cpuinfo, /proc/meminfo, /sys/devices/system/cpu (topology, "
                   "cpufreq, cache)", note=f"{facts.machine}, {facts.logical_cpus} logical CPUs"),
            Source("solar-io hw probe measurements (numpy GEMM; read/copy/triad bandwidth)",
                   note=f"numpy {np.__version__}, Python {platform.python_version()}"),
        ),
        kind="cpu", architecture=f"{facts.machine}, {simd.isa}",
        clock=Clock(clock, clock_sources, clock_note),
        notes=notes, measured_gemm=MappingProxyType(gemm), measured_bandwidth=MappingProxyType(bandwidth),
    )


def probe_to_file(path: str | os.PathLike[str], config: ProbeConfig | None = None) -> HardwareSpec:
    """Run :func:`probe` and write the spec to ``path`` atomically; returns the spec."""
    spec = probe(config)
    write_spec(spec, path)
    return spec
