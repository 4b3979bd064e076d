"""Capture time and peak memory of Llama-shaped decoders (examples/models/llama_decoder.py).

Each configuration runs in a fresh process (so peak RSS is its own): torch.export on meta
tensors, lowering, YAML writing, no validation. Side by side: FlopCounterMode on the same
model (on meta tensors), its time and its FLOPs, against the captured graph's matrix FLOPs.

    .venv/bin/python benchmarks/bench_capture.py            # 8B shape at 1, 8, 32 layers
    .venv/bin/python benchmarks/bench_capture.py --70b      # also the 70B shape (80 layers)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHAPES = {
    "8B": dict(vocab=128256, d=4096, heads=32, kv_heads=8, ff=14336, seq=2048),
    "70B": dict(vocab=128256, d=8192, heads=64, kv_heads=8, ff=28672, seq=2048),
}

CHILD = r"""
import json, resource, sys, time, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, sys.argv[1])
import torch
from pathlib import Path
from solar_io.frontends.torch.loader import Source, _import_file
from solar_io.frontends.torch.capture import export
from solar_io.frontends.torch.lower import lower
from solar_io import dumps
from solar_io.metrics import graph_metrics
cfg = json.loads(sys.argv[2]); mode = sys.argv[3]
path = Path(sys.argv[1]) / "examples/models/llama_decoder.py"
mod = _import_file(path)
seq = cfg.pop("seq_len")
src = Source(path, path.name, "0" * 64, lambda: mod.Model(**cfg),
             lambda: [torch.randint(0, cfg["vocab"], (1, seq))], torch.bfloat16)
t0 = time.perf_counter()
if mode == "capture":
    ep = export(src)
    t1 = time.perf_counter()
    low = lower(ep, src.name)
    g = low.builder.build(low.outputs, name="llama")
    t2 = time.perf_counter()
    text = dumps(g)
    t3 = time.perf_counter()
    m = graph_metrics(g)
    out = dict(export_s=t1 - t0, lower_s=t2 - t1, yaml_s=t3 - t2, total_s=t3 - t0, nodes=len(g.nodes),
               yaml_mb=len(text) / 1e6, flops_matrix=m.flops_matrix)
else:
    from torch.utils.flop_counter import FlopCounterMode
    model = src.model("meta"); xs = src.inputs("meta")
    with FlopCounterMode(display=False) as fc, torch.device("meta"), torch.no_grad():
        model(*xs)
    out = dict(total_s=time.perf_counter() - t0, flops=fc.get_total_flops())
out["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
print(json.dumps(out))
"""


def run(shape: str, layers: int, mode: str) -> dict:
    cfg = dict(SHAPES[shape], layers=layers, seq_len=SHAPES[shape]["seq"])
    r = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), json.dumps(cfg), mode], capture_output=True,
                       text=True, timeout=1800)
    if r.returncode:
        raise SystemExit(f"{shape} x{layers} {mode} failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    configs = [("8B", 1), ("8B", 8), ("8B", 32)]
    if "--70b" in sys.argv:
        configs.append(("70B", 80))
    print(f"{'shape':6} {'layers':>6} {'export s':>9} {'lower s':>8} {'yaml s':>7} {'total s':>8} {'RSS GiB':>8} "
          f"{'nodes':>7} {'MB':>6} | {'FlopCounter s':>13} {'RSS GiB':>8} {'FLOPs agree':>11}")
    for shape, layers in configs:
        c = run(shape, layers, "capture")
        f = run(shape, layers, "flops")
        agree = "yes" if abs(c["flops_matrix"] - f["flops"]) < 1 else f"{c['flops_matrix']:.4g} vs {f['flops']:.4g}"
        print(f"{shape:6} {layers:6d} {c['export_s']:9.2f} {c['lower_s']:8.2f} {c['yaml_s']:7.2f} {c['total_s']:8.2f} "
              f"{c['peak_rss_gib']:8.2f} {c['nodes']:7d} {c['yaml_mb']:6.1f} | {f['total_s']:13.2f} "
              f"{f['peak_rss_gib']:8.2f} {agree:>11}", flush=True)


if __name__ == "__main__":
    main()
