"""torch.export of recurrent layers: the shapes ``fake_rules.recurrent_shapes`` gives fake tensors
equal what eager PyTorch returns (GRU, LSTM with and without projections, tanh and relu RNNs,
batch-first, unbatched, bidirectional), and the export no longer traces the cells."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import torch._decomp.decompositions as decompositions  # noqa: E402

from solar_io.frontends.torch.capture import _export  # noqa: E402

CASES = [
    ("GRU", dict(num_layers=2, bidirectional=True), (5, 3, 4), (4, 3, 6), None),
    ("GRU", dict(num_layers=1, batch_first=True), (3, 5, 4), (1, 3, 6), None),
    ("GRU", dict(num_layers=1), (5, 4), (1, 6), None),  # unbatched
    ("LSTM", dict(num_layers=2, bidirectional=True), (5, 3, 4), (4, 3, 6), (4, 3, 6)),
    ("LSTM", dict(num_layers=1, proj_size=2), (5, 3, 4), (1, 3, 2), (1, 3, 6)),
    ("RNN", dict(num_layers=2, nonlinearity="relu"), (5, 3, 4), (2, 3, 6), None),
    ("RNN", dict(num_layers=1, nonlinearity="tanh", bidirectional=True, bias=False), (5, 3, 4), (2, 3, 6), None),
]


class _Wrap(torch.nn.Module):
    def __init__(self, cls: str, kw: dict):
        super().__init__()
        self.rnn = getattr(torch.nn, cls)(4, 6, **kw)

    def forward(self, x, h, c=None):  # noqa: ANN001, ANN201
        out = self.rnn(x, h if c is None else (h, c))
        return torch.utils._pytree.tree_flatten(out)[0]


@pytest.mark.parametrize("cls,kw,xs,hs,cs", CASES)
def test_export_shapes_equal_eager(cls: str, kw: dict, xs: tuple, hs: tuple, cs: tuple | None,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    model = _Wrap(cls, kw)
    args = [torch.randn(*xs), torch.randn(*hs)] + ([torch.randn(*cs)] if cs else [])
    with torch.no_grad():
        want = [tuple(t.shape) for t in model(*args)]
    cells = []
    for name in ("gru_cell", "lstm_cell", "rnn_cell"):
        original = getattr(decompositions, name)
        monkeypatch.setattr(decompositions, name,
                            lambda *a, _o=original, **k: cells.append(1) or _o(*a, **k))
    with torch.device("meta"):
        meta = _Wrap(cls, kw)
    ep = _export(meta, [a.to("meta") for a in args])
    outs = [n for n in ep.graph.nodes if n.op == "output"][0].args[0]
    got = [tuple(o.meta["val"].shape) for o in outs]
    assert got == want
    assert not cells  # the cells were not traced
    # restored afterwards: eager runs the real kernels
    with torch.no_grad():
        assert [tuple(t.shape) for t in model(*args)] == want
