"""Time of ``solar_io.bound`` per graph and per extra chip, as ratios to anchors of the same run.

Issue 19's target: ``bound`` <= 1 s for any graph under 5k nodes on one chip, cache-aware fidelity
included, and each extra chip <= 20% of the first (the chip-independent work, the graph's traffic
model, is built once per graph object: :func:`solar_io.backends.traffic.traffic_of`). The machine is
shared and noisy, so every figure is printed next to anchors measured in the same run: ``load``
(reading the file) and the bound without the cache-aware fidelity; times are CPU seconds of the
process and its children (CBC runs as a subprocess), steadier under load than wall time
(``--wall`` for wall-clock seconds).

Graphs (``models``, the default): a ResNet-50 (``benchmarks/bound_models/resnet50.py``, 224x224,
batch 1, 813 nodes) and two Llama-shaped decoders (``examples/models/llama_decoder.py`` at seq 2048,
bf16, captured on meta tensors): Llama-3-8B's 32 layers (1,866 nodes) and Llama-3-70B's 80 layers
(4,650 nodes, the largest graph under the issue's 5k-node mark), captured once into ``--cache DIR`` (default
``/tmp/solar-io-bench-bound``; torch needed for that step only). Columns, seconds and ratios:

- ``load``: :func:`solar_io.load` of the file; ``roofline``: ``bound(..., cache_aware=False)`` on
  a freshly loaded graph (its traffic model built inside; the load not included);
- ``bound``: ``bound(..., cache_aware=True)`` on a fresh graph object with the tiling caches emptied
  (the first chip, cold), and ``/load`` its ratio to the load;
- ``+chip``: the same graph object bounded again on another chip with the same on-chip capacity
  (h200-sxm after h100-sxm, both 83.2 MB), and ``/bound`` its ratio to the first chip;
- ``+chip S``: again on a chip with another on-chip capacity (h100-pcie, 79.0 MB: the tiling
  problems at the new S are solved again; the traffic model and every capacity-independent table
  are shared), and ``/bound``;
- ``4 chips``: ``bound_many`` on h100-sxm, h200-sxm, h100-pcie and a100-sxm-80gb, cache-aware,
  fresh graph object, caches emptied, and ``/bound`` (1 + the three extra chips' shares).

``cli`` (printed after ``models``; ``--cli`` prints it alone): the command end to end, ``python -m solar_io
bound FILE --hw h100-sxm`` (imports, file load and validation, the spec, the cache-aware bound, the table)
and ``--hw h100-sxm,h100-pcie`` (a second chip of another on-chip capacity), each a subprocess, as wall
and CPU seconds (user + system, the process and its children) and as ratios to anchors run in the same
loop: ``python -c "import yaml"`` and ``python -c "import solar_io"`` (``python -c pass`` printed too: the
interpreter alone); the best of ``--repeat`` runs of each, interleaved, so that load on the machine hits
all alike. The package's bytecode is written first (``compileall``), as an install has it.

``--synthetic N ...`` instead times the synthetic transformer-like graphs of issue 3 (10k, 30k and
100k nodes by default) without the cache-aware fidelity, metrics and bound.

Run: ``.venv/bin/python benchmarks/bench_bound.py`` or ``... --synthetic 10000 30000``.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CPU = "--wall" not in sys.argv  # CPU seconds (self and children) unless --wall: steadier on a shared machine
sys.path.insert(0, str(Path(__file__).parent))

import solar_io  # noqa: E402
from solar_io.backends import bound_many  # noqa: E402
from solar_io.backends.tiling import clear_cache, clear_chain_cache  # noqa: E402

LLAMA = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, sys.argv[1])
import torch
from pathlib import Path
from solar_io import dumps
from solar_io.frontends.torch.capture import export
from solar_io.frontends.torch.loader import Source, _import_file
from solar_io.frontends.torch.lower import lower
cfg = json.loads(sys.argv[3])
path = Path(sys.argv[1]) / "examples/models/llama_decoder.py"
mod = _import_file(path)
src = Source(path, path.name, "0" * 64, lambda: mod.Model(**cfg),
             lambda: [torch.randint(0, cfg["vocab"], (1, cfg["seq"]))], torch.bfloat16)
low = lower(export(src), src.name)
Path(sys.argv[2]).write_text(dumps(low.builder.build(low.outputs, name=f"llama-{cfg['layers']}")))
"""
#: The decoders captured: Llama-3-8B's shape (32 layers) and Llama-3-70B's (80 layers, hidden 8192, 64 heads,
#: 8 KV heads, intermediate 28672: Meta's config.json), both at seq 2048 and the 128,256-token vocabulary.
LLAMAS = {"llama32": dict(vocab=128256, d=4096, heads=32, kv_heads=8, ff=14336, seq=2048, layers=32),
          "llama80": dict(vocab=128256, d=8192, heads=64, kv_heads=8, ff=28672, seq=2048, layers=80)}


def _cpu() -> float:
    """CPU seconds of this process and its children (CBC solves run in a subprocess)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _timed(fn):  # noqa: ANN001, ANN202
    gc.collect()
    clock = _cpu if CPU else time.perf_counter
    t0 = clock()
    out = fn()
    return out, clock() - t0


def _capture(cache: Path) -> list[Path]:
    cache.mkdir(parents=True, exist_ok=True)
    import json

    resnet = cache / "resnet50.yaml"
    if not resnet.exists():
        subprocess.run([sys.executable, "-m", "solar_io", "capture", str(ROOT / "benchmarks/bound_models/resnet50.py"),
                        "--no-validate", "-o", str(resnet)], check=True, timeout=1800)
    out = [resnet]
    for name, cfg in LLAMAS.items():
        out.append(cache / f"{name}.yaml")
        if not out[-1].exists():
            subprocess.run([sys.executable, "-c", LLAMA, str(ROOT), str(out[-1]), json.dumps(cfg)], check=True,
                           timeout=1800)
    return out


def _cold() -> None:
    clear_cache()
    clear_chain_cache()


def models(cache: Path) -> None:
    print(f"{'graph':14} {'nodes':>6} {'load s':>7} {'roofline s':>10} {'bound s':>8} {'/load':>6} "
          f"{'+chip s':>8} {'/bound':>7} {'+chip S s':>10} {'/bound':>7} {'4 chips s':>10} {'/bound':>7}")
    for path in _capture(cache):
        _, t_load = _timed(lambda p=path: solar_io.load(p))
        g0 = solar_io.load(path)
        _, t_roof = _timed(lambda g=g0: solar_io.bound(g, "h100-sxm"))
        g = solar_io.load(path)
        _cold()
        _, t_first = _timed(lambda g=g: solar_io.bound(g, "h100-sxm", cache_aware=True))
        _, t_same = _timed(lambda g=g: solar_io.bound(g, "h200-sxm", cache_aware=True))
        _, t_other = _timed(lambda g=g: solar_io.bound(g, "h100-pcie", cache_aware=True))
        g4 = solar_io.load(path)
        _cold()
        _, t_many = _timed(lambda g=g4: bound_many(g, ["h100-sxm", "h200-sxm", "h100-pcie", "a100-sxm-80gb"],
                                                   cache_aware=True))
        print(f"{path.stem:14} {len(g.nodes):6d} {t_load:7.3f} {t_roof:10.3f} {t_first:8.3f} {t_first / t_load:6.2f} "
              f"{t_same:8.3f} {t_same / t_first:7.2f} {t_other:10.3f} {t_other / t_first:7.2f} {t_many:10.3f} "
              f"{t_many / t_first:7.2f}", flush=True)


def _run(argv: list[str]) -> tuple[float, float]:
    """(wall s, CPU s: user + system) of one subprocess (its own CPU and its children's: CBC)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter() - t0, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _compiled() -> None:
    """Write the package's bytecode first (``compileall``): an installed package runs from it, and a
    source tree run with ``PYTHONDONTWRITEBYTECODE`` would otherwise compile every changed module on
    every run (0.1-0.2 s that no user pays)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "solar_io")], check=True, env=env,
                   stdout=subprocess.DEVNULL, timeout=600)


def cli(cache: Path, repeat: int = 3) -> None:
    """``solar-io bound`` end to end per graph, next to anchors run in the same loop: ``python -c pass``
    (the interpreter), ``python -c "import yaml"`` and ``python -c "import solar_io"``."""
    py = sys.executable
    _compiled()
    anchors = {"pass": [py, "-c", "pass"], "yaml": [py, "-c", "import yaml"], "import": [py, "-c", "import solar_io"]}
    print(f"{'graph (cli)':14} {'pass cpu':>8} {'yaml cpu':>8} {'import cpu':>10} {'bound wall':>10} {'cpu':>6} "
          f"{'/yaml':>6} {'/import':>7} {'2 chips wall':>12} {'cpu':>6} {'/import':>7} {'+chip S /bound cpu':>18}")
    for path in _capture(cache):
        one = [py, "-m", "solar_io", "bound", str(path), "--hw", "h100-sxm"]
        two = [py, "-m", "solar_io", "bound", str(path), "--hw", "h100-sxm,h100-pcie"]
        argvs = {**anchors, "one": one, "two": two}
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in argvs}
        for _ in range(repeat):
            for name, argv in argvs.items():
                runs[name].append(_run(argv))
        best = {n: tuple(min(x[k] for x in runs[n]) for k in range(2)) for n in argvs}
        (_, cp), (_, cy), (_, ci), (w1, c1), (w2, c2) = (best[n] for n in ("pass", "yaml", "import", "one", "two"))
        print(f"{path.stem:14} {cp:8.3f} {cy:8.3f} {ci:10.3f} {w1:10.3f} {c1:6.3f} {c1 / cy:6.2f} {c1 / ci:7.2f} "
              f"{w2:12.3f} {c2:6.3f} {c2 / ci:7.2f} {(c2 - c1) / c1:18.2f}", flush=True)


def synthetic(sizes: list[int]) -> None:
    from synthetic import transformer_like

    print(f"{'nodes':>8} {'metrics s':>10} {'bound s':>8} {'/metrics':>9} {'+chip s':>8} {'/bound':>7}")
    for n in sizes:
        g = transformer_like(n)
        _, t_metrics = _timed(lambda g=g: solar_io.graph_metrics(g))
        _, t_bound = _timed(lambda g=g: solar_io.bound(g, "h100"))
        _, t_more = _timed(lambda g=g: solar_io.bound(g, "b200"))
        print(f"{len(g.nodes):>8} {t_metrics:>10.2f} {t_bound:>8.2f} {t_bound / t_metrics:>9.2f} {t_more:>8.2f} "
              f"{t_more / t_bound:>7.2f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=Path("/tmp/solar-io-bench-bound"))
    ap.add_argument("--synthetic", type=int, nargs="*")
    ap.add_argument("--wall", action="store_true", help="wall-clock seconds instead of CPU seconds")
    ap.add_argument("--cli", action="store_true", help="only the end-to-end command rows")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each command in the cli rows (best kept)")
    args = ap.parse_args()
    if args.synthetic is not None:
        synthetic(args.synthetic or [10_000, 30_000, 100_000])
    else:
        if not args.cli:
            models(args.cache)
        cli(args.cache, args.repeat)


if __name__ == "__main__":
    main()
