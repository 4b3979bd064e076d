"""Capturing a long recurrence (issue 19): the bidirectional GRU against torch.export of the same model.

The model has the shape of KernelBench level 3 problem 42 (``42_GRUBidirectionalHidden``: 6 layers,
both directions, 512 steps, batch 10, input 128, hidden 256; it returns the final states): unrolled,
6,144 cells of about 20 nodes, over 120k nodes. The capture lowers two steps per layer-direction and
writes the rest as repeat blocks (format 1.4); validation runs every step on the executor against
eager torch. Each command runs in a fresh process (``bench_capture.run_once``: wall and CPU seconds,
peak RSS); the ratios are to ``torch.export`` on meta of the same model in the same run. Target:
capture <= 60 s on this 2-core machine. ``--file`` benchmarks another model file instead (e.g. the
KernelBench file itself); ``--steps`` changes the sequence length.

    .venv/bin/python benchmarks/bench_repeat.py                 # seq 512, one run of each command
    .venv/bin/python benchmarks/bench_repeat.py --steps 64 --repeat 3
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_capture import HEADER, ROOT, bench, line  # noqa: E402

GRU = '''\
"""A bidirectional GRU returning its final states (the shape of KernelBench level 3 problem 42)."""
import torch

SEQ, BATCH, INPUT, HIDDEN, LAYERS = {steps}, 10, 128, 256, 6


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = torch.nn.GRU(INPUT, HIDDEN, LAYERS, bias=True, batch_first=False, dropout=0, bidirectional=True)

    def forward(self, x, h0):
        _, h_n = self.gru(x, h0)
        return h_n


def get_inputs():
    return [torch.rand(SEQ, BATCH, INPUT), torch.rand(LAYERS * 2, BATCH, HIDDEN)]


def get_init_inputs():
    return []
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=512, help="sequence length of the GRU")
    ap.add_argument("--file", type=Path, help="benchmark this model file instead of the GRU")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=3600.0, help="hang guard per command, seconds")
    a = ap.parse_args()
    print(f"seconds: wall and cpu (user+sys), median of {a.repeat}; GiB: peak RSS; x: ratio to export in this run")
    print(HEADER)
    with tempfile.TemporaryDirectory(prefix="solar-io-bench-repeat-") as tmp:
        path = a.file
        if path is None:
            path = Path(tmp) / f"gru_bidirectional_{a.steps}.py"
            path.write_text(GRU.format(steps=a.steps), encoding="utf-8")
        row = bench(path.stem, path.resolve(), None, a.repeat, a.timeout, False, ROOT)
    print(line(row))
    print(f"  {row['validation']}")


if __name__ == "__main__":
    main()
