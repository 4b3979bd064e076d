"""``solar-io capture`` of definitions: a definition.json, a problem folder, or a corpus folder."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from ..frontends.common.errors import CaptureError
from ..frontends.trace.detect import DEFINITION

#: capture options a definition can use; the others name a model file's conventions.
_USED = ("validate", "strict", "seed", "validate_budget", "timeout", "fresh_outputs")
_FLAGS = {"entry": "--entry", "inputs": "--input", "inputs_from": "--inputs-from", "dtype": "--dtype",
          "eval_mode": "--eval", "jit": "--no-jit", "sizes": "--sizes", "validate_sizes": "--validate-sizes",
          "agent_fallback": "--agent-fallback", "golden": "--golden"}


def capture_trace(source: Path, output: Path | None, workloads: Path | None, options: dict,
                  allow_invalid: bool) -> None:
    """Capture every workload below ``source`` into ``output``; one line per failure, a summary table,
    exit 1 when any workload was not captured."""
    from ..frontends.trace.problems import capture_corpus, capture_problem, summary_table

    for key, flag in _FLAGS.items():
        if options.get(key):
            raise CaptureError(f"{source}: {flag} does not apply to a definition (its reference's run and the "
                               "workload lines give the program and its inputs)")
    if output is None:
        raise CaptureError(f"{source}: capturing definitions writes one graph per workload: give -o OUTDIR")
    if output.exists() and not output.is_dir():
        raise CaptureError(f"{output}: not a folder (definitions give one graph per workload)")
    used = {k: options[k] for k in _USED if k in options}
    corpus = source.is_dir() and not (source / DEFINITION).is_file()
    if corpus:
        if workloads is not None:
            raise CaptureError(f"{source}: --workloads applies to one definition, not a corpus folder")
        results = capture_corpus(source, output, options=used, allow_invalid=allow_invalid,
                                 show_progress=sys.stderr.isatty())
    else:
        results = capture_problem(source, output, workloads=workloads, options=used, allow_invalid=allow_invalid)
    for r in results:
        if r.error:
            typer.echo(r.error, err=True)
        for op in r.opaque:
            typer.echo(f"{r.problem}:{r.key}: opaque node, compute unknown: {op}", err=True)
    typer.echo(summary_table(results, per_problem=corpus), err=True)
    if any(r.status != "captured" for r in results):
        raise typer.Exit(1)
