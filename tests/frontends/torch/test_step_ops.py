"""Every op of a prefill or decode step has a rule, so the capture never decomposes the whole program.

One op without a rule sends the exported program through ``run_decompositions`` (capture.export):
for the Llama-3-8B decode step (32 layers) that was two thirds of the capture (31.6 -> 9.7 s CPU once
``aten.outer``, the rotary angles, and ``aten._assert_tensor_metadata``, export's dtype check before
a ``.to``, got rules). ``outer`` is one product per output element, checked by hand.
"""

from __future__ import annotations

import operator
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from paths import ROOT  # noqa: E402

from solar_io import graph_metrics  # noqa: E402
from solar_io.frontends.torch import capture as cap  # noqa: E402
from solar_io.frontends.torch.capture import capture_file  # noqa: E402
from solar_io.frontends.torch.loader import load_source  # noqa: E402
from solar_io.frontends.torch.phases import Step, step_source  # noqa: E402
from solar_io.frontends.torch.registry import buffer_update_rule, find_rule  # noqa: E402

EXAMPLE = ROOT / "examples" / "models" / "llama_kv.py"


@pytest.mark.parametrize("step", [Step("decode", batch=2, kv_len=16, cache="static"),
                                  Step("decode", batch=2, kv_len=13, cache="paged", page_size=4),
                                  Step("prefill", batch=1, seq=8, kv_len=8)], ids=["static", "paged", "chunk"])
def test_a_step_of_the_example_decoder_needs_no_decomposition(step: Step) -> None:
    src = step_source(load_source(EXAMPLE), step)
    ep = cap._export(src.model("meta"), src.inputs("meta"))
    cap.load_rules()
    missing = {str(n.target) for n in ep.graph.nodes if n.op == "call_function" and n.target is not operator.getitem
               and find_rule(n.target) is None and buffer_update_rule(n) is None}
    assert missing == set()


def test_outer_is_one_product_per_element(tmp_path: Path) -> None:
    p = tmp_path / "outer.py"
    p.write_text(textwrap.dedent("""\
        import torch

        class Model(torch.nn.Module):
            def forward(self, x, y):
                return torch.outer(x, y) + torch.ger(y, x).t()

        def get_inputs():
            return [torch.randn(5), torch.randn(3)]
        """))
    g = capture_file(p)
    assert g.validation.status == "passed", g.validation.reason
    m = graph_metrics(g)
    assert not m.opaque and m.flops_vector == 3 * 5 * 3  # two outer products and their sum, 15 elements each
