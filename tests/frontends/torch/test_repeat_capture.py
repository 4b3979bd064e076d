"""Recurrent layers captured with repeat blocks (format 1.4) are the unrolled capture, exactly.

``rules/rnn.py`` lowers two steps of each layer-direction and emits the rest as instances of the
second (``repeat_steps``). The graph must be identical to lowering every step (``repeat=False``):
the same nodes and tensors, so every count and bound is the same; its MACs equal the closed form
``sum over layers and directions of T * B * 3H * (D_in + H)`` (GRU; 4H for LSTM, H for RNN); the
file holds the blocks and reads back as the same graph; validation against eager torch passes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import solar_io  # noqa: E402
from solar_io.format import repeat  # noqa: E402
from solar_io.format.files import dumps  # noqa: E402
from solar_io.frontends.torch.capture import capture_source  # noqa: E402
from solar_io.frontends.torch.loader import load_source  # noqa: E402
from solar_io.metrics import graph_metrics  # noqa: E402

MODEL = '''
import torch

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.{cls}({d}, {h}, {layers}, bidirectional={bidir}, batch_first={bf})

    def forward(self, x, h0{c_arg}):
        out, state = self.rnn(x, {state})
        return out, state{c_out}

def get_inputs():
    x = torch.randn({x_shape})
    return [x, torch.randn({layers} * {dirs}, {b}, {h}){c_in}]

def get_init_inputs():
    return []
'''
GATES = {"GRU": 3, "LSTM": 4, "RNN": 1}


def _source(tmp_path: Path, cls: str, layers: int, bidir: bool, steps: int = 7, b: int = 2, d: int = 3, h: int = 4,
            batch_first: bool = False) -> object:
    lstm = cls == "LSTM"
    dirs = 2 if bidir else 1
    text = MODEL.format(cls=cls, d=d, h=h, layers=layers, bidir=bidir, bf=batch_first, dirs=dirs, b=b,
                        c_arg=", c0" if lstm else "", state="(h0, c0)" if lstm else "h0",
                        c_out="[0], state[1]" if lstm else "",
                        x_shape=f"{b}, {steps}, {d}" if batch_first else f"{steps}, {b}, {d}",
                        c_in=f", torch.randn({layers} * {dirs}, {b}, {h})" if lstm else "")
    path = tmp_path / f"{cls.lower()}_model.py"
    path.write_text(text, encoding="utf-8")
    return load_source(path)


@pytest.mark.parametrize("cls,layers,bidir,bf", [("GRU", 2, True, False), ("LSTM", 2, False, True),
                                                 ("RNN", 1, True, False)])
def test_repeat_capture_is_the_unrolled_capture(tmp_path: Path, cls: str, layers: int, bidir: bool, bf: bool):
    steps, b, d, h = 7, 2, 3, 4
    src = _source(tmp_path, cls, layers, bidir, steps, b, d, h, bf)
    g = capture_source(src).graph
    flat = capture_source(src, repeat=False, validate=False).graph
    assert g.validation.status == "passed", g.validation.reason
    assert g.repeats and not flat.repeats
    assert g.nodes == flat.nodes and g.tensors == flat.tensors and g.ranks == flat.ranks
    m, mf = graph_metrics(g), graph_metrics(flat)
    assert (m.macs, m.bytes, m.boundary_bytes, m.flops_vector, m.transcendental) == \
        (mf.macs, mf.bytes, mf.boundary_bytes, mf.flops_vector, mf.transcendental)
    dirs = 2 if bidir else 1
    gates = GATES[cls] * h
    want = dirs * sum(steps * b * gates * ((d if layer == 0 else dirs * h) + h) for layer in range(layers))
    assert m.macs == want
    text = dumps(g)
    assert "repeat:" in text and len(text) < 0.75 * len(dumps(repeat.unrolled(g)))  # 5 of 7 steps once
    assert solar_io.loads(text) == g
