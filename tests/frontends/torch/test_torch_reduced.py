"""Validation per node at reduced sizes, for captures over --validate-budget (frontends/torch/reduced.py)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")


from paths import ROOT  # noqa: E402

from solar_io import validate  # noqa: E402
from solar_io.frontends.torch import reduced  # noqa: E402
from solar_io.frontends.torch.capture import capture_source  # noqa: E402
from solar_io.frontends.torch.loader import load_source  # noqa: E402
from solar_io.frontends.torch.registry import RULES  # noqa: E402

TINY = 1 << 10  # bytes: every corpus model is over this budget


def capture(name: str | Path, budget: int = TINY, **kw):
    """A corpus model by name (tests/models), or a model file, captured and validated within ``budget``."""
    path = name if isinstance(name, Path) else ROOT / "tests" / "models" / f"{name}.py"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return capture_source(load_source(path), validate=True, validate_budget=budget, **kw)


def test_reduced_sizes_keep_small_sizes_and_divisors():
    assert [reduced.reduced_size(s) for s in (1, 7, 16, 17, 4096, 14014, 128256, 50257, 96)] == \
        [1, 7, 16, 16, 16, 14, 16, 16, 16]
    # every reduced size divides its size unless no divisor of at least CAP // 4 exists
    for s in range(17, 2000):
        r = reduced.reduced_size(s)
        assert r <= reduced.CAP and (s % r == 0 or max(d for d in range(1, 17) if s % d == 0) < 4)


def test_an_over_budget_capture_is_validated_per_distinct_node():
    g = capture("llama_block").graph
    v = g.validation
    assert v.status == "passed" and v.method == "reference-executor per node"
    assert "validated per node at reduced sizes: " in v.reason and "distinct nodes" in v.reason
    checked, distinct = (int(x) for x in v.reason.split("reduced sizes: ")[1].split(" distinct")[0].split(" of "))
    assert 0 < checked <= distinct
    assert v.reduced_ranks and all(s < g.rank_sizes[r] for r, s in v.reduced_ranks)
    assert not [i for i in validate(g) if i.severity == "error"]


def test_a_wrong_rule_is_caught_at_reduced_sizes(monkeypatch: pytest.MonkeyPatch):
    """A silu lowered as a sigmoid passes nothing: the per-node check names the op."""
    def wrong(ctx, a):  # noqa: ANN001, ANN202
        return ctx.ew("sigmoid", a.self, dtype=ctx.out_dtype())

    key = "aten.silu" if "aten.silu" in RULES else next(k for k in RULES if k.startswith("aten.silu"))
    monkeypatch.setitem(RULES, key, wrong)
    v = capture("llama_block").graph.validation
    assert v.status == "failed" and "aten.silu" in v.reason


def test_within_budget_the_whole_graph_is_still_run():
    v = capture("mlp", budget=2 << 30).graph.validation
    assert v.status == "passed" and v.method == "reference-executor"


def _split_heads_source():
    from solar_io.frontends.torch.loader import Source, _FnModule

    def split(x):  # (1, 32, 512) -> (1, 32, 16, 32) -> heads first: a view that splits the hidden dim
        return (x.view(1, 32, 16, 32).transpose(1, 2) * 2.0).reshape(1, 16, 1024)

    return Source(Path("split.py"), "split.py", "0" * 64, lambda: _FnModule(split), lambda: [torch.randn(1, 32, 512)])


def test_a_reshape_that_splits_dims_is_checked_at_reduced_sizes():
    # sizes mapped alike give (1, 16, 16) -> (1, 16, 16, 16), which no view does; the split keeps its
    # structure instead: the input is (1, 16, 256), the product of the reduced dims it splits into
    v = capture_source(_split_heads_source(), validate=True, validate_budget=TINY).graph.validation
    assert v.status == "passed", v.reason
    assert v.reason.endswith("at reduced sizes, 0 at their own)"), v.reason
    g = torch.fx.Graph()
    x = g.placeholder("x")
    x.meta["val"] = torch.empty(2, 32, 512, device="meta")
    split, shapes = reduced.reshape_reduced(reduced._Call(g.call_function(torch.ops.aten.view.default,
                                                                            (x, [2, 32, 16, -1]))))
    assert shapes == [(2, 16, 256)] and split.args[1] == [2, 16, 16, 16]
    merge, shapes = reduced.reshape_reduced(reduced._Call(g.call_function(torch.ops.aten.reshape.default,
                                                                            (x, [64, 512]))))
    assert shapes == [(2, 16, 16)] and merge.args[1] == [32, 16]
    many = g.call_function(torch.ops.aten.view.default, (x, [2, 64, 256]))  # 32 x 512 -> 64 x 256: no one side
    assert reduced.reshape_reduced(reduced._Call(many)) is None


def test_a_wrong_view_rule_is_caught_at_reduced_sizes(monkeypatch: pytest.MonkeyPatch):
    """A split lowered with its two new dims swapped (a transposed layout) fails its per-node check."""
    def wrong(ctx, a):  # noqa: ANN001, ANN202
        *outer, h, e = [int(s) for s in a.size]
        return ctx.permute(ctx.reshape(a.self, [*outer, e, h]), [*range(len(outer)), len(outer) + 1, len(outer)])

    monkeypatch.setitem(RULES, "aten.view", wrong)
    v = capture_source(_split_heads_source(), validate=True, validate_budget=TINY).graph.validation
    assert v.status == "failed" and "aten.view" in v.reason, v.reason


ROUTED = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """Top-1 routing of 64 tokens to 2 experts: each expert's rows are a specialised index of 32 rows."""

    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(8, 2, bias=False)
        self.experts = nn.ModuleList(nn.Linear(8, 8, bias=False) for _ in range(2))

    def forward(self, x):
        idx = torch.topk(self.gate(x), 1, dim=-1).indices[:, 0]
        out = torch.zeros_like(x)
        for e in range(2):
            rows = torch.where(idx == e)[0]
            out.index_add_(0, rows, self.experts[e](x[rows]))
        return out


def get_inputs():
    return [torch.randn(64, 8)]
'''


def test_a_specialised_index_is_checked_at_the_shape_of_its_values(tmp_path: Path):
    """The shape of ``solar_io::specialised_index`` is that of its stored values, not a size to
    reduce: reduced to 16 rows, the one-op program declared 16 rows and the op returned its 32 (the
    check failed: 'output specialised_index must have shape (16, 1), got (32, 1)')."""
    p = tmp_path / "routed.py"
    p.write_text(ROUTED)
    g = capture(p, routing="balanced").graph
    assert g.validation.method == "reference-executor per node"
    assert g.validation.status == "passed", g.validation.reason
    index = [t for t in g.tensors if t.name.startswith("specialised_index") and t.dtype == "int64"]
    assert index and all(g.shape(t.name)[0] == 32 for t in index)


SELECTED = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(64, 8, 8))

    def forward(self, x):
        return x @ self.w[41]


def get_inputs():
    return [torch.randn(4, 8)]
'''


def test_a_select_index_is_taken_into_the_reduced_dim(tmp_path: Path):
    """``w[41]`` of 64 experts at reduced sizes selects 41 % 16 = 9: the index mapped as a size (16,
    out of range) left the call to its own sizes, unchecked when those are too large (expert 101 of
    128 experts' 768 x 2048 weights)."""
    p = tmp_path / "selected.py"
    p.write_text(SELECTED)
    v = capture(p).graph.validation
    assert v.status == "passed" and v.method == "reference-executor per node", v.reason
    assert "at reduced sizes, 0 at their own" in v.reason and "unchecked" not in v.reason, v.reason


ONE_HOT = '''
import torch
import torch.nn.functional as F


class Model(torch.nn.Module):
    def forward(self, x, ids):
        return x + F.one_hot(ids, 8).to(torch.float32)


def get_inputs():
    return [torch.randn(4, 8), torch.randint(0, 8, (4,))]
'''


def test_export_assertions_are_not_listed_unchecked(tmp_path: Path):
    """``one_hot``'s range checks (``_assert_async``) and a ``.to``'s metadata check return nothing: there
    is nothing to compare, and they were listed as unchecked nodes (one raising on random inputs)."""
    p = tmp_path / "one_hot.py"
    p.write_text(ONE_HOT)
    v = capture(p).graph.validation
    assert v.status == "passed" and v.method == "reference-executor per node", v.reason
    assert "unchecked" not in v.reason, v.reason


def test_calls_that_reduce_to_one_program_share_its_check(monkeypatch: pytest.MonkeyPatch):
    """Two experts' matmuls at 20 and 40 tokens (a routed loop's calls) both reduce to 10 x 16 @ 16 x 16 with
    the same arguments: one program on the same seeded inputs, so it runs once and counts for both."""
    from solar_io.frontends.torch.loader import Source, _FnModule

    def experts(x, w):
        return torch.cat([x[:20] @ w, x[20:] @ w])

    src = Source(Path("experts.py"), "experts.py", "0" * 64, lambda: _FnModule(experts),
                 lambda: [torch.randn(60, 32), torch.randn(32, 48)])
    seen: list[str] = []
    check = reduced._check

    def counted(call, shapes, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        seen.append(str(call.node.target))
        return check(call, shapes, *a, **k)

    monkeypatch.setattr(reduced, "_check", counted)
    v = capture_source(src, validate=True, validate_budget=TINY).graph.validation
    assert v.status == "passed", v.reason
    assert seen.count("aten.matmul.default") == 1  # two distinct calls, one check
    distinct = len(seen) + 1
    assert f"reduced sizes: {distinct} of {distinct} distinct nodes" in v.reason, v.reason


def test_experts_selected_by_index_share_the_check_of_their_reduced_index(monkeypatch: pytest.MonkeyPatch):
    """Experts 1 and 17 of a 32-expert weight: ``select(w, 0, 1)`` and ``select(w, 0, 17)`` are distinct calls,
    but at reduced sizes (32 -> 16) the index is taken modulo 16, so both check ``select(w16, 0, 1)``: one
    program on the same seeded inputs. Expert 2 selects another row there and is checked on its own."""
    from solar_io.frontends.torch.loader import Source, _FnModule

    def experts(x, w):
        return torch.cat([x @ w[1], x @ w[17], x @ w[2]])

    src = Source(Path("experts.py"), "experts.py", "0" * 64, lambda: _FnModule(experts),
                 lambda: [torch.randn(8, 32), torch.randn(32, 32, 48)])
    seen: list[str] = []
    check = reduced._check

    def counted(call, shapes, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        seen.append(f"{call.node.target}{call.args[1:]}")
        return check(call, shapes, *a, **k)

    monkeypatch.setattr(reduced, "_check", counted)
    v = capture_source(src, validate=True, validate_budget=TINY).graph.validation
    assert v.status == "passed", v.reason
    assert sorted(c for c in seen if c.startswith("aten.select")) == ["aten.select.int(0, 1)", "aten.select.int(0, 2)"]
    assert "reduced sizes: 5 of 5 distinct nodes (7 calls" in v.reason, v.reason


def test_packed_fp4_arguments_are_random_bytes_even_where_new_memory_is_filled_first():
    # validation fills new memory first (deterministic algorithms), and packed fp4 has no fill: Quant/030's
    # fp4 _scaled_mm was reported unchecked until its arguments were made as bytes
    fp4 = torch.float4_e2m1fn_x2
    det = torch.utils.deterministic
    before = (torch.are_deterministic_algorithms_enabled(), det.fill_uninitialized_memory)
    torch.use_deterministic_algorithms(True)
    det.fill_uninitialized_memory = True
    try:
        torch.manual_seed(0)
        x = reduced._maker((64, 8), fp4, 5)()
    finally:
        torch.use_deterministic_algorithms(before[0])
        det.fill_uninitialized_memory = before[1]
    assert x.dtype == fp4 and x.shape == (64, 8)
    assert len(set(x.view(torch.uint8).flatten().tolist())) > 100  # every byte a pair of codes, random
