"""MoE routing (issue 18 item 2): a KernelBench-style MoE block (``if not expert_mask.any():``,
``torch.where`` on the routing mask, ``index_add_``) captured under every ``--routing`` mode.

Hand derivation, ``T`` tokens of width ``D``, ``E`` experts of ``D -> H -> D`` (no biases), top-``k``:
MACs = ``T*D*E`` (router) + ``T*k*(D*H + H*D)`` (experts: the same in every mode); weight bytes =
``4*D*E`` + ``4*2*D*H`` per expert that receives a token (unused experts are skipped by the model's
own branch, so their weights are never read); tokens per expert by the mode (routing.py):
uniform uses ``round(E*(1-(1-k/E)**T))`` experts, balanced ``min(E, T*k)``, skewed a power law,
observed what the model computes on its seeded example inputs.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from solar_io.format.files import dumps, loads  # noqa: E402
from solar_io.frontends.common.errors import CaptureError  # noqa: E402
from solar_io.frontends.torch.capture import capture_file  # noqa: E402
from solar_io.frontends.torch.loader import load_source  # noqa: E402
from solar_io.frontends.torch.routing import (  # noqa: E402
    assign,
    check_groups,
    counts,
    expected_distinct,
    parse_routing,
    per_expert_counts,
)
from solar_io.metrics import graph_metrics, tensor_bytes  # noqa: E402

D, H = 16, 32

MOE = textwrap.dedent('''
    import torch
    import torch.nn as nn

    EXPERTS, K, TOKENS = {experts}, {k}, {tokens}


    class Model(nn.Module):
        def __init__(self, d={d}, h={h}):
            super().__init__()
            self.gate = nn.Linear(d, EXPERTS, bias=False)
            self.w1 = nn.ModuleList(nn.Linear(d, h, bias=False) for _ in range(EXPERTS))
            self.w2 = nn.ModuleList(nn.Linear(h, d, bias=False) for _ in range(EXPERTS))

        def forward(self, x):
            weights, idx = torch.topk(self.gate(x).softmax(-1), K, dim=-1)
            out = torch.zeros_like(x)
            for e in range(EXPERTS):
                expert_mask = idx == e
                if not expert_mask.any():
                    continue
                rows, slot = torch.where(expert_mask)
                y = self.w2[e](torch.relu(self.w1[e](x[rows])))
                out.index_add_(0, rows, y * weights[rows, slot, None])
            return out


    def get_inputs():
        return [torch.randn(TOKENS, {d})]
''')


def _model(tmp_path: Path, experts: int, k: int, tokens: int) -> Path:
    p = tmp_path / f"moe_e{experts}_k{k}_t{tokens}.py"
    p.write_text(MOE.format(experts=experts, k=k, tokens=tokens, d=D, h=H))
    return p


def _observed_counts(path: Path, experts: int, k: int, seed: int = 0) -> tuple[int, ...]:
    """Tokens per expert of the seeded model on its seeded inputs, computed here with eager torch."""
    src = load_source(path)
    torch.manual_seed(seed)
    model = src.model("cpu")
    torch.manual_seed(seed + 1)
    (x,) = src.inputs("cpu")
    with torch.no_grad():
        idx = torch.topk(model.gate(x).softmax(-1), k, dim=-1).indices
    return tuple(int((idx == e).any(-1).sum()) for e in range(experts))


def _weight_bytes(g) -> float:
    return sum(tensor_bytes(g, t) for t in g.tensors if t.role == "weight")


def _routing(g):
    (a,) = [a for a in g.assumptions if a.kind == "routing"]
    return dict(a.values)


@pytest.mark.parametrize("mode,expected", [
    ("uniform", (4, 4)),  # 2*(1-(1/2)**8) = 1.99 -> both experts, 8 pairs spread evenly
    ("balanced", (4, 4)),
    ("skewed=1", (5, 3)),  # 8 * (1, 1/2) / 1.5 = 5.33, 2.67
    ("skewed=3", (7, 1)),  # 8 * (1, 1/8) / 1.125 = 7.11, 0.89
    ("observed", None),
])
def test_two_expert_top1_under_each_routing_mode(tmp_path: Path, mode: str, expected) -> None:
    path = _model(tmp_path, experts=2, k=1, tokens=8)
    g = capture_file(path, routing=mode)
    assert g.validation.status == "passed", g.validation.reason
    m = graph_metrics(g)
    assert m.opaque == ()
    assert m.macs == 8 * D * 2 + 8 * 1 * (D * H + H * D)  # router + 8 token-expert pairs
    r = _routing(g)
    want = expected if expected is not None else _observed_counts(path, 2, 1)
    assert r["tokens_per_expert"] == want and sum(want) == 8
    assert (r["experts"], r["k"], r["tokens"]) == (2, 1, 8)
    assert r["mode"] == mode
    used = sum(1 for c in want if c)
    assert r["distinct_experts"] == used
    assert _weight_bytes(g) == 4 * D * 2 + used * 4 * 2 * D * H
    # the specialised sizes: one mask test and one index per expert that receives tokens
    spec = {a.subject.split(" at ")[0]: dict(a.values) for a in g.assumptions if a.kind == "specialised"}
    assert spec["nonzero"]["rows_of_the_index"] == tuple(c for c in want if c)
    assert loads(dumps(g)) == g


def test_distinct_experts_follow_the_mode(tmp_path: Path) -> None:
    """Four tokens, four experts, top-1: uniform reads round(4*(1-(3/4)**4)) = round(2.73) = 3 experts,
    balanced all 4, skewed=2 two of them (4*(1, 1/4, 1/9, 1/16)/1.42 = 2.81, 0.70, 0.31, 0.18 -> 3, 1)."""
    path = _model(tmp_path, experts=4, k=1, tokens=4)
    expert = 4 * 2 * D * H
    for mode, per, used in (("uniform", (2, 1, 1, 0), 3), ("balanced", (1, 1, 1, 1), 4),
                            ("skewed=2", (3, 1, 0, 0), 2)):
        g = capture_file(path, routing=mode, validate=mode == "uniform")
        r = _routing(g)
        assert r["tokens_per_expert"] == per and r["distinct_experts"] == used, mode
        assert r["expected_distinct_uniform"] == pytest.approx(4 * (1 - 0.75 ** 4), abs=1e-3)
        assert _weight_bytes(g) == 4 * D * 4 + used * expert, mode
        assert graph_metrics(g).macs == 4 * D * 4 + 4 * (D * H + H * D), mode
        if mode == "uniform":
            assert g.validation.status == "passed", g.validation.reason


def test_routing_model_counts_and_tables() -> None:
    assert expected_distinct(1, 8, 2) == pytest.approx(2.0)
    assert expected_distinct(4, 8, 2) == pytest.approx(8 * (1 - 0.75 ** 4))
    for mode in ("uniform", "balanced", "skewed"):
        for tokens, experts, k in ((1, 8, 2), (5, 8, 2), (64, 16, 4), (3, 4, 4)):
            per = counts(mode, tokens, experts, k, alpha=1.5)
            assert sum(per) == tokens * k and max(per) <= tokens, (mode, tokens, experts, k)
            table = assign(per, tokens, k)
            assert table.shape == (tokens, k)
            assert all(len(set(row.tolist())) == k for row in table)  # k distinct experts per token
            assert per_expert_counts(table, experts) == per
    assert counts("balanced", 1, 8, 2) == (1, 1, 0, 0, 0, 0, 0, 0)  # decode: only k experts read
    # grouped routing: consecutive experts per token keep DeepSeek-style groups (8 experts, 4 groups, 2 of them)
    assert check_groups(assign(counts("balanced", 16, 8, 2), 16, 2), 8, n_group=4, topk_group=2)
    assert check_groups(assign(counts("uniform", 16, 8, 2), 16, 2), 8, n_group=4, topk_group=1)
    with pytest.raises(CaptureError, match="bad --routing"):
        parse_routing("skewed=-1")
    with pytest.raises(CaptureError, match="bad --routing"):
        parse_routing("sometimes")


def test_observed_routing_over_the_budget_is_one_clear_line(tmp_path: Path) -> None:
    path = _model(tmp_path, experts=2, k=1, tokens=8)
    with pytest.raises(CaptureError) as e:
        capture_file(path, routing="observed", validate_budget=1024)
    msg = str(e.value)
    assert "\n" not in msg and "value-specialised capture" in msg and "--validate-budget" in msg
    assert "observed routing" in msg


BRANCH = textwrap.dedent('''
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(64, 64)

        def forward(self, x):
            h = self.lin(x)
            if h.sum() > 0:
                return h * 2
            return h - 1


    def get_inputs():
        return [torch.randn(2048, 64)]
''')


def test_a_branch_on_hidden_values_runs_on_the_cpu_or_names_the_op(tmp_path: Path) -> None:
    """A branch on values computed from weights is not known on meta: the values pass reruns on the
    CPU (seeded, as validation); over the budget the error names the op, where it is and its origin."""
    p = tmp_path / "branch.py"
    p.write_text(BRANCH)
    g = capture_file(p)
    assert g.validation.status == "passed", g.validation.reason
    (a,) = [a for a in g.assumptions if a.kind == "specialised"]
    assert a.subject == "Tensor.bool at branch.py:13" and "CPU" in a.detail
    with pytest.raises(CaptureError) as e:
        capture_file(p, validate_budget=4096)
    msg = str(e.value)
    assert "\n" not in msg and "Tensor.bool (branch.py:13)" in msg and "weight:lin.weight" in msg
    assert "input:0" in msg


def test_the_graph_says_its_routing_and_bound_prints_it(tmp_path: Path) -> None:
    from solar_io.cli.bound import assumption_text

    path = _model(tmp_path, experts=2, k=1, tokens=8)
    g = capture_file(path, routing="balanced", validate=False)
    text = dumps(g)
    assert "assumptions:" in text and "kind: routing" in text and "tokens_per_expert" in text
    shown = assumption_text(loads(text))
    assert "routing: aten.topk call 0 at" in shown and "tokens_per_expert=[4, 4]" in shown
    assert "mode=balanced" in shown and "specialised: nonzero at" in shown


def test_forced_routing_is_what_validation_runs(tmp_path: Path) -> None:
    """The graph under a synthetic routing computes the model with the router's choice replaced by the
    routing model's: the eager reference is forced the same way, so a wrong choice would fail."""
    from solar_io.frontends.torch.capture import capture_source
    from solar_io.frontends.torch.specialise import forcing

    path = _model(tmp_path, experts=2, k=1, tokens=8)
    cap = capture_source(load_source(path), routing="skewed=3")
    assert cap.graph.validation.status == "passed"
    table = cap.plan.forced_tables()[0]
    assert per_expert_counts(table, 2) == (7, 1)
    torch.manual_seed(0)
    model = cap.source.model("cpu")
    torch.manual_seed(1)
    (x,) = cap.source.inputs("cpu")
    with torch.no_grad(), forcing(cap.plan):
        idx = torch.topk(model.gate(x).softmax(-1), 1, dim=-1).indices
    assert np.array_equal(idx.numpy(), table)


CAPACITY = textwrap.dedent('''
    import math

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    EXPERTS, TOKENS, FACTOR = 2, 8, 1.0


    class Model(nn.Module):
        """Switch-style top-1 routing with a capacity factor: an expert keeps its first
        ceil(FACTOR * TOKENS / EXPERTS) tokens, the rest pass through unchanged."""

        def __init__(self, d={d}, h={h}):
            super().__init__()
            self.gate = nn.Linear(d, EXPERTS, bias=False)
            self.w1 = nn.ModuleList(nn.Linear(d, h, bias=False) for _ in range(EXPERTS))
            self.w2 = nn.ModuleList(nn.Linear(h, d, bias=False) for _ in range(EXPERTS))

        def forward(self, x):
            capacity = math.ceil(FACTOR * TOKENS / EXPERTS)
            p, idx = torch.topk(self.gate(x).softmax(-1), 1, dim=-1)
            onehot = F.one_hot(idx[:, 0], EXPERTS)
            position = torch.cumsum(onehot, dim=0) * onehot
            keep = (position > 0) & (position <= capacity)
            out = x.clone()
            for e in range(EXPERTS):
                rows = keep[:, e].nonzero()[:, 0]
                if rows.numel() == 0:
                    continue
                out[rows] = x[rows] + p[rows] * self.w2[e](torch.relu(self.w1[e](x[rows])))
            return out


    def get_inputs():
        return [torch.randn(TOKENS, {d})]
''')


def test_a_capacity_factor_drops_what_it_drops_under_the_assumed_routing(tmp_path: Path) -> None:
    """Capacity is the model's own code: under skewed=3 (7 and 1 tokens) expert 0 keeps ceil(1.0*8/2) = 4,
    so 5 token-expert pairs do work; balanced (4, 4) drops nothing."""
    p = tmp_path / "switch.py"
    p.write_text(CAPACITY.format(d=D, h=H))
    pair = D * H + H * D
    for mode, per, pairs in (("skewed=3", (7, 1), 5), ("balanced", (4, 4), 8)):
        g = capture_file(p, routing=mode, validate=mode == "skewed=3")
        assert _routing(g)["tokens_per_expert"] == per, mode
        assert graph_metrics(g).macs == 8 * D * 2 + pairs * pair, mode
        if mode == "skewed=3":
            assert g.validation.status == "passed", g.validation.reason
