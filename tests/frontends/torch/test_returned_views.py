"""An output copied out of a broadcast is charged as the broadcast view (``returned_views``).

Hand count: ``x`` is 8 x 16 fp32 (512 B). ``x.sigmoid()[None].expand(4, 8, 16).contiguous()`` is
charged the 512 B of the sigmoid once (a caller comparing values accepts the expanded view; SOL-ExecBench
L1/028's baseline returns it), not the 2,048 B of four copies; ``x.t().contiguous()`` has as many distinct
elements as it has, so it stays a copy (512 B written). Boundary: 512 B read + 512 B + 512 B = 1,536 B.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from solar_io import graph_metrics  # noqa: E402
from solar_io.backends.roofline import bound  # noqa: E402
from solar_io.frontends.common.returned_views import RETURNED_VIEWS  # noqa: E402
from solar_io.frontends.torch.capture import capture_source  # noqa: E402
from solar_io.frontends.torch.loader import Source, _FnModule  # noqa: E402


def masks(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x.sigmoid()[None].expand(4, 8, 16).contiguous(), x.t().contiguous()


def test_an_output_copied_from_a_broadcast_is_charged_once():
    src = Source(Path("case.py"), "case.py", "0" * 64, lambda: _FnModule(masks), lambda: [torch.randn(8, 16)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = capture_source(src, validate=True).graph
    assert g.validation.status == "passed"
    (note,) = [a for a in g.assumptions if a.kind == RETURNED_VIEWS]
    writer = {o.tensor: n.name for n in g.nodes for o in n.outputs}
    first, second = (t.name for t in g.tensors if t.role == "output")
    assert dict(note.values)["nodes"] == (writer[first],)
    assert graph_metrics(g).boundary_bytes == 1536.0
    r = bound(g, "b200", capacity=1e30)
    assert r.fused.bytes == 1536.0 and r.unfused.bytes >= r.fused.bytes
