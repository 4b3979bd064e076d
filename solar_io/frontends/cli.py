"""``solar-io capture``: run a model file through its frontend and write the einsum graph.

Mounted by ``solar_io.cli`` as ``app.command("capture")(capture_command)``. The frontend is
picked from the file's imports (``import torch`` -> torch, ``solar_io.frontends.loopir`` ->
loopir, ``jax``/``flax`` -> jax) unless ``--frontend`` forces one; each frontend package
exposes ``capture_file(path, *, validate, strict, **options) -> Graph``.
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import typer

from ..errors import SolarIOError
from ..files import dump, dumps
from ..graph import Graph
from ..sizes import SIZE_RULES, parse_size_int
from .common.errors import CaptureError, InputSpecError, ValidationFailed

FRONTENDS = ("torch", "loopir", "jax", "agent")
_IMPORTS = [
    ("loopir", re.compile(r"^\s*(from|import)\s+solar_io\.frontends\.loopir\b", re.M)),
    ("jax", re.compile(r"^\s*(from|import)\s+(jax|flax)\b", re.M)),
    ("torch", re.compile(r"^\s*(from|import)\s+torch\b", re.M)),
]


def detect_frontend(path: Path) -> str:
    """The frontend a source file needs, from its imports."""
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        raise CaptureError(f"{path}: cannot read: {e.strerror or e}") from None
    for name, pat in _IMPORTS:
        if pat.search(text):
            return name
    raise CaptureError(f"{path}: cannot tell the frontend from its imports (no torch, jax or loopir import); "
                       "give --frontend")


def frontend_module(name: str):  # noqa: ANN201
    """The frontend package ``solar_io.frontends.<name>`` (CaptureError if unavailable)."""
    if name not in FRONTENDS:
        raise CaptureError(f"unknown frontend {name!r}; choose one of {', '.join(FRONTENDS)}")
    try:
        mod = importlib.import_module(f"solar_io.frontends.{name}")
    except ImportError as e:
        raise CaptureError(f"frontend {name} is not available: {e} (install solar-io[{name}])") from None
    if not hasattr(mod, "capture_file"):
        raise CaptureError(f"frontend {name} is not available yet")
    return mod


_LOOPIR_ONLY = {"jit": "--no-jit", "sizes": "--sizes", "validate_sizes": "--validate-sizes"}


def _parse_dims(text: str | None, flag: str) -> dict[str, int] | None:
    """``"B=2,S=8"`` -> {"B": 2, "S": 8}; CaptureError naming ``flag`` on anything else."""
    if text is None:
        return None
    out: dict[str, int] = {}
    for part in text.split(","):
        m = re.fullmatch(r"\s*([A-Za-z_]\w*)\s*=\s*([0-9]+)\s*", part)
        if not m or int(m.group(2)) <= 0 or m.group(1) in out:
            raise CaptureError(f"bad {flag} {text!r}: expected NAME=SIZE pairs separated by commas, each name "
                               "once, sizes > 0 (e.g. B=2,S=8)")
        out[m.group(1)] = int(m.group(2))
    return out


def _opaque_report(g: Graph, name: str) -> None:
    ops = [n for n in g.nodes if n.kind == "opaque"]
    if ops:
        typer.echo(f"{name}: {len(ops)} opaque node(s), compute unknown:", err=True)
        for n in ops:
            typer.echo(f"  {n.name} ({n.op}): {n.reason}", err=True)


def _unchecked_report(g: Graph, name: str) -> None:
    """Nodes the validation could not compare (an op with no kernel for its dtypes on the CPU, ...)."""
    if g.validation.unchecked:
        typer.echo(f"{name}: {len(g.validation.unchecked)} node(s) not checked by validation:", err=True)
        for u in g.validation.unchecked:
            typer.echo(f"  {u.node} ({u.op}): {u.reason}", err=True)


def capture_command(
    source: Path = typer.Argument(..., help="A model file (or a folder of them) to capture. "
                                  "WARNING: this runs the code in the file."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write the graph here (a folder for a "
                                       "folder input); default: stdout."),
    frontend: str | None = typer.Option(None, "--frontend", help="Force a frontend: torch, loopir, jax, "
                                      "agent (LLM translation of any source; needs ANTHROPIC_API_KEY)."),
    entry: str | None = typer.Option(None, "--entry", help="module_or_file:callable — a module class, a "
                                     "factory returning a module, or a function used as forward."),
    inputs: list[str] = typer.Option([], "--input", help="Input shape spec NAME=DTYPE[D1,D2,...], "
                                      "repeatable, instead of get_inputs()."),
    inputs_from: str | None = typer.Option(None, "--inputs-from", help="torch, jax: the callable in the "
                                           "source that returns the inputs, instead of get_inputs() (e.g. "
                                           "create_inputs)."),
    dtype: str | None = typer.Option(None, "--dtype", help="Cast the model and floating inputs: bf16, fp16, "
                                     "fp32."),
    strict: bool = typer.Option(False, "--strict", help="Fail on any op with no lowering rule."),
    no_validate: bool = typer.Option(False, "--no-validate", help="Skip the numeric check against the "
                                     "source program."),
    validate_budget: str = typer.Option("2GiB", "--validate-budget", help="Run the whole graph only if "
                                        "inputs, weights and activations fit in this much memory (over it, torch "
                                        f"captures are validated per node at reduced sizes); {SIZE_RULES}."),
    allow_invalid: bool = typer.Option(False, "--allow-invalid", help="Write the graph even if validation "
                                       "fails."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random weights and inputs used to validate."),
    eval_mode: bool = typer.Option(False, "--eval", help="Capture the model in eval mode (batch norm with "
                                   "running statistics); default: as built, like the benchmark convention."),
    golden: Path | None = typer.Option(None, "--golden", help="agent: reference arrays (.npz of input:NAME, "
                                       "output:NAME) for sources that cannot run here, e.g. CUDA."),
    model: str | None = typer.Option(None, "--model", help="agent: the Claude model to translate with."),
    max_attempts: int = typer.Option(5, "--max-attempts", help="agent: model replies to try before giving up."),
    no_cache: bool = typer.Option(False, "--no-cache", help="agent: ignore and do not write the translation "
                                  "cache."),
    no_jit: bool = typer.Option(False, "--no-jit", help="loopir: run kernels in plain Python, not numba "
                                "(debugging)."),
    sizes: str | None = typer.Option(None, "--sizes", help="loopir: Dim sizes of the captured graph, e.g. "
                                     "S=4096,D=1024."),
    validate_sizes: str | None = typer.Option(None, "--validate-sizes", help="loopir: validate at these "
                                              "smaller Dim sizes, e.g. B=2,S=8 (the graph keeps its sizes)."),
    agent_fallback: bool = typer.Option(False, "--agent-fallback", help="torch, jax: hand each op with no lowering "
                                        "rule to the agent (LLM translation, checked against the op; needs "
                                        "ANTHROPIC_API_KEY); ops it cannot translate stay opaque."),
    workloads: Path | None = typer.Option(None, "--workloads", help="trace: the workload.jsonl of a "
                                          "definition.json (default: the one beside it); one graph per line, "
                                          "-o DIR/<definition>.<uuid>.yaml."),
) -> None:
    """Capture a model into an einsum-graph file. This RUNS the user code in SOURCE (and its imports)."""
    budget = parse_size_int(validate_budget, "--validate-budget")
    if inputs_from and inputs:
        raise InputSpecError("give --input specs or --inputs-from, not both")
    options = dict(validate=not no_validate, strict=strict, entry=entry, inputs=list(inputs) or None,
                   inputs_from=inputs_from,
                   dtype=dtype, seed=seed, validate_budget=budget, eval_mode=eval_mode)
    loopir = dict(jit=False if no_jit else None, sizes=_parse_dims(sizes, "--sizes"),
                  validate_sizes=_parse_dims(validate_sizes, "--validate-sizes"))
    options.update({k: v for k, v in loopir.items() if v is not None})
    if frontend == "agent" or agent_fallback:
        options.update(golden=golden, model=model, max_attempts=max_attempts, no_cache=no_cache)
    if agent_fallback:
        options["agent_fallback"] = True
    from .trace.detect import is_trace_source

    if frontend in (None, "trace") and (workloads is not None or is_trace_source(source)):
        from .trace.cli import capture_trace  # SOL-ExecBench / FlashInfer-Trace definitions

        capture_trace(source, output, workloads, options, allow_invalid)
        return
    if source.is_dir():
        _capture_dir(source, output, frontend, options, allow_invalid)
        return
    if not source.exists() and not entry:
        raise CaptureError(f"{source}: no such file")
    if entry and not source.exists() and frontend is None:
        frontend = "torch"  # --entry names an importable module: nothing to read imports from
    g = _capture_one(source, frontend, options)
    if g.validation.status == "failed" and not allow_invalid:
        raise ValidationFailed(f"{source.name}: validation failed: {g.validation.reason} "
                               "(graph not written; --allow-invalid writes it anyway)")
    _opaque_report(g, source.name)
    _unchecked_report(g, source.name)
    if output is None:
        sys.stdout.write(dumps(g))
    else:
        try:
            dump(g, output)
        except OSError as e:
            raise CaptureError(f"{output}: cannot write: {e.strerror or e}") from None
        typer.echo(f"{source.name}: {len(g.nodes)} nodes, validation {g.validation.status}, written to {output}",
                   err=True)


def _capture_one(path: Path, frontend: str | None, options: dict) -> Graph:
    name = frontend or detect_frontend(path)
    misplaced = [flag for key, flag in _LOOPIR_ONLY.items() if key in options and name != "loopir"]
    if misplaced:
        raise CaptureError(f"{path.name}: {misplaced[0]} applies to loop-IR programs only (this is a {name} "
                           "source)")
    mod = frontend_module(name)
    try:
        g = mod.capture_file(path, **options)
        if options.get("agent_fallback") and any(n.kind == "opaque" for n in g.nodes):
            from .agent.fallback import resolve_opaque

            g = resolve_opaque(g, path, model=options.get("model"), max_attempts=options.get("max_attempts", 5),
                               no_cache=bool(options.get("no_cache")), seed=options.get("seed", 0)).graph
        return g
    except SolarIOError:
        raise
    except Exception as e:
        raise CaptureError(f"{path.name}: capture failed: {type(e).__name__}: {str(e)[:300]}") from e


def _capture_dir(folder: Path, output: Path | None, frontend: str | None, options: dict,
                 allow_invalid: bool) -> None:
    from .common.folder import capture_folder, summary_table

    if output is None:
        raise CaptureError("capturing a folder needs -o OUTDIR")
    files = sorted(p for p in folder.iterdir() if p.suffix == ".py" and not p.name.startswith("_"))
    if not files:
        raise CaptureError(f"{folder}: no .py files")
    results = capture_folder(files, output, lambda p: _capture_one(p, frontend, options),
                             allow_invalid=allow_invalid, show_progress=sys.stderr.isatty())
    typer.echo(summary_table(results), err=True)
    if any(r.status != "captured" for r in results):
        raise typer.Exit(1)
