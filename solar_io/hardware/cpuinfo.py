"""What Linux says about the local CPU, and the SIMD model used for its theoretical peaks.

Facts come from ``/proc/cpuinfo``, ``/proc/meminfo`` and ``/sys/devices/system/cpu`` (topology,
cpufreq, cache) under a configurable root, so tests can feed a fake tree. :func:`simd_of` turns ISA
flags into an effective datapath width and FMA pipe count, with a small table of known cores.
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

__all__ = ["CacheInfo", "CpuFacts", "Simd", "read_cpu_facts", "simd_of"]


@dataclass(frozen=True)
class CacheInfo:
    """One cache level: ``size`` bytes per instance, ``count`` instances seen by this process."""

    level: int
    type: str
    size: int
    count: int


@dataclass(frozen=True)
class CpuFacts:
    """What Linux says about the CPUs this process may run on."""

    machine: str
    vendor: str
    model_name: str
    family: int | None
    model: int | None
    logical_cpus: int
    physical_cores: int
    flags: frozenset[str]
    clock_hz: float | None
    clock_note: str
    caches: tuple[CacheInfo, ...] = ()
    mem_total_bytes: int | None = None
    mem_available_bytes: int | None = None
    sve_bits: int | None = None


@dataclass(frozen=True)
class Simd:
    """Effective SIMD datapath: ``width_bits`` per FMA pipe, ``pipes`` FMA pipes per core."""

    isa: str
    width_bits: int
    pipes: int
    note: str
    extra: Mapping[str, tuple[float, str]] = field(default_factory=dict)  # dtype -> (x fp32, why)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def _cpu_list(text: str) -> set[int]:
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-")
            out.update(range(int(lo), int(hi) + 1))
        elif part:
            out.add(int(part))
    return out


def _size_bytes(text: str) -> int:
    m = re.fullmatch(r"(\d+)\s*([KMG]?)", text.strip().upper())
    if not m:
        raise ValueError(f"cannot parse cache size {text!r}")
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)]


def _cpuinfo_blocks(text: str) -> list[dict[str, str]]:
    blocks = []
    for chunk in re.split(r"\n\s*\n", text):
        block = {}
        for line in chunk.splitlines():
            if ":" in line:
                key, _, value = line.partition(":")
                block[key.strip().lower()] = value.strip()
        if block:
            blocks.append(block)
    return blocks


def _affinity(root: Path, blocks: list[dict[str, str]]) -> set[int]:
    if root == Path("/") and hasattr(os, "sched_getaffinity"):
        return set(os.sched_getaffinity(0))
    online = _read(root / "sys/devices/system/cpu/online")
    if online:
        return _cpu_list(online)
    return {int(b["processor"]) for b in blocks if b.get("processor", "").isdigit()} or {0}


def read_cpu_facts(root: Path = Path("/"), clock_hz: float | None = None) -> CpuFacts:
    """Collect core count, ISA flags, clock, caches and memory size from ``root``'s /proc and /sys."""
    blocks = _cpuinfo_blocks(_read(root / "proc/cpuinfo") or "")
    cpus = _affinity(root, blocks)
    by_cpu = {int(b["processor"]): b for b in blocks if b.get("processor", "").isdigit()}
    mine = [by_cpu[c] for c in sorted(cpus) if c in by_cpu] or blocks[:1] or [{}]
    first = mine[0]
    sysdir = root / "sys/devices/system/cpu"

    cores: set[tuple[str, str]] = set()
    for c in cpus:
        pkg = _read(sysdir / f"cpu{c}/topology/physical_package_id")
        core = _read(sysdir / f"cpu{c}/topology/core_id")
        if pkg is None or core is None:
            info = by_cpu.get(c, {})
            pkg, core = info.get("physical id"), info.get("core id")
        cores.add((pkg, core) if pkg is not None and core is not None else ("cpu", str(c)))

    flags = frozenset((first.get("flags") or first.get("features") or "").split())
    vendor = first.get("vendor_id") or first.get("cpu implementer") or "unknown"
    vendor_names = {"AuthenticAMD": "AMD", "GenuineIntel": "Intel", "0x41": "Arm", "0x61": "Apple"}
    vendor = vendor_names.get(vendor, vendor)
    model_name = first.get("model name") or first.get("cpu part") or platform.processor() or "unknown CPU"

    def as_int(text: str | None) -> int | None:
        try:
            return int(text, 0) if text is not None else None
        except ValueError:
            return None

    clock_note = "given on the command line"
    if clock_hz is None:
        khz = [as_int(_read(sysdir / f"cpu{c}/cpufreq/cpuinfo_max_freq")) for c in cpus]
        khz = [k for k in khz if k]
        mhz = [float(b["cpu mhz"]) for b in mine if b.get("cpu mhz")]
        nominal = re.search(r"@\s*([\d.]+)\s*GHz", model_name)
        if khz:
            clock_hz, clock_note = max(khz) * 1e3, "cpufreq cpuinfo_max_freq (maximum boost clock)"
        elif mhz or nominal:
            candidates = [m * 1e6 for m in mhz] + ([float(nominal.group(1)) * 1e9] if nominal else [])
            clock_hz = max(candidates)
            clock_note = ("highest of /proc/cpuinfo 'cpu MHz' and the model name's nominal clock; no cpufreq "
                          "maximum is exposed (typical of a VM), so turbo may run faster")

    caches: list[CacheInfo] = []
    seen: dict[tuple[int, str], tuple[int, set[str]]] = {}
    for c in sorted(cpus):
        cache_dir = sysdir / f"cpu{c}/cache"
        for index in sorted(cache_dir.glob("index*")) if cache_dir.is_dir() else []:
            level, ctype = as_int(_read(index / "level")), _read(index / "type")
            size, shared = _read(index / "size"), _read(index / "shared_cpu_list") or f"{c}"
            if level is None or ctype is None or not size or ctype == "Instruction":
                continue
            entry = seen.setdefault((level, ctype), (_size_bytes(size), set()))
            entry[1].add(shared)
    for (level, ctype), (size, shared_sets) in sorted(seen.items()):
        caches.append(CacheInfo(level, ctype, size, len(shared_sets)))

    meminfo = _read(root / "proc/meminfo") or ""

    def mem(key: str) -> int | None:
        m = re.search(rf"^{key}:\s+(\d+)\s*kB", meminfo, re.M)
        return int(m.group(1)) * 1024 if m else None

    sve = as_int(_read(root / "proc/sys/abi/sve_default_vector_length"))
    return CpuFacts(
        machine=platform.machine() if root == Path("/") else ("x86_64" if "sse2" in flags else "aarch64"),
        vendor=vendor, model_name=model_name, family=as_int(first.get("cpu family")),
        model=as_int(first.get("model")), logical_cpus=len(cpus), physical_cores=max(1, len(cores)),
        flags=flags, clock_hz=clock_hz, clock_note=clock_note, caches=tuple(caches),
        mem_total_bytes=mem("MemTotal"), mem_available_bytes=mem("MemAvailable"),
        sve_bits=sve * 8 if sve else None,
    )


def simd_of(facts: CpuFacts) -> Simd:
    """Effective SIMD width and FMA pipes per core from ISA flags and a small table of known cores."""
    f = facts.flags
    extra: dict[str, tuple[float, str]] = {}
    if "avx512f" in f:
        isa, width = "AVX-512", 512
        if facts.vendor == "AMD" and facts.family == 0x19:
            width = 256
            why = "AMD Zen 4 (family 0x19) executes AVX-512 on 256-bit datapaths: 2 x 256-bit FMA pipes"
        else:
            why = "assumed 2 x 512-bit FMA pipes per core (server AVX-512 cores; some parts have only 1)"
    elif "avx2" in f or "avx" in f:
        isa, width = ("AVX2" if "avx2" in f else "AVX"), 256
        why = ("assumed 2 x 256-bit FMA pipes per core" if "fma" in f else
               "AVX without FMA: one 256-bit add and one multiply pipe, counted as one FMA per cycle")
        if facts.vendor == "AMD" and facts.family == 0x17 and (facts.model or 0) < 0x30:
            width, why = 128, "AMD Zen 1 splits 256-bit AVX into 128-bit halves: 2 x 128-bit FMA pipes"
    elif "asimd" in f or facts.machine in ("aarch64", "arm64"):
        isa, width = "NEON", 128
        why = "assumed 2 x 128-bit NEON FMA pipes per core (Neoverse V-class cores have 4)"
        if "sve" in f and facts.sve_bits:
            isa, width = "SVE", max(128, facts.sve_bits)
            why = f"SVE default vector length {facts.sve_bits} bits; assumed 2 FMA pipes per core"
    elif "sse2" in f:
        isa, width = "SSE2", 128
        why = "SSE2 without FMA: one 128-bit add and one multiply pipe, counted as one FMA per cycle"
    else:
        isa, width, why = "scalar", 64, "no SIMD flags recognised: one 64-bit FP pipe assumed"
        return Simd(isa, width, 1, why, MappingProxyType(extra))
    pipes = 1 if "fma" not in f and isa in ("AVX", "SSE2") else 2
    if "avx512_bf16" in f:
        extra["bf16"] = (2.0, "AVX512_BF16 VDPBF16PS: 2x the FP32 FMA rate")
    if "avx512_fp16" in f:
        extra["fp16"] = (2.0, "AVX512_FP16: 2x the FP32 FMA rate")
    if "avx512_vnni" in f or "avx_vnni" in f:
        extra["int8"] = (4.0, "VNNI VPDPBUSD: 4 int8 MACs per 32-bit lane, 4x the FP32 FMA rate")
    if isa in ("NEON", "SVE"):
        if "asimdhp" in f:
            extra["fp16"] = (2.0, "Armv8.2 FP16 arithmetic (asimdhp): twice the lanes of FP32, 2x its FMA rate")
        if "bf16" in f:
            extra["bf16"] = (4.0, "Arm BFMMLA (bf16): 16 bf16 MACs per 128-bit instruction vs 4 FP32 FMAs, "
                                  "assumed at full throughput: 4x the FP32 FMA rate")
        if "i8mm" in f:
            extra["int8"] = (8.0, "Arm SMMLA (i8mm): 32 int8 MACs per 128-bit instruction vs 4 FP32 FMAs, "
                                  "assumed at full throughput: 8x the FP32 FMA rate")
    return Simd(isa, width, pipes, why, MappingProxyType(extra))
