"""Loop IR: a kernel that stores a broadcast product in a Temp and sums it in a second nest lifts to
one contraction (frontends/common/contract.py, applied by the tracer); the same program with the
product also returned keeps both nests as written."""

from __future__ import annotations

import textwrap
from pathlib import Path

from solar_io.frontends.common.contract import CONTRACTION_ATTR
from solar_io.frontends.loopir import capture_file
from solar_io.metrics import graph_metrics

PROGRAM = """\
from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, kernel

M = Dim("M", 6, parallel=True)
N = Dim("N", 7)
K = Dim("K", 5)


@kernel
def outer_sum(a: Tensor("M,K"), b: Tensor("K,N"), p: {P}, c: Out("M,N")):
    for m in M:
        for n in N:
            for k in K:
                p[m, n, k] = a[m, k] * b[k, n]
    for m in M:
        for n in N:
            for k in K:
                c[m, n] += p[m, n, k]


def model(A: Tensor("M,K"), B: Tensor("K,N")):
    {RETURN}
"""


def _capture(tmp_path: Path, temp: bool):
    text = PROGRAM.format(P='Temp("M,N,K")' if temp else 'Out("M,N,K")',
                          RETURN='return {"C": outer_sum(A, B)}' if temp else
                          'p, c = outer_sum(A, B)\n    return {"P": p, "C": c}')
    path = tmp_path / "outer_sum.py"
    path.write_text(textwrap.dedent(text))
    g = capture_file(path, jit=False)
    assert g.validation.status == "passed", g.validation.reason
    return g


def test_product_in_a_temp_then_summed_is_one_contraction(tmp_path: Path):
    g = _capture(tmp_path, temp=True)
    (node,) = g.nodes
    assert (node.map, node.reduce, dict(node.attrs)[CONTRACTION_ATTR]) == ("mul", "add", "outer_sum.p")
    assert [a.tensor for a in node.inputs] == ["A", "B"]
    assert graph_metrics(g).macs == 6 * 7 * 5


def test_product_that_is_an_output_stays(tmp_path: Path):
    g = _capture(tmp_path, temp=False)
    assert [(n.map, n.reduce) for n in g.nodes] == [("mul", "none"), ("identity", "add")]
    assert graph_metrics(g).macs == 0
