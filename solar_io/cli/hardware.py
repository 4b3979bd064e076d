"""``solar-io hw``: list the shipped hardware specs, show one, probe the local CPU.

The Typer application is :data:`app`; the main CLI mounts it as the ``hw`` command group.
"""

from __future__ import annotations

import re
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from solar_io.hardware.catalog import UnknownHardwareError, list_specs, load_spec
from solar_io.hardware.spec import PEAK_DTYPES, HardwareSpec, HardwareSpecError, dump_spec_yaml

from ..units import SIZE_RULES, SizeError, parse_size_int

__all__ = ["app", "format_si"]

app = typer.Typer(
    name="hw",
    help="Hardware specs: list the shipped chips, show one, probe the local CPU.",
    no_args_is_help=True,
    add_completion=False,
)

_PREFIXES = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def format_si(value: float | None, unit: str, binary: bool = False) -> str:
    """``9.894e14, 'FLOP/s'`` -> ``'989.4 TFLOP/s'``; with ``binary`` bytes use KiB/MiB/GiB."""
    if value is None:
        return "-"
    if binary:
        for power, prefix in ((40, "Ti"), (30, "Gi"), (20, "Mi"), (10, "Ki")):
            if value >= 1 << power:
                return f"{value / (1 << power):.4g} {prefix}{unit}"
        return f"{value:.4g} {unit}"
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.4g} {prefix}{unit}"
    return f"{value:.4g} {unit}"


def _fail(message: str, code: int = 1) -> typer.Exit:
    """Print one unwrapped error line on stderr; the caller raises the returned Exit."""
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    return typer.Exit(code)


def _load(name: str) -> HardwareSpec:
    try:
        return load_spec(name)
    except (UnknownHardwareError, HardwareSpecError) as exc:
        raise _fail(str(exc)) from None


@app.command("list")
def list_cmd() -> None:
    """List the shipped hardware specs with DRAM bandwidth and dense bf16/fp8 matrix peaks."""
    table = Table(title="solar-io hardware specs (dense peaks)")
    for header in ("name", "chip", "DRAM", "DRAM BW", "bf16 matrix", "fp8 matrix", "aliases"):
        table.add_column(header, overflow="fold")
    for spec in list_specs():
        table.add_row(
            spec.name, spec.full_name, format_si(spec.dram.capacity, "B"),
            format_si(spec.dram_bandwidth, "B/s"), format_si(spec.peak("matrix", "bf16"), "FLOP/s"),
            format_si(spec.peak("matrix", "fp8"), "FLOP/s"), ", ".join(spec.aliases),
        )
    console = Console(highlight=False)
    console.print(table)
    from solar_io.backends.parallel.system import load_system, system_names

    systems = Table(title="systems (solar-io bound --parallel ... --system NAME)")
    for header in ("name", "system", "chip", "chips", "scale-up per chip", "scale-out per chip"):
        systems.add_column(header, overflow="fold")
    for sname in system_names():
        s = load_system(sname)
        systems.add_row(s.name, s.full_name, s.chip.name, f"{s.nodes} x {s.chips_per_node}",
                        format_si(s.scale_up.bandwidth if s.scale_up else None, "B/s"),
                        format_si(s.scale_out.bandwidth if s.scale_out else None, "B/s"))
    console.print(systems)


def _show_system(name: str, console: Console) -> None:
    from solar_io.backends.parallel.system import load_system

    s = load_system(name)
    console.print(f"[bold]{s.name}[/]: {s.full_name}")
    console.print(f"chip: {s.chip.name} ({s.chip.full_name}); {s.nodes} node(s) x {s.chips_per_node} chips = "
                  f"{s.chips} chips")
    for label, ln in (("scale-up (inside a node)", s.scale_up), ("scale-out (across nodes)", s.scale_out)):
        if ln is not None:
            console.print(f"{label}: {ln.kind}, {format_si(ln.bandwidth, 'B/s')} per chip each way"
                          + (f", {ln.domain}-chip domain" if ln.domain else "") + (f" ({ln.note})" if ln.note else ""),
                          markup=False)
    for note in s.notes:
        console.print(f"note: {note}", markup=False)
    for i, src in enumerate(s.sources):
        console.print(f"[{i}] {src}", markup=False)


@app.command("show")
def show_cmd(
    name: str = typer.Argument(..., help="Chip name or alias (case-insensitive), or a spec YAML path."),
    as_yaml: bool = typer.Option(False, "--yaml", help="Print the spec as YAML instead of tables."),
) -> None:
    """Show one spec: peaks per unit and dtype, memory levels, interconnect, sources; or a system spec
    (hardware/systems/NAME.yaml: chip, nodes, links)."""
    from solar_io.backends.parallel.system import system_names

    console = Console(highlight=False)
    if name.strip().lower() in system_names() and not as_yaml:
        _show_system(name.strip().lower(), console)
        return
    spec = _load(name)
    if as_yaml:
        console.print(dump_spec_yaml(spec), end="", markup=False, soft_wrap=True)
        return
    console.print(f"[bold]{spec.name}[/]: {spec.full_name} ({spec.vendor})")
    if spec.aliases:
        console.print(f"aliases: {', '.join(spec.aliases)}")
    if spec.clock is not None:
        console.print(f"clock: {format_si(spec.clock.hz, 'Hz')}  [{_refs(spec.clock.sources)}]")
    peaks = Table(title="dense peaks")
    for header in ("unit", "dtype", "peak", "src", "note"):
        peaks.add_column(header, overflow="fold")
    for unit, by_dtype in spec.units.items():
        for dtype in sorted(by_dtype, key=PEAK_DTYPES.index):
            p = by_dtype[dtype]
            rate = "OP/s" if dtype.startswith("int") or unit == "special" else "FLOP/s"
            peaks.add_row(unit, dtype, format_si(p.value, rate), _refs(p.sources), p.note or "")
    console.print(peaks)
    memory = Table(title="memory (DRAM first)")
    for header in ("level", "kind", "capacity", "bandwidth", "src", "note"):
        memory.add_column(header, overflow="fold")
    for m in spec.memory:
        capacity = format_si(m.capacity, "B", binary=m.level != "dram")
        if m.per:
            capacity += f" x {m.count} ({m.per})"
        memory.add_row(m.level, m.kind or "", capacity, format_si(m.bandwidth, "B/s"), _refs(m.sources),
                       m.note or "")
    console.print(memory)
    if spec.interconnect:
        links = Table(title="interconnect (bandwidth per chip, each direction)")
        for header in ("link", "kind", "bandwidth", "links", "domain", "latency", "src", "note"):
            links.add_column(header, overflow="fold")
        for key, ln in spec.interconnect.items():
            links.add_row(key, ln.kind, format_si(ln.bandwidth, "B/s"), "" if ln.links is None else str(ln.links),
                          "" if ln.domain is None else f"{ln.domain} chips",
                          "-" if ln.latency is None else format_si(ln.latency, "s"), _refs(ln.sources), ln.note or "")
        console.print(links)
    else:
        console.print("interconnect: none given in the spec")
    if spec.measured_gemm or spec.measured_bandwidth:
        measured = Table(title="measured")
        for header in ("what", "value", "note"):
            measured.add_column(header, overflow="fold")
        for dtype, g in spec.measured_gemm.items():
            measured.add_row(f"gemm {dtype}", format_si(g.flops, "FLOP/s"), g.note or "")
        for pattern, b in spec.measured_bandwidth.items():
            measured.add_row(f"bandwidth {pattern}", format_si(b.bandwidth, "B/s"), b.note or "")
        console.print(measured)
    for note in spec.notes:
        console.print(f"note: {note}")
    for i, source in enumerate(spec.sources):
        console.print(f"[{i}] {source.title}" + (f" <{source.url}>" if source.url else "")
                      + (f" ({source.note})" if source.note else ""), markup=False)


def _refs(sources: tuple[int, ...]) -> str:
    return ",".join(str(i) for i in sources)


@app.command("probe")
def probe_cmd(
    output: Path = typer.Option(..., "-o", "--output", help="Where to write the spec YAML (atomically)."),
    name: str = typer.Option("local-cpu", help="Name of the spec (lowercase id)."),
    fast: bool = typer.Option(False, "--fast", help="Small GEMMs and two runs each: a few seconds."),
    thorough: bool = typer.Option(False, "--thorough", help="GEMMs up to 4096 and every run taken (10 per "
                                  "GEMM size, 5 per bandwidth pattern); the default sizes GEMMs by time."),
    gemm_sizes: str | None = typer.Option(None, help="Comma-separated square GEMM sizes, e.g. 512,1024."),
    runs: int | None = typer.Option(None, min=1, help="Timed runs per measurement (best is kept)."),
    buffer: str | None = typer.Option(None, "--buffer", help="Bandwidth array size (256MiB; default 8x the "
                                                             f"last-level cache); {SIZE_RULES}."),
    buffer_mib: int | None = typer.Option(None, "--buffer-mib", min=1, hidden=True,
                                          help="Old spelling of --buffer N MiB."),
    threads: int | None = typer.Option(None, min=1, help="Bandwidth threads (default: CPUs available)."),
    clock_ghz: float | None = typer.Option(None, min=0.1, help="CPU clock when the system does not say."),
) -> None:
    """Describe the local CPU: theoretical peaks, caches, measured GEMM and memory bandwidth."""
    from solar_io.hardware.probe import ProbeConfig, ProbeError, probe_to_file

    if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", name):
        raise _fail(f"--name must be a lowercase id (letters, digits, '.', '_', '-'), got {name!r}")
    overrides: dict[str, object] = {"name": name}
    if gemm_sizes:
        try:
            overrides["gemm_sizes"] = tuple(int(s) for s in gemm_sizes.split(",") if s.strip())
        except ValueError:
            raise _fail(f"--gemm-sizes must be comma-separated integers, got {gemm_sizes!r}") from None
    if runs is not None:
        overrides["gemm_runs"] = overrides["bandwidth_runs"] = runs  # exactly: no time budget
        overrides["gemm_min_runs"] = overrides["bandwidth_min_runs"] = runs
    if fast and thorough:
        raise _fail("give --fast or --thorough, not both")
    if buffer is not None and buffer_mib is not None:
        raise _fail("give --buffer or --buffer-mib, not both")
    if buffer is not None:
        try:
            overrides["buffer_bytes"] = parse_size_int(buffer, "--buffer")
        except SizeError as exc:
            raise _fail(str(exc)) from None
    elif buffer_mib is not None:
        overrides["buffer_bytes"] = buffer_mib << 20
    if threads is not None:
        overrides["threads"] = threads
    if clock_ghz is not None:
        overrides["clock_hz"] = clock_ghz * 1e9
    make = ProbeConfig.fast if fast else ProbeConfig.thorough if thorough else ProbeConfig
    config = make(**overrides)  # type: ignore[arg-type]
    try:
        spec = probe_to_file(output, config)
    except (ProbeError, HardwareSpecError) as exc:
        raise _fail(str(exc), code=1) from None
    except OSError as exc:
        raise _fail(f"{output}: cannot write: {exc.strerror or exc}", code=1) from None
    Console(highlight=False).print(
        f"wrote {output}: {spec.full_name}; fp32 peak {format_si(spec.peak('vector', 'fp32'), 'FLOP/s')}, "
        f"measured GEMM {format_si(spec.measured_gemm['fp32'].flops, 'FLOP/s')}, "
        f"DRAM {format_si(spec.dram_bandwidth, 'B/s')} (measured)"
    )
