"""Validation of a capture too large to execute whole: per distinct node at reduced sizes.

The Llama-3-8B-shaped decoder of examples/models/llama_decoder.py (bf16, seq 2048), at 1 and
2 layers: the whole graph needs far more than the default --validate-budget (2 GiB), so the
capture is validated per distinct ATen call at reduced sizes (solar_io/frontends/torch/
reduced.py). Prints the time of the capture with and without that validation, and the record.

    .venv/bin/python benchmarks/bench_validate_reduced.py [layers ...]
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from solar_io.frontends.torch.capture import capture_source  # noqa: E402
from solar_io.frontends.torch.loader import Source, _import_file  # noqa: E402

SHAPE = dict(vocab=128256, d=4096, heads=32, kv_heads=8, ff=14336)
SEQ = 2048


def main(layers: list[int]) -> None:
    path = ROOT / "examples" / "models" / "llama_decoder.py"
    mod = _import_file(path)
    print(f"{'layers':>6} {'capture s':>10} {'+ validation s':>15}  status  record")
    for n in layers:
        cfg = dict(SHAPE, layers=n, seq=SEQ)
        src = Source(path, path.name, "0" * 64, lambda cfg=cfg: mod.Model(**cfg),
                     lambda: [torch.randint(0, SHAPE["vocab"], (1, SEQ))], torch.bfloat16)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            capture_source(src, validate=False)
            t1 = time.perf_counter()
            v = capture_source(src, validate=True).graph.validation
            t2 = time.perf_counter()
        print(f"{n:>6} {t1 - t0:>10.1f} {t2 - t1:>15.1f}  {v.status}  {v.reason}")
        print(f"{'':>6} reduced ranks: {dict(v.reduced_ranks)}")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1, 2])
