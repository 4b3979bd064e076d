"""Per-node checks at reduced sizes keep a range's length the reduced size of its output (reduced.py).

``torch.arange(s, s + n)`` (the positions of a chunk after ``s`` cached tokens) has length n; its
start and end are values, not sizes. Shrinking them one by one, as the sizes of a shape are,
gives ``arange(reduced(s), reduced(s + n))``: for s = 8192, n = 64 that is ``arange(16, 16)``,
empty, and the check of a correct program failed (the reference executor refused the graph's
rank of size 0: "per-node check of aten.arange.start (node arange) failed"); other starts give
another length than the reduced one. The check must run ``arange(8192, 8192 + reduced(64))``:
the program's values, ``reduced(n)`` of them.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from solar_io.frontends.common.validation import reduced_size  # noqa: E402
from solar_io.frontends.torch import reduced  # noqa: E402
from solar_io.frontends.torch import rules as _rules  # noqa: E402, F401  (registers the rules)
from solar_io.frontends.torch.capture import capture_source  # noqa: E402
from solar_io.frontends.torch.loader import Source, _FnModule  # noqa: E402
from solar_io.frontends.torch.registry import RULES  # noqa: E402

S, N = 8192, 64


def _call(target, *args):  # noqa: ANN001, ANN202
    g = torch.fx.Graph()
    node = g.call_function(target, args, {"device": torch.device("meta")})
    node.meta["val"] = target(*args, device="meta")
    return reduced._Call(node)


@pytest.mark.parametrize(("target", "args", "want"), [
    (torch.ops.aten.arange.start, (S, S + N), np.arange(S, S + reduced_size(N))),
    (torch.ops.aten.arange.start_step, (S, S + 4 * N, 4), np.arange(S, S + 4 * reduced_size(N), 4)),
    (torch.ops.aten.arange.start_step, (0, 8192, 64), np.arange(0, 64 * reduced_size(128), 64)),
    (torch.ops.aten.arange.default, (4096,), np.arange(reduced_size(4096))),
])
def test_a_reduced_arange_has_the_reduced_length_and_the_program_values(target, args, want):
    fn, makers = _call(target, *args).program([], map_ints=True)
    got = fn(*(m() for m in makers))
    assert got.tolist() == want.tolist()


def _positions_source() -> Source:
    def positions(x):  # a chunk's positions after S cached ones, as a rotary embedding takes them
        return x * torch.arange(S, S + N, device=x.device).float()

    return Source(Path("pos.py"), "pos.py", "0" * 64, lambda: _FnModule(positions), lambda: [torch.randn(N)])


def _validate() -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return capture_source(_positions_source(), validate=True, validate_budget=1 << 8).graph.validation


def test_the_positions_of_a_chunk_are_checked_at_reduced_sizes():
    v = _validate()  # before: "failed", the empty arange(16, 16)
    assert v.status == "passed" and v.method == "reference-executor per node", v.reason
    assert "at reduced sizes, 0 at their own)" in v.reason, v.reason


def test_a_wrong_arange_rule_is_caught_at_reduced_sizes(monkeypatch: pytest.MonkeyPatch):
    """An arange lowered from 0 (its start dropped) fails the per-node check: the check ran
    arange(S, S + 16), not the empty arange(16, 16)."""
    right = RULES["aten.arange"]

    def wrong(ctx, a):  # noqa: ANN001, ANN202
        start = a.start if a.start is not None else 0
        return right(ctx, type(a)({**a.__dict__, "start": 0, "end": a.end - start}))

    monkeypatch.setitem(RULES, "aten.arange", wrong)
    v = _validate()
    assert v.method == "reference-executor per node"
    assert v.status == "failed" and "aten.arange" in v.reason, v.reason
