"""``solar-io bound GRAPH --parallel tp=8,... [--system NAME] [--microbatches M]``: the many-chip bound.

Called by :mod:`.bound` when ``--parallel`` or ``--system`` is given; the rules, collectives and
formulas are :mod:`solar_io.backends.parallel`'s.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..backends.parallel import ParallelError, parallel_bound, parse_layout, render
from ..backends.parallel.table import document
from ..format.yamltext import emit
from .output import print_or_write


def parallel_command(graph_path: Path, g, hw: str | None, parallel: str | None, system: str | None,  # noqa: ANN001
                     microbatches: int, fmt: str, output: Path | None, measured: str | None = None,
                     dtype: str | None = None, **bound_options) -> None:
    """Bound the graph ``g`` (read from ``graph_path``) sharded by ``parallel`` and print or write the report."""
    if hw is not None and "," in hw:
        raise ParallelError("--parallel: give one chip in --hw (a layout runs on one kind of chip)")
    if fmt == "html":
        raise ParallelError("--format html: the many-chip report is written as table, yaml or json")
    layout = parse_layout(parallel or "")
    if dtype is not None:  # cast first, so that the collectives move the cast tensors too
        from ..backends.bound import cast_graph

        g = cast_graph(g, dtype)
    bound_options = {k: v for k, v in bound_options.items() if v is not None}
    r = parallel_bound(g, hw, layout, system=system, microbatches=microbatches, measured=measured, **bound_options)
    for node, why in r.plan.replicated:
        print(f"{graph_path}: note: linear {node} is replicated, not sharded: {why}", file=sys.stderr)
    for note in r.plan.notes:
        if note.startswith(("ep: no", "sp: no")):  # a rule that did not apply: the layout is not what was asked
            print(f"{graph_path}: warning: {note}", file=sys.stderr)
    if fmt == "yaml":
        text = emit(document(r))
    elif fmt == "json":
        text = json.dumps(document(r), indent=2) + "\n"
    else:
        text = render(r)
    print_or_write(output, text, ParallelError)


__all__ = ["parallel_command"]
