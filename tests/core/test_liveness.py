"""Work whose results no output uses (``solar_io.liveness``, node field ``live``, format 1.6).

Each count is derived by hand below; the demand is checked against the reference executor (values an
output does not depend on are replaced by NaN and the outputs must not change, while a NaN in the
demanded part must reach them) and the digit boxes against brute-force enumeration.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import replace
from math import prod

import numpy as np
import pytest

import solar_io
from solar_io.affine import parse_access
from solar_io.backends.roofline import bound
from solar_io.boxes import count, normal, regroup, size, union
from solar_io.executor import execute
from solar_io.graph import Graph, Node, Tensor
from solar_io.liveness import LIVE_WORK, demands, live_ranks, with_live_work


def _members(d) -> list[int]:
    strides = [prod(n for n, _, _ in d[i + 1:]) for i in range(len(d))]
    return sorted({sum(v * s for v, s in zip(c, strides, strict=True))
                   for c in itertools.product(*(range(lo, hi) for _, lo, hi in d))})


def _flat(dims, shape) -> set[int]:
    out = set()
    for c in itertools.product(*(_members(d) for d in dims)):
        f = 0
        for v, n in zip(c, shape, strict=True):
            f = f * n + v
        out.add(f)
    return out


def test_regroup_and_union_hold_every_value_and_are_exact_where_digits_align():
    """Brute force over random parts of small shapes and random factorings of their size."""
    rng = random.Random(7)
    exact = 0
    for _ in range(600):
        shape = tuple(rng.choice([1, 2, 3, 4, 6]) for _ in range(rng.randint(1, 3)))
        dims = []
        for n in shape:
            lo = rng.randrange(n)
            dims.append(((n, lo, rng.randint(lo + 1, n)),))
        factors, m = [], prod(shape)
        while m > 1:
            f = rng.choice([d for d in range(2, m + 1) if m % d == 0])
            factors.append(f)
            m //= f
        new = tuple(factors) or (1,)
        got = regroup(dims, shape, new)
        if got is None:
            continue
        have, held = _flat(dims, shape), _flat(got, new)
        assert have <= held, (shape, dims, new, got)
        exact += have == held
    assert exact > 400  # most regroupings are exact, not merely supersets
    for _ in range(600):
        a, b = (normal(((3, x, x + 1), (4, y, 4))) for x, y in ((rng.randrange(3), rng.randrange(4)) for _ in "ab"))
        u = union(a, b)
        assert size(u) == 12 and set(_members(a)) | set(_members(b)) <= set(_members(u))
    # windows 0-1 of 43 of 40 rows each are rows 0-79, exactly
    assert regroup([((1720, 0, 80),)], (1720,), (43, 40)) == [((43, 0, 2),), ((40, 0, 40),)]
    assert count(union(((1720, 0, 80),), ((1720, 100, 120),))) == 120


def _sliced_product(live: bool = True) -> Graph:
    g = Graph((("M", 8), ("K", 4), ("N", 2), ("R", 3)),
              (Tensor("x", ("M", "K"), "fp32", "input"), Tensor("w", ("K", "N"), "fp32", "weight"),
               Tensor("h", ("M", "N"), "fp32", "intermediate"), Tensor("y", ("R", "N"), "fp32", "output")),
              (Node("mm", "einsum", "aten.mm", (parse_access("x[M, K]"), parse_access("w[K, N]")),
                    (parse_access("h[M, N]"),), space=("M", "N", "K"), map="mul", reduce="add"),
               Node("rows", "data_movement", "aten.slice", (parse_access("h[R + 2, N]"),), (parse_access("y[R, N]"),),
                    space=("R", "N"), movement="copy")))
    return with_live_work(g) if live else g


def test_a_product_sliced_afterwards_counts_only_the_rows_used():
    """``y = (x @ w)[2:5]``, x 8 x 4 and w 4 x 2 fp32. By hand: 3 rows x 2 x 4 = 24 MACs (64 computed whole);
    the product reads 3 x 4 of x (48 B) and w (32 B) and writes 3 x 2 (24 B); the slice copies 24 B to y.
    Fused boundary 48 + 32 + 24 = 104 B (184 B whole)."""
    g = _sliced_product()
    assert g.node_map["mm"].live == (("M", 3),) and g.node_map["rows"].live == ()
    assert [dict(a.values)["nodes"] for a in g.assumptions if a.kind == LIVE_WORK] == [("mm",)]
    m = solar_io.graph_metrics(g)
    assert m.macs == 24 and m.boundary_bytes == 104
    mm = m.nodes[0]
    assert (mm.bytes_read, mm.bytes_written) == ({"x": 48.0, "w": 32.0}, {"h": 24.0})
    whole = solar_io.graph_metrics(_sliced_product(live=False))
    assert whole.macs == 64 and whole.boundary_bytes == 184
    r = bound(g, "b200", capacity=1e30)
    assert r.fused.bytes == 104
    assert solar_io.loads(solar_io.dumps(g)) == g  # the field survives the file


def test_exports_say_what_is_live():
    """Timeloop gets the product's 3 live rows as its instance size (per node and fused); AccelForge, whose
    iteration space its einsums share, writes it whole and says so."""
    from solar_io.exporters.accelforge import export_accelforge
    from solar_io.exporters.timeloop import export_timeloop

    files = {f.name: f.text for f in export_timeloop(_sliced_product(), "s").files}
    (mm,) = [t for n, t in files.items() if "-mm." in n]
    assert "  instance:\n    M: 3\n" in mm
    assert "0 <= M1 < 3 and" in files["s.fused.yaml"]
    af = "".join(f.text for f in export_accelforge(_sliced_product(), "s").files)
    assert "# not represented: live counts (written whole) of mm" in af


def test_a_bad_live_field_is_refused_with_the_node_and_rank():
    g = _sliced_product()
    bad = replace(g, nodes=(replace(g.nodes[0], live=(("R", 2),)),) + g.nodes[1:])
    msgs = [i.message for i in solar_io.validate(bad) if i.severity == "error"]
    assert any("node mm: live rank R must be a rank of its space" in m for m in msgs), msgs
    big = replace(g, nodes=(replace(g.nodes[0], live=(("M", 9),)),) + g.nodes[1:])
    assert any("live rank M" in i.message for i in solar_io.validate(big))
    text = solar_io.dumps(g).replace(f'version: "{solar_io.graph.FORMAT_VERSION}"', 'version: "1.5"')
    with pytest.raises(solar_io.GraphError, match="live.*new in format 1.6"):
        solar_io.loads(text)


torch = pytest.importorskip("torch")


def windows(x, base, pos, we, wk, q, wp):
    """An L2/045-shaped program: encode frames, pad to windows of 3, cross-attend 2 queries per window,
    project, and copy the first 4 rows (windows 0 and 1) of each batch into ``base`` at ``pos``."""
    enc = torch.relu(x @ we)                                       # [2, 10, 8]
    win = torch.nn.functional.pad(enc, (0, 0, 0, 2)).view(8, 3, 8)  # 2 batches x 4 windows of 3 frames
    k = win @ wk                                                   # [8, 3, 8]
    att = torch.softmax(q.expand(8, 2, 8) @ k.transpose(1, 2), -1)  # [8, 2, 3]
    emb = ((att @ k).view(2, 8, 8)) @ wp                           # [2, 4 windows x 2 queries, 8]
    out = base.clone()
    for b in range(2):
        out[b].index_copy_(0, pos[b], emb[b, :4])
    return out


def _inputs():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(2, 10, 8, generator=g), torch.randn(2, 9, 8, generator=g),
            torch.tensor([[0, 2, 5, 8], [1, 3, 4, 7]]), torch.randn(8, 8, generator=g),
            torch.randn(8, 8, generator=g), torch.randn(1, 2, 8, generator=g), torch.randn(8, 8, generator=g)]


@pytest.fixture(scope="module")
def captured():
    import warnings

    from solar_io.frontends.torch.capture import capture_source
    from solar_io.frontends.torch.loader import Source, _FnModule

    src = Source(__import__("pathlib").Path("case.py"), "case.py", "0" * 64, lambda: _FnModule(windows), _inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return capture_source(src, validate=True).graph


def test_windows_of_which_two_are_used_count_only_those(captured):
    """By hand, only frames 0-5 of 10 (windows 0-1 of each batch) reach the output: encoder 2 x 6 x 8 x 8
    = 768 MACs, keys 4 windows x 3 x 8 x 8 = 768, scores and weighted sum 4 x 2 x 3 x 8 = 192 each, and the
    projection 2 x 4 x 8 x 8 = 512: 2,432 MACs. The whole program is 4,608 (torch's FlopCounterMode: 9,216
    FLOPs), 1,280 + 1,536 + 384 + 384 + 1,024."""
    from torch.utils.flop_counter import FlopCounterMode

    g = captured
    assert g.validation.status == "passed"
    with FlopCounterMode(display=False) as fc:
        windows(*_inputs())
    whole = replace(g, nodes=tuple(replace(n, live=()) for n in g.nodes))
    assert solar_io.graph_metrics(whole).macs * 2 == fc.get_total_flops() == 9216
    assert solar_io.graph_metrics(g).macs == 2432
    (x,) = [t.name for t in g.tensors if t.role == "input" and g.shape(t.name) == (2, 10, 8)]
    assert demands(g)[x][1] == ((10, 0, 6),)


def test_values_no_output_depends_on_can_be_anything(captured):
    """The reference executor with NaN in every element of ``x`` outside its demand gives the same output;
    a NaN in a demanded element (frame 5) reaches it, so the demand is not a blanket superset."""
    g = captured
    names = [t.name for t in g.tensors if t.role in ("input", "weight")]
    arrays = {n: a.numpy() for n, a in zip(names, _inputs(), strict=True)}
    ref = execute(g, arrays)
    (x,) = [t.name for t in g.tensors if t.role == "input" and g.shape(t.name) == (2, 10, 8)]
    part = demands(g)[x]
    keep = np.zeros(g.shape(x), bool)
    keep[np.ix_(*(_members(d) for d in part))] = True
    poisoned = dict(arrays, **{x: np.where(keep, arrays[x], np.nan)})
    got = execute(g, poisoned)
    assert all(np.array_equal(got[k], ref[k]) for k in ref)
    hit = arrays[x].copy()
    hit[0, 5, 0] = np.nan
    assert any(np.isnan(v).any() for v in execute(g, dict(arrays, **{x: hit})).values())
    assert live_ranks(g) == {n.name: n.live for n in g.nodes if n.live}
