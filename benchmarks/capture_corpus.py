"""Capture every model file of a folder (a benchmark corpus such as KernelBench's level1) and print,
per model: capture exit status and seconds, node count, opaque ops, validation status, and matrix
FLOPs against ``torch.utils.flop_counter.FlopCounterMode`` on meta tensors; then the failures.

    .venv/bin/python benchmarks/capture_corpus.py FOLDER [--filter TEXT] [--bound HW] [--timeout S]
        [--entry-callable workload --inputs-from create_inputs]   # another convention (JAXBench)

Each capture runs in its own process (``solar-io capture``), as a user would run it; ``--bound``
also runs ``solar-io bound`` on each graph. FlopCounterMode counts matrix work only (mm, bmm, conv,
SDPA), so a model without any agrees at 0 = 0. The graphs are written to FOLDER/_graphs/.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

FLOPS = r"""
import importlib.util, json, sys, warnings
warnings.simplefilter("ignore")
import torch
from torch.utils.flop_counter import FlopCounterMode
from solar_io.frontends.torch.loader import OnDevice
spec = importlib.util.spec_from_file_location("corpus_model", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
with torch.device("meta"), OnDevice("meta"):
    model = mod.Model(*(mod.get_init_inputs() if hasattr(mod, "get_init_inputs") else []))
    xs = mod.get_inputs()
    with FlopCounterMode(display=False) as fc, torch.no_grad():
        model(*xs)
print(json.dumps(fc.get_total_flops()))
"""

GRAPH = r"""
import json, sys
from solar_io import load
from solar_io.metrics import graph_metrics
g = load(sys.argv[1])
print(json.dumps({"nodes": len(g.nodes), "opaque": sorted({n.op for n in g.nodes if n.kind == "opaque"}),
                  "flops_matrix": graph_metrics(g).flops_matrix, "validation": g.validation.status}))
"""


def _last_json(text: str) -> object:
    return json.loads(text.strip().splitlines()[-1])


def triage(path: Path, out: Path, hw: str | None, timeout: int, extra: list[str] = ()) -> dict:
    """One model's row (see the module docstring); ``extra``: more ``solar-io capture`` arguments."""
    row: dict = {"file": path.name}
    graph = out / (path.stem + ".yaml")
    t0 = time.perf_counter()
    try:
        r = subprocess.run([sys.executable, "-m", "solar_io", "capture", str(path), "-o", str(graph), *extra],
                           capture_output=True, text=True, timeout=timeout)
        row["rc"], row["error"] = r.returncode, (r.stderr.strip().splitlines() or [""])[-1] if r.returncode else ""
    except subprocess.TimeoutExpired:
        row["rc"], row["error"] = "timeout", f"capture took over {timeout} s"
    row["seconds"] = round(time.perf_counter() - t0, 1)
    if row["rc"] == 0:
        r = subprocess.run([sys.executable, "-c", GRAPH, str(graph)], capture_output=True, text=True, timeout=timeout)
        row.update(_last_json(r.stdout) if r.returncode == 0 else {"error": r.stderr.strip()[-200:]})
        if hw:
            b = subprocess.run([sys.executable, "-m", "solar_io", "bound", str(graph), "--hw", hw],
                               capture_output=True, text=True, timeout=timeout)
            row["bound"] = "ok" if b.returncode == 0 else (b.stderr.strip().splitlines() or ["failed"])[-1]
    try:
        r = subprocess.run([sys.executable, "-c", FLOPS, str(path)], capture_output=True, text=True, timeout=timeout)
        row["flop_counter"] = _last_json(r.stdout) if r.returncode == 0 else None
    except subprocess.TimeoutExpired:
        row["flop_counter"] = None
    if "flops_matrix" in row and row["flop_counter"] is not None:
        a, b = row["flops_matrix"], row["flop_counter"]
        row["flops_agree"] = abs(a - b) <= 1e-6 * max(a, b, 1)
    row["ok"] = (row["rc"] == 0 and not row.get("opaque") and row.get("validation") == "passed"
                 and row.get("flops_agree", True) and row.get("bound", "ok") == "ok")
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--filter", default="", help="only files whose name contains this")
    ap.add_argument("--bound", default=None, metavar="HW", help="also run solar-io bound --hw HW")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per capture")
    ap.add_argument("--entry-callable", default=None, help="capture FILE:NAME (solar-io capture --entry)")
    ap.add_argument("--inputs-from", default=None, help="solar-io capture --inputs-from NAME")
    args = ap.parse_args()
    out = args.folder / "_graphs"
    out.mkdir(exist_ok=True)
    rows = []
    print(f"{'model':58} {'rc':>4} {'s':>6} {'nodes':>7} {'valid':>8} {'FLOPs vs FlopCounterMode':>26}  opaque")
    for path in sorted(args.folder.glob("*.py")):
        if args.filter not in path.name:
            continue
        extra = (["--entry", f"{path}:{args.entry_callable}"] if args.entry_callable else []) + \
            (["--inputs-from", args.inputs_from] if args.inputs_from else [])
        row = triage(path, out, args.bound, args.timeout, extra)
        rows.append(row)
        flops = ("agree" if row.get("flops_agree") else
                 f"{row.get('flops_matrix', 0):.4g} vs {row['flop_counter']:.4g}" if "flops_agree" in row else "-")
        print(f"{path.name[:58]:58} {row['rc']!s:>4} {row['seconds']:6.1f} {row.get('nodes', '-')!s:>7} "
              f"{row.get('validation', '-'):>8} {flops:>26}  {','.join(row.get('opaque', []))}", flush=True)
    bad = [r for r in rows if not r["ok"]]
    print(f"\n{len(rows) - len(bad)} of {len(rows)} captured with no opaque op, validation passed, "
          f"FLOPs equal to FlopCounterMode" + (" and a bound" if args.bound else ""))
    for r in bad:
        why = (r.get("error") or (f"opaque {', '.join(r['opaque'])}" if r.get("opaque") else "")
               or (f"validation {r.get('validation')}" if r.get("validation") != "passed" else "")
               or ("FLOPs differ from FlopCounterMode" if not r.get("flops_agree", True) else "")
               or f"bound: {r.get('bound')}")
        print(f"  {r['file']}: {why}")


if __name__ == "__main__":
    main()
