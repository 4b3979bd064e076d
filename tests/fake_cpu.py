"""A fake /proc + /sys tree of a CPU, for the probe's fact readers (tests/hardware, tests/measure)."""

from __future__ import annotations

from pathlib import Path

X86_FLAGS = "fpu sse sse2 avx avx2 fma avx512f avx512bw avx512_vnni"


def fake_root(tmp_path: Path, *, cpus: int = 4, smt: int = 2, vendor: str = "GenuineIntel", family: int = 6,
               model: int = 106, flags: str = X86_FLAGS, max_khz: int | None = 3_500_000,
               cpu_mhz: float = 2000.0, model_name: str = "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz") -> Path:
    """A /proc + /sys tree: ``cpus`` logical CPUs, ``smt`` per core, private L1d/L2, shared L3."""
    blocks = []
    for c in range(cpus):
        blocks.append("\n".join([
            f"processor\t: {c}", f"vendor_id\t: {vendor}", f"cpu family\t: {family}", f"model\t\t: {model}",
            f"model name\t: {model_name}", f"cpu MHz\t\t: {cpu_mhz}", "physical id\t: 0",
            f"core id\t\t: {c // smt}", f"flags\t\t: {flags}",
        ]))
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text("\n\n".join(blocks) + "\n", encoding="utf-8")
    (tmp_path / "proc/meminfo").write_text("MemTotal:       16384000 kB\nMemAvailable:   8192000 kB\n",
                                           encoding="utf-8")
    base = tmp_path / "sys/devices/system/cpu"
    base.mkdir(parents=True)
    (base / "online").write_text(f"0-{cpus - 1}\n", encoding="utf-8")
    for c in range(cpus):
        cpu = base / f"cpu{c}"
        (cpu / "topology").mkdir(parents=True)
        (cpu / "topology/physical_package_id").write_text("0\n", encoding="utf-8")
        (cpu / "topology/core_id").write_text(f"{c // smt}\n", encoding="utf-8")
        if max_khz:
            (cpu / "cpufreq").mkdir()
            (cpu / "cpufreq/cpuinfo_max_freq").write_text(f"{max_khz}\n", encoding="utf-8")
        core_sibs = f"{c // smt * smt}-{c // smt * smt + smt - 1}"
        for i, (level, ctype, size, shared) in enumerate([
            (1, "Data", "48K", core_sibs), (1, "Instruction", "32K", core_sibs),
            (2, "Unified", "1280K", core_sibs), (3, "Unified", "54M", f"0-{cpus - 1}"),
        ]):
            index = cpu / f"cache/index{i}"
            index.mkdir(parents=True)
            for key, value in (("level", level), ("type", ctype), ("size", size), ("shared_cpu_list", shared)):
                (index / key).write_text(f"{value}\n", encoding="utf-8")
    return tmp_path
