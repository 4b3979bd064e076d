"""Value-specialised capture (issue 18 item 1): programs whose shapes depend on tensor values.

- varlen attention over ``cu_seqlens`` (a small int input, known on the meta pass): per sequence of
  length ``L``, ``2 * L*L*H*Dh`` MACs (scores and values, the full rectangle as FlopCounterMode counts);
- a DeepSeek-V3-style block at small sizes: MLA (low-rank q and kv), a shared expert, grouped routing
  (``n_group``/``topk_group``) and DeepSeek's ``moe_infer`` (``argsort`` of the expert ids, counts
  through ``.cpu().numpy()``, a Python loop over experts), MACs by hand.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from solar_io.format.files import dumps, loads  # noqa: E402
from solar_io.format.validate import validate  # noqa: E402
from solar_io.frontends.torch.capture import capture_file  # noqa: E402
from solar_io.frontends.torch.routing import assign, check_groups, counts  # noqa: E402
from solar_io.metrics import graph_metrics, tensor_bytes  # noqa: E402

VARLEN = textwrap.dedent('''
    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    class Model(nn.Module):
        def forward(self, q, k, v, cu_seqlens):
            outs = []
            longest = int((cu_seqlens[1:] - cu_seqlens[:-1]).max().item())
            for i in range(cu_seqlens.shape[0] - 1):
                s, e = int(cu_seqlens[i]), int(cu_seqlens[i + 1])
                qi, ki, vi = (t[s:e].transpose(0, 1) for t in (q, k, v))
                outs.append(F.scaled_dot_product_attention(qi, ki, vi, is_causal=True).transpose(0, 1))
            return torch.cat(outs) * (1.0 / longest)


    def get_inputs():
        return [torch.randn(10, 2, 8), torch.randn(10, 2, 8), torch.randn(10, 2, 8),
                torch.tensor([0, 3, 10], dtype=torch.int32)]
''')


def test_varlen_attention_over_cu_seqlens(tmp_path: Path) -> None:
    p = tmp_path / "varlen.py"
    p.write_text(VARLEN)
    g = capture_file(p)
    assert g.validation.status == "passed", g.validation.reason
    m = graph_metrics(g)
    assert m.opaque == ()
    heads, dh = 2, 8
    assert m.macs == sum(2 * n * n * heads * dh for n in (3, 7))
    spec = {a.subject: dict(a.values) for a in g.assumptions if a.kind == "specialised"}
    assert spec["Tensor.item at varlen.py:10"]["values"] == (7,)
    assert spec["Tensor.int at varlen.py:12"]["values"] == (0, 3, 3, 10)
    assert all("meta pass" in a.detail for a in g.assumptions)  # cu_seqlens is a small input: no CPU run
    assert not [i for i in validate(g) if i.severity == "error"] and loads(dumps(g)) == g


T, D, HEADS, QR, KVR, DH = 8, 32, 2, 16, 16, 8
E, K, GROUPS, TOPK_GROUPS, F_SHARED, F_EXPERT = 8, 2, 4, 2, 32, 16

DEEPSEEK = textwrap.dedent(f'''
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    T, D, HEADS, QR, KVR, DH = {T}, {D}, {HEADS}, {QR}, {KVR}, {DH}
    E, K, GROUPS, TOPK_GROUPS, F_SHARED, F_EXPERT = {E}, {K}, {GROUPS}, {TOPK_GROUPS}, {F_SHARED}, {F_EXPERT}


    class MLP(nn.Module):
        def __init__(self, d, f):
            super().__init__()
            self.gate = nn.Linear(d, f, bias=False)
            self.up = nn.Linear(d, f, bias=False)
            self.down = nn.Linear(f, d, bias=False)

        def forward(self, x):
            return self.down(F.silu(self.gate(x)) * self.up(x))


    class MLA(nn.Module):
        """Multi-head latent attention without rope: q and kv through low-rank latents."""

        def __init__(self):
            super().__init__()
            self.q_a = nn.Linear(D, QR, bias=False)
            self.q_b = nn.Linear(QR, HEADS * DH, bias=False)
            self.kv_a = nn.Linear(D, KVR, bias=False)
            self.kv_b = nn.Linear(KVR, HEADS * 2 * DH, bias=False)
            self.o = nn.Linear(HEADS * DH, D, bias=False)

        def forward(self, x):
            q = self.q_b(F.rms_norm(self.q_a(x), (QR,))).view(T, HEADS, DH).transpose(0, 1)
            kv = self.kv_b(F.rms_norm(self.kv_a(x), (KVR,))).view(T, HEADS, 2 * DH).transpose(0, 1)
            k, v = kv.split(DH, dim=-1)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.o(a.transpose(0, 1).reshape(T, HEADS * DH))


    class MoE(nn.Module):
        """DeepSeek-V3 routing: sigmoid scores + correction bias, the best TOPK_GROUPS of GROUPS groups
        (each scored by its top-2 experts), top-K experts inside them; moe_infer's sorted dispatch."""

        def __init__(self):
            super().__init__()
            self.gate = nn.Linear(D, E, bias=False)
            self.register_buffer("bias", torch.linspace(-0.05, 0.05, E))
            self.experts = nn.ModuleList(MLP(D, F_EXPERT) for _ in range(E))
            self.shared = MLP(D, F_SHARED)

        def forward(self, x):
            scores = self.gate(x).sigmoid()
            choice = scores + self.bias
            group = choice.view(T, GROUPS, -1).topk(2, dim=-1)[0].sum(dim=-1)
            keep = torch.zeros_like(group).scatter_(1, group.topk(TOPK_GROUPS, dim=-1)[1], 1)
            mask = keep.unsqueeze(-1).expand(T, GROUPS, E // GROUPS).reshape(T, E)
            ids = choice.masked_fill(mask == 0, 0.0).topk(K, dim=-1)[1]
            w = scores.gather(1, ids)
            w = w / w.sum(dim=-1, keepdim=True)
            cnts = torch.zeros(T, E, dtype=torch.long).scatter_(1, ids, 1)
            per_expert = cnts.sum(dim=0).cpu().numpy()
            order = ids.view(-1).argsort()
            tokens = x[order // K]
            outs, start = [], 0
            for i, n in enumerate(per_expert):
                if n == 0:
                    continue
                outs.append(self.experts[i](tokens[start:start + n]))
                start += n
            cat = torch.cat(outs)
            back = torch.empty_like(cat)
            back[order] = cat
            routed = (back.view(T, K, D) * w.unsqueeze(-1)).sum(dim=1)
            return routed + self.shared(x)


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = MLA()
            self.moe = MoE()

        def forward(self, x):
            h = x + self.attn(F.rms_norm(x, (D,)))
            return h + self.moe(F.rms_norm(h, (D,)))


    def get_inputs():
        return [torch.randn(T, D)]
''')


def _deepseek_macs() -> int:
    mla = T * (D * QR + QR * HEADS * DH + D * KVR + KVR * HEADS * 2 * DH + HEADS * DH * D)
    mla += 2 * T * T * HEADS * DH  # scores and values over the full causal rectangle
    gate = T * D * E
    shared = T * 3 * D * F_SHARED
    routed = T * K * 3 * D * F_EXPERT  # T*K token-expert pairs, whatever the routing
    return mla + gate + shared + routed


@pytest.mark.parametrize("routing", ["uniform", "observed"])
def test_deepseek_style_block(tmp_path: Path, routing: str) -> None:
    p = tmp_path / "deepseek_block.py"
    p.write_text(DEEPSEEK)
    g = capture_file(p, routing=routing)
    assert g.validation.status == "passed", g.validation.reason
    m = graph_metrics(g)
    assert m.opaque == ()
    assert m.macs == _deepseek_macs()
    (r,) = [dict(a.values) for a in g.assumptions if a.kind == "routing"]
    assert (r["experts"], r["k"], r["tokens"]) == (E, K, T) and sum(r["tokens_per_expert"]) == T * K
    used = sum(1 for c in r["tokens_per_expert"] if c)
    experts = [t for t in g.tensors if t.role == "weight" and ".experts." in t.name]
    assert len(experts) == 3 * used  # only the experts that receive tokens are read
    assert sum(tensor_bytes(g, t) for t in experts) == used * 4 * 3 * D * F_EXPERT
    spec = {a.subject.split(" at ")[0] for a in g.assumptions if a.kind == "specialised"}
    assert "Tensor.numpy" in spec
    if routing == "uniform":
        want = counts("uniform", T, E, K)  # 8*(1-(6/8)**8) = 7.2 -> 7 experts
        assert r["tokens_per_expert"] == want and used == 7
        assert check_groups(assign(want, T, K), E, GROUPS, TOPK_GROUPS)  # the forced choice keeps the groups


UNIQUE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(16, 4, bias=False)
        self.experts = nn.ModuleList(nn.Linear(16, 16, bias=False) for _ in range(4))

    def forward(self, x):
        w, ids = torch.topk(self.gate(x).softmax(-1), 1, dim=-1)
        out = torch.zeros_like(x)
        for e in ids.unique():
            rows = (ids[:, 0] == e).nonzero()[:, 0]
            out[rows] = self.experts[e](x[rows]) * w[rows]
        return out


def get_inputs():
    return [torch.randn(6, 16)]
"""


def test_loop_over_unique_expert_ids(tmp_path: Path) -> None:
    """``for e in ids.unique():`` with ``self.experts[e]``: the distinct ids and each ``__index__`` are
    specialised; balanced top-1 of 4 experts over 6 tokens gives (2, 2, 1, 1)."""
    p = tmp_path / "uniq.py"
    p.write_text(UNIQUE)
    g = capture_file(p, routing="balanced")
    assert g.validation.status == "passed", g.validation.reason
    assert graph_metrics(g).opaque == ()
    assert graph_metrics(g).macs == 6 * 16 * 4 + 6 * 16 * 16
    spec = {a.subject: dict(a.values) for a in g.assumptions if a.kind == "specialised"}
    assert spec["unique at uniq.py:14"]["rows_of_the_index"] == (4,)
    assert spec["nonzero at uniq.py:15"]["rows_of_the_index"] == (2, 2, 1, 1)
    assert spec["Tensor.index at uniq.py:16"]["values"] == (0, 1, 2, 3)


TOLIST = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, lengths, grid):
        sizes = lengths.tolist()
        none = lengths[:0].tolist()
        rows = grid.tolist()
        idx = torch.tensor([i for i, n in enumerate(sizes) for _ in range(n)] + none, device=x.device)
        scale = torch.tensor([float(a * b) for a, b in rows], device=x.device)
        return x[idx] * scale.sum()


def get_inputs():
    return [torch.randn(8, 4), torch.tensor([2, 0, 3]), torch.tensor([[1, 2], [3, 4]])]
"""


def test_tolist_replayed_as_the_items_the_export_asks_for(tmp_path: Path) -> None:
    """``.tolist()`` (1-D, 2-D, empty) into ``torch.tensor(list)`` (Qwen-VL's position ids, varlen
    chunk lists): under the export a FakeTensor's tolist is one ``item`` per element, which the replay
    answered as a mismatch ("call 1 is Tensor.item ... but was Tensor.tolist"); and the constant built
    from the list is given its values for the validation (it was skipped: created on meta). By hand:
    idx = [0, 0, 2, 2, 2] (5 int64 = 40 B), 5 gathered rows of 4 fp32 (80 B read and written), scale
    [2, 12] (8 B)."""
    p = tmp_path / "tl.py"
    p.write_text(TOLIST)
    g = capture_file(p)
    assert g.validation.status == "passed", g.validation.reason
    m = graph_metrics(g)
    assert m.opaque == ()
    (gather,) = [n for n in m.nodes if n.kind == "data_movement"]
    assert sorted(gather.bytes_read.values()) == [40.0, 80.0] and list(gather.bytes_written.values()) == [80.0]
    spec = {a.subject: dict(a.values) for a in g.assumptions if a.kind == "specialised"}
    assert [spec[f"Tensor.tolist at tl.py:{i}"]["lengths"] for i in (7, 8, 9)] == [(3,), (0,), (2,)]


NO_GRAD_ITEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    @torch.no_grad()
    def forward(self, grad, ids):
        rows = ids.max().item() + 1
        out = torch.zeros(rows, grad.shape[1])
        out.index_add_(0, ids, grad)
        return torch.arange(rows, dtype=grad.dtype) @ out


def get_inputs():
    return [torch.randn(6, 4), torch.tensor([0, 2, 2, 4, 1, 0])]
"""


def test_a_size_from_item_inside_no_grad_is_specialised(tmp_path: Path) -> None:
    """``@torch.no_grad()`` puts the body in a ``wrap_with_set_grad_enabled`` submodule: its unbacked
    size ``u0 + 1`` was not seen, so lowering failed (GuardOnDataDependentSymNode, L1/024, L2/017).
    By hand: rows = 5; index_add of 6 rows of 4, then a [5] @ [5, 4] product: 20 MACs."""
    p = tmp_path / "nograd.py"
    p.write_text(NO_GRAD_ITEM)
    g = capture_file(p)
    assert g.validation.status == "passed", g.validation.reason
    m = graph_metrics(g)
    assert m.opaque == () and m.macs == 5 * 4
    spec = {a.subject: dict(a.values) for a in g.assumptions if a.kind == "specialised"}
    assert spec["Tensor.item at nograd.py:8"]["values"] == (4,)


ONE_HOT_ROUTES = """import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x, ids):
        mask = F.one_hot(ids, num_classes=8).permute(2, 1, 0)
        out = torch.zeros_like(x)
        for e in torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero().squeeze(-1):
            k, rows = torch.where(mask[e.item()])
            out[rows] += x[rows] * (e.item() + 1)
        return out


def get_inputs():
    return [torch.randn(16, 4), torch.tensor([[i % 8, (3 * i + 1) % 8] for i in range(16)])]
"""


def test_integer_tensors_past_the_float_limit_keep_their_values(tmp_path: Path, monkeypatch) -> None:
    """Qwen3-MoE's ``one_hot(ids, 512)`` over 3,328 tokens x top-10 (17M int64) was past the values
    pass's element limit, so its nonzero needed a CPU run of 6 GB (L2/013, L2/061). Integer and bool
    tensors have their own, larger limit: with the float limit at 64 elements here, the 16x2x8 one_hot
    keeps its values and the meta pass decides everything (no CPU run)."""
    from solar_io.frontends.torch import values

    monkeypatch.setattr(values, "SMALL", 64)
    p = tmp_path / "onehot.py"
    p.write_text(ONE_HOT_ROUTES)
    g = capture_file(p)
    assert g.validation.status == "passed", g.validation.reason
    assert graph_metrics(g).opaque == ()
    spec = [a for a in g.assumptions if a.kind == "specialised"]
    assert spec and all("meta pass" in a.detail for a in spec)
    nz = {a.subject: dict(a.values) for a in spec}["nonzero at onehot.py:10"]
    assert nz["rows_of_the_index"] == (8,)  # every expert receives tokens: (i % 8) covers all 8


LEAN = """import torch


class Model(torch.nn.Module):
    def forward(self, x, ids, w):
        return x


def get_inputs():
    x = torch.randn(32, 8)
    ids = torch.zeros(32, 2, dtype=torch.int64)
    for i in range(32):
        ids[i] = torch.randperm(8)[:2]
    w = torch.randn(8, 8, 8) / 2.0
    return [x, ids, w]
"""


def test_inputs_over_the_budget_are_built_on_meta_except_the_small_ones(tmp_path: Path, monkeypatch) -> None:
    """L2/012's generator makes 15 GB of bf16 experts and a [4096, 8] table of expert ids; the values
    pass needs only the ids. Over the budget each op runs on meta first and on the CPU only when its
    results are small (here: floats past 64 elements stay meta, the ids are computed)."""
    from solar_io.frontends.torch import specialise, values
    from solar_io.frontends.torch.loader import load_source

    monkeypatch.setattr(values, "SMALL", 64)
    p = tmp_path / "lean.py"
    p.write_text(LEAN)
    src = load_source(p)
    x, ids, w = specialise._inputs(src, lean=True)
    assert (x.device.type, w.device.type, ids.device.type) == ("meta", "meta", "cpu")
    assert all(len(set(r.tolist())) == 2 and 0 <= min(r) and max(r) < 8 for r in ids)
    x, ids, w = specialise._inputs(src, lean=False)
    assert {t.device.type for t in (x, ids, w)} == {"cpu"}


def test_a_tensor_used_as_a_number_by_arange_and_a_slice_is_specialised(tmp_path: Path):
    """``torch.arange(n)`` and ``x[:, :n]`` with ``n`` a 0-d tensor (SOL-ExecBench L2/006's multimodal rope):
    torch reads ``n`` in C++, so no ``item`` call is seen and the export met it unbacked (an internal
    error on the meta pass). Each such use is one recorded value; the graph validates, and the
    positions written are the kept ones: 3 rows of ``valid`` int64 positions each, by hand."""
    p = tmp_path / "rope.py"
    p.write_text(textwrap.dedent("""
        import torch

        class Model(torch.nn.Module):
            def forward(self, ids, mask):
                pos = torch.zeros(3, ids.shape[0], ids.shape[1], dtype=torch.int64)
                for i in range(ids.shape[0]):
                    valid = mask[i].sum()
                    pos[:, i, :valid] = torch.arange(valid, dtype=torch.int64).unsqueeze(0).expand(3, -1)
                return pos * 2

        def get_inputs():
            mask = torch.zeros(2, 16, dtype=torch.bool)
            mask[0, :5] = True
            mask[1, :11] = True
            return [torch.randint(0, 100, (2, 16)), mask]
        """))
    g = capture_file(p)
    assert g.validation.status == "passed", g.validation.reason
    (said,) = [a for a in g.assumptions if a.kind == "specialised"]
    assert dict(said.values)["values"] == (5, 5, 11, 11)  # arange's end and the slice's bound, per row
    writes = [m for m in graph_metrics(g).nodes if m.name.startswith("copy")]
    assert sorted(sum(m.bytes_written.values()) for m in writes)[:1] == [3 * 5 * 8]


WIDE_INPUTS = """import torch


class Model(torch.nn.Module):
    def forward(self, table, x, w):
        s = torch.tensor(448.0, device=x.device) / x.abs().amax()  # a number made a tensor on x's device
        if s == 0.0:  # an NVFP4 quantiser's guard: needs x's values
            s = torch.ones(())
        _, idx = (x @ w).topk(2, dim=-1)  # a router over scores computed from x
        busiest = int(torch.bincount(idx.flatten(), minlength=8).max())
        return table[:4] * 2.0, x[:busiest] / s


def get_inputs():
    return [torch.randn(1024, 512), torch.randn(300, 256), torch.randn(256, 8)]
"""


def test_a_decision_on_inputs_beside_a_table_over_the_budget_is_taken_on_meta(tmp_path: Path, monkeypatch) -> None:
    """SOL-ExecBench Quant/008: a guard on the activations' amax (x: 76,800 floats, past the meta pass's
    65,536) beside a table that makes the model too large to run on the CPU (2.4 MB of inputs, twice, over a
    2 MB budget). The meta pass is tried again knowing the inputs that fit half the budget (x and w), which
    decides the guard (448 made a tensor on x's device, meta there, keeps its value, as in the export); the
    table stays unknown. The topk over scores from x is still a router: under the
    uniform routing each of 8 experts gets 300 * 2 / 8 = 75 tokens, so ``busiest`` is 75 (not what the
    random scores would give)."""
    from solar_io.frontends.torch import values

    monkeypatch.setattr(values, "SMALL", 1024)  # x and |x| are past the meta pass's own limit too (SOL-ExecBench
    p = tmp_path / "wide.py"                    # Quant/008's 44M-element activations): the wide pass computes them
    p.write_text(WIDE_INPUTS)
    g = capture_file(p, validate_budget=2 << 20)
    assert g.validation.status == "passed", g.validation.reason
    sizes = dict(g.ranks)
    shapes = sorted([sizes[r] for r in t.ranks] for t in g.tensors if t.role == "output")
    assert shapes == [[4, 512], [75, 256]], shapes
    spec = [a for a in g.assumptions if a.kind == "specialised"]
    assert spec and all("inputs that fit half the validation budget" in a.detail for a in spec), spec


def test_counts_of_routed_ids_are_known_to_the_meta_pass(tmp_path: Path) -> None:
    """``bincount`` of a router's ids on the meta pass has the counts as its values (it was a zero tensor,
    so a decision on a count took 0). 30 tokens x top-2 over 8 experts of a router weight under the uniform
    routing: 60 choices, at most ceil(60 / 8) = 8 tokens an expert."""
    p = tmp_path / "counts.py"
    p.write_text(ROUTED_COUNTS)
    g = capture_file(p)
    assert g.validation.status == "passed", g.validation.reason
    sizes = dict(g.ranks)
    assert [[sizes[r] for r in t.ranks] for t in g.tensors if t.role == "output"] == [[8, 16]]


ROUTED_COUNTS = """import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.router = torch.nn.Linear(16, 8, bias=False)

    def forward(self, x):
        _, idx = self.router(x).topk(2, dim=-1)
        busiest = int(torch.bincount(idx.flatten(), minlength=8).max())
        return x[:busiest] * 2.0


def get_inputs():
    return [torch.randn(30, 16)]
"""


BIG_INTERMEDIATE = """import torch


class Model(torch.nn.Module):
    def forward(self, x):
        s = x.abs().amax()
        if s == 0.0:  # needs x's values: 76,800 floats, past the meta pass's 65,536
            s = torch.ones(())
        pairs = x.unsqueeze(0) * x.unsqueeze(1)  # [300, 300, 256]: 92 MB
        return pairs.sum(1) / s


def get_inputs():
    return [torch.randn(300, 256)]
"""


def test_a_cpu_run_past_the_budget_stops_and_the_wide_pass_decides(tmp_path: Path) -> None:
    """SOL-ExecBench Quant/031: weights and inputs fit the budget, so the values pass ran the model on the CPU,
    and its [32, 40, 1024, 1024] attention scores (5.4 GB, and more) took the process to 22 GB and the kernel
    killed it. Here x (307 kB) fits a 2 MB budget, its pairwise product (92 MB) does not: the CPU run stops
    at that tensor, and the wide meta pass decides the guard from x's values without making it."""
    p = tmp_path / "big.py"
    p.write_text(BIG_INTERMEDIATE)
    g = capture_file(p, validate_budget=2 << 20)
    spec = [a for a in g.assumptions if a.kind == "specialised"]
    assert spec and all("inputs that fit half the validation budget" in a.detail for a in spec), spec
    assert g.validation.status == "passed", g.validation.reason
