"""Numbers a program is traced with (issue 17: SOL-ExecBench's NVFP4 problems failed validation).

- ``torch.tensor(number, device=x.device)`` inside a forward traced on meta: the program's lifted
  constant keeps the number (``capture.numbers_on_cpu``); before, it was a meta tensor with no value and
  validation took the value of a constant of the same name from a CPU export that had taken another
  path (another count of constants), so the graph computed with the wrong number;
- Python numbers ``get_inputs()`` makes from random data (a global decode scale ``w.amax().item()``):
  baked into the program by export, so every later call of the inputs gives the same numbers;
- an index specialised to select nothing (``nonzero`` of a mask no value passes): ``x[idx] = v``
  writes nothing, the graph has no node for it (it was an opaque node with a rank of size 0, a file no
  reader accepts); ``x[mask] = v`` with one value is ``where(mask, v, x)``, charged its mask's read only (the
  graph's ``masked_fill`` assumption lists it: eager's ``index_put_`` writes the selected ones in place);
- the packed fp4 / complex arrays the divergence search turns back into torch tensors.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from solar_io.format.files import checked_dumps, loads  # noqa: E402
from solar_io.frontends.torch.capture import capture_file, capture_source  # noqa: E402
from solar_io.frontends.torch.check import _same_constants  # noqa: E402
from solar_io.frontends.torch.dtype_map import from_numpy, to_numpy  # noqa: E402
from solar_io.frontends.torch.loader import load_source  # noqa: E402
from solar_io.metrics import graph_metrics  # noqa: E402
from solar_io.node_lists import MASKED_WRITES  # noqa: E402

#: A mask assignment the meta export specialises (its values decide which elements), then a number
#: made into a tensor on the input's device.
MASKED_THEN_NUMBER = textwrap.dedent("""
    import torch

    class Model(torch.nn.Module):
        def forward(self, x):
            codes = torch.zeros_like(x)
            codes[x > 0.5] = 1.0
            codes[x < -0.5] = 2.0
            return codes * torch.tensor(3.0, device=x.device) + torch.tensor(0.25, device=x.device)

    def get_inputs():
        return [torch.randn(8, 16)]
    """)


def test_a_number_made_into_a_tensor_on_meta_keeps_its_value(tmp_path: Path):
    p = tmp_path / "masked.py"
    p.write_text(MASKED_THEN_NUMBER)
    cap = capture_source(load_source(p), validate=True)
    assert cap.graph.validation.status == "passed", cap.graph.validation.reason
    numbers = sorted(float(v) for v in cap.program.constants.values() if v.dim() == 0 and v.is_floating_point())
    assert 0.25 in numbers and 3.0 in numbers
    assert all(v.device.type == "cpu" for v in cap.program.constants.values())


MIXED = textwrap.dedent("""
    import torch

    class Model(torch.nn.Module):
        def forward(self, x):
            a = torch.tensor(2.0).expand(3)                    # a CPU number grown into a tensor ...
            b = torch.stack([torch.tensor(1.0), x.sum()])      # ... and stacked with a meta one
            return x[:3] * a + b.sum()

    def get_inputs():
        return [torch.randn(4)]
    """)


def test_a_number_the_forward_mixes_with_meta_tensors_is_traced_on_meta(tmp_path: Path):
    p = tmp_path / "mixed.py"
    p.write_text(MIXED)
    g = capture_file(p)  # the export on CPU numbers fails (two devices); the one on meta does not
    assert g.validation.status == "passed", g.validation.reason


PYTHON_SCALE = textwrap.dedent("""
    import torch

    class Model(torch.nn.Module):
        def forward(self, x, scale):
            return x * torch.tensor(scale, device=x.device)

    def get_inputs():
        w = torch.randn(64)
        return [torch.randn(4, 8), float(w.abs().amax()) * (1.0 + 100 * torch.rand(()).item())]
    """)


def test_python_numbers_of_the_inputs_are_the_ones_the_program_was_traced_with(tmp_path: Path):
    p = tmp_path / "scale.py"
    p.write_text(PYTHON_SCALE)
    src = load_source(p)
    first = src.inputs("meta")[1]
    torch.manual_seed(123)
    again = src.inputs("cpu")
    assert again[1] == first and again[0].shape == (4, 8)
    g = capture_file(p)  # validation's fresh inputs (seed 1) would draw another scale
    assert g.validation.status == "passed", g.validation.reason


EMPTY_SELECTION = textwrap.dedent("""
    import torch

    class Model(torch.nn.Module):
        def forward(self, x):
            y = x.clone()
            rows = torch.nonzero(x > 1000.0)   # data-dependent: specialised, and randn has no such value
            y[rows[:, 0], rows[:, 1]] = 0.0
            y[x > 0.0] = 1.0                   # a boolean mask with one value: where(mask, 1, y)
            return y

    def get_inputs():
        return [torch.randn(8, 16)]
    """)


def test_an_index_that_selects_nothing_writes_nothing(tmp_path: Path):
    p = tmp_path / "empty_selection.py"
    p.write_text(EMPTY_SELECTION)
    g = capture_file(p)
    assert g.validation.status == "passed", g.validation.reason
    assert graph_metrics(g).opaque == ()
    assert all(s > 0 for _, s in g.ranks)
    assert loads(checked_dumps(g)).nodes == g.nodes  # a file a reader accepts
    (fill,) = [n for n in g.nodes if n.op == "aten.index_put"]  # the empty selection has no node
    assert fill.space and all(dict(g.ranks)[r] > 0 for r in fill.space)


def test_a_masked_fill_is_elementwise_and_charged_the_least_any_selection_costs(tmp_path: Path):
    p = tmp_path / "masked.py"
    p.write_text(MASKED_THEN_NUMBER)
    g = capture_file(p)
    fills = [n for n in g.nodes if n.op == "aten.index_put"]
    assert [n.map for n in fills] == ["where", "where"]
    by_name = {m.name: m for m in graph_metrics(g).nodes}
    # eager's index_put_ reads the mask (1 B an element, 8 x 16) and overwrites in place the elements it
    # selects, from none to all: each fill is charged its mask, none of the filled tensor read; the first
    # one also makes the tensor (zeros_like, a value in the graph: eager's fill kernel writes it whole,
    # 8 x 16 x 4 B), the second writes none of it
    masks = [a.tensor for n in fills for a in n.inputs if g.tensor_map[a.tensor].dtype == "bool"]
    for k, (n, mask) in enumerate(zip(fills, masks, strict=True)):
        m = by_name[n.name]
        made = 8 * 16 * 4 if k == 0 else 0
        assert m.bytes_read == {mask: 8 * 16} and m.bytes == 8 * 16 + made and m.flops == 0
        assert m.bytes_written == {n.outputs[0].tensor: made}
    # the mul after them reads the filled tensor whole (4 B an element)
    (mul,) = [n for n in g.nodes if any(a.tensor == fills[1].outputs[0].tensor for a in n.inputs)]
    assert by_name[mul.name].bytes_read[fills[1].outputs[0].tensor] == 8 * 16 * 4
    (said,) = [a for a in g.assumptions if a.kind == "masked_fill"]  # the file says which nodes and why
    assert dict(said.values) == {MASKED_WRITES: tuple(n.name for n in fills)} and "none to all" in said.detail
    assert loads(checked_dumps(g)).assumptions == g.assumptions


def test_a_masked_fill_costs_no_more_than_eager_selecting_nothing(tmp_path: Path):
    """The dispatcher's view of ``x[mask] = v`` with a mask that selects nothing: index_put_ in place,
    the mask read, no element written: the graph's node is charged no more than that."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            self.seen.append(str(func.overloadpacket))
            return func(*args, **(kwargs or {}))

    x, mask = torch.zeros(8, 16), torch.zeros(8, 16, dtype=torch.bool)
    with Ops() as ops:
        x[mask] = 1.0
    assert "aten.index_put_" in ops.seen and "aten.where" not in ops.seen  # in place: x's memory, selected only
    p = tmp_path / "fill.py"
    p.write_text(textwrap.dedent("""
        import torch

        class Model(torch.nn.Module):
            def forward(self, x, keep):
                x = x * 2.0
                x[keep] = 1.0
                return x

        def get_inputs():
            return [torch.randn(8, 16), torch.zeros(8, 16, dtype=torch.bool)]
        """))
    g = capture_file(p)
    (fill,) = [n for n in g.nodes if n.op == "aten.index_put"]
    m = {m.name: m for m in graph_metrics(g).nodes}[fill.name]
    assert m.bytes <= mask.numel() * mask.element_size()  # what eager moves: the mask read, nothing written


def test_cpu_constants_are_used_only_when_they_are_the_programs():
    ours = {"lifted_tensor_0": torch.empty((), device="meta"), "lifted_tensor_1": torch.empty(3, device="meta")}
    same = {"lifted_tensor_0": torch.tensor(2.0), "lifted_tensor_1": torch.ones(3)}
    other = {"lifted_tensor_0": torch.tensor(448.0), "lifted_tensor_1": torch.tensor(0, dtype=torch.uint8),
             "lifted_tensor_2": torch.ones(3)}
    assert _same_constants(ours, same) is same
    assert _same_constants(ours, other) == {}


def test_arrays_turn_back_into_the_torch_dtype_they_came_from():
    packed = torch.randint(0, 256, (4, 8), dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
    back = from_numpy(to_numpy(packed), torch.float4_e2m1fn_x2)
    assert back.dtype == torch.float4_e2m1fn_x2 and torch.equal(back.view(torch.uint8), packed.view(torch.uint8))
    z = torch.randn(3, 5, dtype=torch.complex64)
    assert torch.equal(from_numpy(to_numpy(z), torch.complex64), z)
    b = torch.randn(6).to(torch.bfloat16)
    assert torch.equal(from_numpy(to_numpy(b), torch.bfloat16), b)
    assert np.array_equal(to_numpy(from_numpy(np.arange(4), torch.int32)), np.arange(4))


def test_per_node_validation_does_not_compare_ops_on_empty_tensors(tmp_path: Path):
    """Validated per node (over the budget), the ops on the empty selection (its column selects) have no
    values to compare; checked as one-op programs they would have a rank of size 0, which no graph may
    have, and the whole validation failed (SOL-ExecBench Quant/031)."""
    p = tmp_path / "empty_selection.py"
    p.write_text(EMPTY_SELECTION)
    cap = capture_source(load_source(p), validate=True, validate_budget=1)
    v = cap.graph.validation
    assert v.status == "passed" and v.method == "reference-executor per node", v.reason
    assert "not compared (empty tensors, no values): " in v.reason and "aten.select.int" in v.reason


def test_a_masked_accumulate_is_charged_its_mask_only(tmp_path: Path):
    """``index_put_((mask,), v, accumulate=True)``: ``x + where(mask, v, 0)``, both nodes listed; eager adds
    ``v`` in place to the selected elements (none to all), so the pair is charged the mask read (1 B x 128)
    and the value's (a lifted fp32 constant, 4 B)."""
    p = tmp_path / "acc.py"
    p.write_text(textwrap.dedent("""
        import torch

        class Model(torch.nn.Module):
            def forward(self, x, keep):
                x = x * 2.0
                x.index_put_((keep,), torch.tensor(1.5), accumulate=True)
                return x - 1.0

        def get_inputs():
            return [torch.randn(8, 16), torch.rand(8, 16) > 0.5]
        """))
    g = capture_file(p)
    assert g.validation.status == "passed", g.validation.reason
    fills = [n for n in g.nodes if n.op == "aten.index_put"]
    (said,) = [a for a in g.assumptions if a.kind == "masked_fill"]
    assert sorted(dict(said.values)[MASKED_WRITES]) == sorted(n.name for n in fills) and len(fills) == 2
    by_name = {m.name: m for m in graph_metrics(g).nodes}
    assert sum(by_name[n.name].bytes for n in fills) == 8 * 16 + 4
    (sub,) = [n for n in g.nodes if n.op == "aten.sub"]
    assert by_name[sub.name].bytes == 8 * 16 * 4 * 2  # the result, in x's memory, read whole; y written


def test_quantiser_masks_in_a_value_specialised_capture_are_masked_writes(tmp_path: Path):
    """An NVFP4 quantiser's ``q = zeros_like(x, uint8); q[(x > a) & (x < b)] = k`` in a program whose other
    data-dependent call (an ``item``) makes the capture value-specialised: each mask is a masked write
    (no ``nonzero`` of it recorded: at 16,384 x 12,288 elements those index tables held 13 GiB and were
    charged as reads no fused kernel makes), and every fidelity moves what a fused kernel must, by hand:
    x read once (256 x 128 x 4 B) and q written once (256 x 128 x 1 B)."""
    from solar_io.backends.bound import bound_many

    p = tmp_path / "quant.py"
    p.write_text(textwrap.dedent("""
        import torch

        class Model(torch.nn.Module):
            def forward(self, x):
                if x.abs().max().item() > 1e9:  # data-dependent: the capture is value-specialised
                    return x
                q = torch.zeros_like(x, dtype=torch.uint8)
                q[(x > 0.5) & (x < 2.0)] = 1
                q[x < -0.5] = 2
                return q

        def get_inputs():
            return [torch.randn(256, 128)]
        """))
    g = capture_file(p)
    assert g.validation.status == "passed", g.validation.reason
    assert {a.kind for a in g.assumptions} == {"specialised", "masked_fill"}
    fills = [n.name for n in g.nodes if n.op == "aten.index_put"]
    (said,) = [a for a in g.assumptions if a.kind == "masked_fill"]
    assert len(fills) == 2 and dict(said.values)[MASKED_WRITES] == tuple(fills)
    assert not any("specialised_index" in n.op or "nonzero" in n.op for n in g.nodes)
    (rep,) = bound_many(g, ["h100-sxm"], cache_aware=True)
    want = 256 * 128 * 4 + 256 * 128
    assert graph_metrics(g).boundary_bytes == want
    for fid in (rep.unfused, rep.fused, rep.cache_aware):
        assert fid.bytes == want, fid
