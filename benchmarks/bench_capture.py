"""Capture speed and memory against torch.export on meta alone (issue 19).

Per model, three commands, each in a fresh process (imports and memory never leak between them),
each run ``--repeat`` times:

- ``export``: a plain script that imports torch, builds the model on the meta device (``with
  torch.device("meta")``, cast to the capture's dtype), makes its inputs there and runs
  ``torch.export.export(..., strict=False)``: the anchor, what any export-based tool pays;
- ``capture --no-validate``: ``python -m solar_io capture FILE --no-validate -o OUT.yaml``;
- ``capture``: the same with the default validation.

Each row gives the median over the repeats of the wall seconds, the CPU seconds (user + system of
the process and its children, from ``os.wait4``; on a loaded machine the wall time mostly measures
the load, the CPU time the work) and the peak resident memory; then the ratios of both capture
commands to the export of the same model measured in the same run (the figures issue 19 targets:
capture <= 1.5x export, --no-validate <= 1.1x, peak <= 1 GiB for the Llama shapes). Models:

- ``8b``: ``examples/models/llama3_8b.py`` (32 layers, width 4096, seq 4096, bf16: a prefill step);
- ``70b``: the same blocks at the Llama-3-70B shape (80 layers, width 8192, 64 heads, 8 KV heads,
  feed-forward 28672, seq 4096, bf16), written to a temporary file by this script;
- zoo models (``benchmarks/model_zoo.py``: library configs, random weights, nothing downloaded; needs
  ``transformers``), named with ``--zoo``.

    .venv/bin/python benchmarks/bench_capture.py                       # 8b, 70b, zoo llama-3,gpt-2,bert,vit
    .venv/bin/python benchmarks/bench_capture.py --models 8b --repeat 1
    .venv/bin/python benchmarks/bench_capture.py --models zoo --zoo all
    .venv/bin/python benchmarks/bench_capture.py --flops                # also FlopCounterMode vs graph FLOPs
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LLAMA_8B = ROOT / "examples/models/llama3_8b.py"
DEFAULT_ZOO = ("llama-3", "gpt-2", "bert", "vit")

LLAMA_70B = '''\
"""The blocks of examples/models/llama3_8b.py at the Llama-3-70B shape (Meta's config.json of
meta-llama/Meta-Llama-3-70B: 80 layers, hidden 8192, 64 heads, 8 KV heads, intermediate 28672)."""
import importlib.util

import torch

_spec = importlib.util.spec_from_file_location("bench_llama3_8b", {path!r})
_m = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_m)


class Model(_m.Model):
    def __init__(self):
        super().__init__(d=8192, layers=80, heads=64, kv_heads=8, ff=28672, seq=_m.SEQ)


def get_inputs():
    return [torch.randint(0, _m.VOCAB, (1, _m.SEQ))]
'''

#: The anchor: torch.export of the model on meta tensors, nothing of solar_io imported.
EXPORT = r"""
import importlib.util, sys, warnings
warnings.simplefilter("ignore")
import torch
path, dtype = sys.argv[1], sys.argv[2]
spec = importlib.util.spec_from_file_location("bench_model", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
init = getattr(mod, "get_init_inputs", lambda: [])
with torch.device("meta"):
    model = mod.Model(*init())
    xs = list(mod.get_inputs())
if dtype != "none":
    dt = getattr(torch, dtype)
    model = model.to(dt)
    xs = [x.to(dt) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in xs]
with torch.device("meta"):
    ep = torch.export.export(model, tuple(xs), strict=False)
print(len(ep.graph.nodes))
"""

#: FlopCounterMode on the meta model (``--flops``): its matmul FLOPs against the graph's.
FLOPS = r"""
import importlib.util, json, sys, warnings
warnings.simplefilter("ignore")
import torch
from torch.utils.flop_counter import FlopCounterMode
path, dtype = sys.argv[1], sys.argv[2]
spec = importlib.util.spec_from_file_location("bench_model", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
with torch.device("meta"):
    model = mod.Model(*getattr(mod, "get_init_inputs", lambda: [])())
    xs = list(mod.get_inputs())
if dtype != "none":
    model = model.to(getattr(torch, dtype))
with FlopCounterMode(display=False) as fc, torch.device("meta"), torch.no_grad():
    model(*xs)
print(json.dumps(fc.get_total_flops()))
"""

TORCH_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", None: "none"}


def run_once(cmd: list[str], timeout: float, cwd: Path = ROOT) -> dict:
    """Wall and CPU seconds (user + system, ``os.wait4``) and peak RSS (GiB) of one command in a fresh
    process."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, cwd=cwd)
        deadline = t0 + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                os.wait4(proc.pid, 0)
                raise SystemExit(f"{' '.join(cmd[:6])} ran past {timeout:.0f} s")
            time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        text, errs = out.read(), err.read()
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd[:6])} failed ({proc.returncode}):\n{errs[-2000:]}")
    return dict(wall=wall, cpu=usage.ru_utime + usage.ru_stime, user=usage.ru_utime,
                rss=usage.ru_maxrss / 2**20, out=text, err=errs)


def commands(path: Path, dtype: str | None, out: Path) -> dict[str, list[str]]:
    py = sys.executable
    cap = [py, "-m", "solar_io", "capture", str(path), "-o", str(out)] + (["--dtype", dtype] if dtype else [])
    return {"export": [py, "-c", EXPORT, str(path), TORCH_DTYPE[dtype]],
            "no-validate": cap + ["--no-validate"],
            "capture": cap}


def bench(name: str, path: Path, dtype: str | None, repeat: int, timeout: float, flops: bool,
          tree: Path = ROOT) -> dict:
    """Median figures of each command for one model; modes interleaved so load drifts hit all alike."""
    with tempfile.TemporaryDirectory(prefix="solar-io-bench-") as tmp:
        cmds = commands(path, dtype, Path(tmp) / "g.yaml")
        runs: dict[str, list[dict]] = {k: [] for k in cmds}
        for _ in range(repeat):
            for k, cmd in cmds.items():
                runs[k].append(run_once(cmd, timeout, tree))
        row = {k: {f: statistics.median(r[f] for r in rs) for f in ("wall", "cpu", "user", "rss")}
               for k, rs in runs.items()}
        row["name"] = name
        said = runs["capture"][-1]["out"] + runs["capture"][-1]["err"]
        validation = [ln for ln in said.splitlines() if "validation" in ln]
        row["validation"] = validation[-1].strip()[:90] if validation else ""
        if flops:
            from solar_io import load
            from solar_io.metrics import graph_metrics

            g = load(Path(tmp) / "g.yaml")
            fc = json.loads(run_once([sys.executable, "-c", FLOPS, str(path), TORCH_DTYPE[dtype]],
                                     timeout)["out"].strip().splitlines()[-1])
            row["flops"] = (graph_metrics(g).flops_matrix, fc)
    return row


def line(row: dict) -> str:
    e, n, c = row["export"], row["no-validate"], row["capture"]
    text = (f"{row['name'][:22]:22} {e['wall']:7.1f} {e['cpu']:6.1f} {e['rss']:5.2f} | "
            f"{n['wall']:7.1f} {n['cpu']:6.1f} {n['rss']:5.2f} {n['cpu'] / e['cpu']:5.2f} "
            f"{n['wall'] / e['wall']:5.2f} | "
            f"{c['wall']:7.1f} {c['cpu']:6.1f} {c['rss']:5.2f} {c['cpu'] / e['cpu']:5.2f} {c['wall'] / e['wall']:5.2f}")
    if "flops" in row:
        g, f = row["flops"]
        text += "  FLOPs " + ("agree" if abs(g - f) < 1 else f"{g:.4g} vs {f:.4g}")
    return text


HEADER = (f"{'model':22} {'export':>7} {'cpu':>6} {'GiB':>5} | {'no-val':>7} {'cpu':>6} {'GiB':>5} {'x cpu':>5} "
          f"{'x wall':>5} | {'capture':>7} {'cpu':>6} {'GiB':>5} {'x cpu':>5} {'x wall':>5}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="8b,70b,zoo", help="comma-separated: 8b, 70b, zoo")
    ap.add_argument("--zoo", default=",".join(DEFAULT_ZOO), help="zoo model names (model_zoo.ZOO), or 'all'")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=3600.0, help="hang guard per command, seconds")
    ap.add_argument("--tree", type=Path, default=ROOT,
                    help="run `python -m solar_io` from this checkout (a before/after comparison)")
    ap.add_argument("--flops", action="store_true", help="also FlopCounterMode's FLOPs vs the graph's matrix FLOPs")
    a = ap.parse_args()
    models = a.models.split(",")
    print(f"seconds: wall and cpu (user+sys), median of {a.repeat}; GiB: peak RSS; x: ratio to export in this run")
    print(HEADER, flush=True)
    with tempfile.TemporaryDirectory(prefix="solar-io-bench-models-") as tmp:
        todo: list[tuple[str, Path, str | None]] = []
        if "8b" in models:
            todo.append(("llama-3-8b (32L, s4096)", LLAMA_8B, "bf16"))
        if "70b" in models:
            p = Path(tmp) / "llama3_70b.py"
            p.write_text(LLAMA_70B.format(path=str(LLAMA_8B)))
            todo.append(("llama-3-70b (80L, s4096)", p, "bf16"))
        if "zoo" in models:
            sys.path.insert(0, str(ROOT / "benchmarks"))
            import model_zoo

            names = list(model_zoo.ZOO) if a.zoo == "all" else a.zoo.split(",")
            todo += [(n, p, None) for n, p, _ in model_zoo._files(Path(tmp), names)]
        for name, path, dtype in todo:
            row = bench(name, path, dtype, a.repeat, a.timeout, a.flops, a.tree.resolve())
            print(line(row), flush=True)
            if row["validation"]:
                print(f"{'':22}   validation: {row['validation']}", flush=True)


if __name__ == "__main__":
    main()
