"""``solar-io measure MODEL``: time a model file, and with ``--bound --hw`` set it against its SOL.

Registered by ``solar_io.cli`` as ``app.command("measure")(measure_command)``.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ..backends.bound import bound_many
from ..errors import SolarIOError
from ..hardware.spec import HardwareSpec
from ..measure.measure import Measurement, capture_graph, headroom, measure_file
from ..measure.runners import RunOptions
from ..units import format_ratio, format_time, parse_time
from .options import Compile, Device, Json, MinTime, Repeats, TorchDtype, Warm


def resolve_specs(hw: str) -> list[HardwareSpec]:
    """Chips from ``--hw`` (names, aliases, spec paths, comma-separated; ``local`` probes this CPU)."""
    from ..hardware import load_spec

    specs = []
    for name in (h.strip() for h in hw.split(",")):
        if not name:
            continue
        if name == "local":
            from ..hardware.probe import probe

            specs.append(probe())
        else:
            specs.append(load_spec(name))
    if not specs:
        raise SolarIOError("--hw: give a chip name, alias or spec path (or 'local' to probe this CPU)")
    return specs


def parse_min_time(text: str) -> float:
    """``--min-time``: a time such as 0.2s or 50ms, or 0 (exactly ``--repeats`` runs)."""
    return 0.0 if text.strip() in ("0", "0s") else parse_time(text, "--min-time")


def describe(m: Measurement) -> str:
    """One line: what ran, how it was timed, median/min/IQR."""
    t = m.timing
    threads = f", {t.threads} threads" if t.threads else ""
    cache = ("warm cache (--warm)" if t.warm
             else f"cache flushed before each run ({t.flushed_bytes / 2**20:.0f} MiB written)")
    return (f"{Path(m.path).name}: {m.runtime} on {t.device}{threads}, {cache}: median {format_time(t.median)}, "
            f"min {format_time(t.min)}, IQR {format_time(t.iqr)} over {len(t.samples)} runs ({t.clock})")


def measure_command(
    model: Path = typer.Argument(..., help="A model file (PyTorch or JAX). WARNING: this runs the code in the file."),
    frontend: str | None = typer.Option(None, "--frontend", help="torch or jax (default: from the file's imports)."),
    compile_: Compile = False,
    warm: Warm = False,
    repeats: Repeats = 10,
    warmup: int = typer.Option(2, "--warmup", min=0, help="Untimed runs first."),
    min_time: MinTime = "0.2s",
    dtype: TorchDtype = None,
    device: Device = "cpu",
    bound: bool = typer.Option(False, "--bound", help="Also capture and bound the file (needs --hw), print headroom."),
    hw: str | None = typer.Option(None, "--hw", help="Chips for --bound: names, spec paths, or 'local' (probe)."),
    cache_aware: bool = typer.Option(True, "--cache-aware/--no-cache-aware", help="With --bound: also the "
                                                                                  "cache-aware fidelity."),
    as_json: Json = False,
) -> None:
    """Time a model file's forward pass: warm-up, repeated timed runs, median/min/IQR; with --bound --hw,
    its SOL on each chip and the headroom (measured / SOL) at each fidelity with the binding resource.
    A headroom below 1 is a violation of a lower bound (exit 1)."""
    if bound and not hw:
        raise SolarIOError("--bound needs --hw (a chip name, a spec path, or 'local')")
    opts = RunOptions(dtype=dtype, compile=compile_, device=device)
    m = measure_file(model, frontend=frontend, options=opts, repeats=repeats, warmup=warmup,
                     min_seconds=parse_min_time(min_time), warm=warm)
    doc: dict = {"model": str(model), "runtime": m.runtime, "timing": m.timing.as_dict()}
    violated = False
    if bound:
        g = capture_graph(model, frontend=m.frontend, options=opts)
        doc["bounds"] = []
        for r in bound_many(g, resolve_specs(hw or ""), measured=m.timing.median, cache_aware=cache_aware):
            rows = headroom(r, m.timing.median)
            fastest = headroom(r, m.timing.min)
            bad = [h.fidelity for h in fastest if h.violated and h.fidelity in m.judged]
            violated |= bool(bad)
            doc["bounds"].append({"hardware": r.hardware, "violations": bad, "judged": list(m.judged), "fidelities": [
                {"fidelity": h.fidelity, "sol_s": h.sol, "headroom": h.ratio, "binding": h.bottleneck}
                for h in rows]})
    if as_json:
        typer.echo(json.dumps(doc, indent=2))
    else:
        typer.echo(describe(m))
        for b in doc.get("bounds", []):
            typer.echo(f"  on {b['hardware']}:")
            for f in b["fidelities"]:
                flag = ("  VIOLATION: the fastest run beat this lower bound" if f["fidelity"] in b["violations"]
                        else "" if f["fidelity"] in b["judged"]
                        else f"  (not judged: {m.runtime} fuses ops into larger kernels)")
                typer.echo(f"    {f['fidelity']:<12} SOL {format_time(f['sol_s']):>11}  headroom "
                           f"{format_ratio(f['headroom']):>8}  bound by {f['binding'] or '-'}{flag}")
    if violated:
        raise typer.Exit(1)
