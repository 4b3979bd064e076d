"""``solar-io capture``: run a model file through its frontend and write the einsum graph.

Mounted by ``solar_io.cli.main`` as ``app.command("capture")(capture_command)``. Picking the
frontend and capturing one file is the library's :func:`solar_io.frontends.select.capture`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import typer

from ..format.files import checked_dumps, dump
from ..frontends.common.errors import CaptureError, InputSpecError, ValidationFailed
from ..frontends.common.usercode import DEFAULT_TIMEOUT_S, parse_timeout, user_code
from ..frontends.select import capture
from ..graph import Graph
from ..progress import enabled as progress_enabled
from ..progress import step
from ..units import SIZE_RULES, parse_size_int
from .options import KvCache, PageSize


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


def _serving_step(source: Path, frontend: str | None, phase: str, batch: int, seq: int | None, kv_len: int,
                  cache: str, page_size: int):  # noqa: ANN202 (a frontends.torch.phases.Step)
    """The ``--phase`` options as a Step; CaptureError for a source that is not a torch model."""
    from ..frontends.select import detect_frontend

    name = frontend or (detect_frontend(source) if source.is_file() else "torch")
    if name != "torch":
        raise CaptureError(f"{source.name}: --phase captures torch causal LMs only (this is a {name} source)")
    from ..frontends.torch.phases import Step

    return Step(phase, batch=batch, seq=seq, kv_len=kv_len, cache=cache, page_size=page_size)


def _train_spec(source: Path, frontend: str | None, loss: str, optimizer: str, master_dtype: str | None,  # noqa: ANN202
                recompute: bool = False):
    """The ``--train`` options as a TrainSpec; CaptureError for a source that is not a torch or JAX model."""
    from ..frontends.common.training import TrainSpec
    from ..frontends.select import detect_frontend

    name = frontend or (detect_frontend(source) if source.is_file() else "torch")
    if name not in ("torch", "jax"):
        raise CaptureError(f"{source.name}: --train captures torch and JAX models (this is a {name} source)")
    return TrainSpec(loss=loss, optimizer=optimizer, master_dtype=master_dtype, recompute=recompute)


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
    unsafe_exec: bool = typer.Option(False, "--unsafe-exec", help="agent: run model-written programs even where "
                                     "the jail (bubblewrap + seccomp) is unavailable, with resource limits only. "
                                     "Install the jail instead: apt-get install bubblewrap (or make jail)."),
    workloads: Path | None = typer.Option(None, "--workloads", help="trace: the workload.jsonl of a "
                                          "definition.json (default: the one beside it); one graph per line, "
                                          "-o DIR/<definition>.<uuid>.yaml."),
    phase: str | None = typer.Option(None, "--phase", help="torch causal LMs: capture one serving step, prefill "
                                     "or decode, over a KV cache given as input tensors (a Hugging Face model, "
                                     "or a module with kv_cache_layout(); see frontends/torch/phases.py)."),
    batch: int = typer.Option(1, "--batch", help="--phase: sequences in the step."),
    seq: int | None = typer.Option(None, "--seq", help="--phase: new tokens per sequence (prefill: the prompt; "
                                   "decode: 1 by default)."),
    kv_len: int = typer.Option(0, "--kv-len", help="--phase: positions already in the KV cache (decode: > 0)."),
    cache: KvCache = "dynamic",
    page_size: PageSize = 16,
    routing: str | None = typer.Option(None, "--routing", help="torch: the MoE routing a capture with "
                                       "data-dependent shapes assumes: observed (the example inputs' routing, "
                                       "run on the CPU), uniform (default: expected distinct experts "
                                       "E(1-(1-k/E)^T)), balanced (T*k spread evenly) or skewed=ALPHA (power "
                                       "law); written into the graph's assumptions."),
    train: bool = typer.Option(False, "--train", help="torch, jax: capture a training step: forward, loss, backward "
                               "and the optimizer update in one graph, each node's phase marked."),
    loss: str = typer.Option("sum", "--loss", help="--train: the loss of the model's output: sum, mse (against "
                             "a target like the output) or ce (cross entropy over the last dim)."),
    optimizer: str = typer.Option("adamw", "--optimizer", help="--train: the update: adamw, sgd or none (the "
                                  "gradients are the outputs)."),
    master_dtype: str | None = typer.Option(None, "--master-dtype", help="--train: master weights and optimizer "
                                            "state in this dtype (fp32) beside lower-precision parameters."),
    recompute: bool = typer.Option(False, "--recompute", help="--train: activation checkpointing: the forward "
                                   "keeps only the tensors at layer boundaries (cuts every path to the loss "
                                   "passes) and the backward re-runs the forward nodes it needs; more MACs, a "
                                   "lower peak of live activations (both written into the graph)."),
    fresh_outputs: bool = typer.Option(False, "--fresh-outputs", help="trace: charge every output whole, as new "
                                       "memory. Default: each output arrives zero-filled, as SOL-ExecBench's "
                                       "harness hands it (destination-passing style), and elements the program "
                                       "leaves zero are not charged (written into the graph: 'prefilled')."),
    timeout: float = typer.Option(DEFAULT_TIMEOUT_S, "--timeout", help="Seconds one capture (a file, or one "
                                  "workload of a definition) may run before it is stopped as failed; a folder "
                                  "goes on to the next file (0: no limit)."),
) -> None:
    """Capture a model into an einsum-graph file. This RUNS the user code in SOURCE (and its imports)."""
    budget = parse_size_int(validate_budget, "--validate-budget")
    limit = parse_timeout(timeout)
    if inputs_from and inputs:
        raise InputSpecError("give --input specs or --inputs-from, not both")
    options = dict(validate=not no_validate, strict=strict, entry=entry, inputs=list(inputs) or None,
                   inputs_from=inputs_from,
                   dtype=dtype, seed=seed, validate_budget=budget, eval_mode=eval_mode)
    loopir = dict(jit=False if no_jit else None, sizes=_parse_dims(sizes, "--sizes"),
                  validate_sizes=_parse_dims(validate_sizes, "--validate-sizes"))
    options.update({k: v for k, v in loopir.items() if v is not None})
    if frontend == "agent" or agent_fallback:
        options.update(golden=golden, model=model, max_attempts=max_attempts, no_cache=no_cache,
                       unsafe_exec=unsafe_exec)
    if agent_fallback:
        options["agent_fallback"] = True
    if routing is not None:
        options["routing"] = routing
    if phase is not None:
        options["step"] = _serving_step(source, frontend, phase, batch, seq, kv_len, cache, page_size)
    else:
        given = [f for f, v, d in (("--batch", batch, 1), ("--seq", seq, None), ("--kv-len", kv_len, 0),
                                   ("--cache", cache, "dynamic"), ("--page-size", page_size, 16)) if v != d]
        if given:
            raise InputSpecError(f"{given[0]} describes a serving step: give --phase prefill or --phase decode")
    if train:
        options["train"] = _train_spec(source, frontend, loss, optimizer, master_dtype, recompute)
    elif recompute:
        raise InputSpecError("--recompute changes a training step: give --train")
    from ..frontends.trace.detect import is_trace_source

    if frontend in (None, "trace") and (workloads is not None or is_trace_source(source)):
        from .capture_trace import capture_trace  # SOL-ExecBench / FlashInfer-Trace definitions

        capture_trace(source, output, workloads, dict(options, timeout=limit, fresh_outputs=fresh_outputs),
                      allow_invalid)
        return
    if fresh_outputs:
        raise InputSpecError("--fresh-outputs applies to benchmark definitions (definition.json): a model file's "
                             "outputs are new memory already")
    if source.is_dir():
        _capture_dir(source, output, frontend, options, allow_invalid, limit)
        return
    if not source.exists() and not entry:
        raise CaptureError(f"{source}: no such file")
    if entry and not source.exists() and frontend is None:
        frontend = "torch"  # --entry names an importable module: nothing to read imports from
    with step(f"capturing {source.name} (export, lowering, validation)"):
        _import_frontend(source, frontend, entry)
        with user_code(source.name, limit):
            g = capture(source, frontend, **options)
    if g.validation.status == "failed" and not allow_invalid:
        raise ValidationFailed(f"{source.name}: validation failed: {g.validation.reason} "
                               "(graph not written; --allow-invalid writes it anyway)")
    _opaque_report(g, source.name)
    _unchecked_report(g, source.name)
    if output is None:
        sys.stdout.write(checked_dumps(g, "<stdout>"))
    else:
        try:
            dump(g, output)
        except OSError as e:
            raise CaptureError(f"{output}: cannot write: {e.strerror or e}") from None
        typer.echo(f"{source.name}: {len(g.nodes)} nodes, validation {g.validation.status}, written to {output}",
                   err=True)


def _import_frontend(source: Path, frontend: str | None, entry: str | None) -> None:
    """Import the frontend (torch, jax, ...) before the --timeout clock starts: the limit is for the
    user's code, and an import cut short by it would leave its modules half-initialised."""
    from ..frontends.select import detect_frontend, frontend_module

    if frontend is None and (entry or not source.is_file()):
        return  # capture() reports it
    frontend_module(frontend or detect_frontend(source))


def _capture_dir(folder: Path, output: Path | None, frontend: str | None, options: dict,
                 allow_invalid: bool, limit: float | None) -> None:
    from ..frontends.common.folder import capture_folder, summary_table

    if output is None:
        raise CaptureError("capturing a folder needs -o OUTDIR")
    files = sorted(p for p in folder.iterdir() if p.suffix == ".py" and not p.name.startswith("_"))
    if not files:
        raise CaptureError(f"{folder}: no .py files")

    def one(p: Path) -> Graph:
        _import_frontend(p, frontend, None)
        with user_code(p.name, limit):
            return capture(p, frontend, **options)

    results = capture_folder(files, output, one,
                             allow_invalid=allow_invalid, show_progress=progress_enabled())
    typer.echo(summary_table(results), err=True)
    if any(r.status != "captured" for r in results):
        raise typer.Exit(1)
