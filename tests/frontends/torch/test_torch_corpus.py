"""The model corpus (tests/models): every file captures, validates, round-trips, and counts
the same MACs as torch's FlopCounterMode.

Each file is captured once (module-level cache) with whole-graph validation: the model run
eagerly on CPU against the graph on the reference executor.

The bytes each capture counts are also held to a reference counted at the dispatcher (the second
half of this file; in the same module as the captures so that one worker captures the corpus once).
"""

from __future__ import annotations

import importlib.util
import warnings
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")


from paths import ROOT  # noqa: E402

from solar_io import dumps, loads, validate  # noqa: E402
from solar_io.affine import Indirect  # noqa: E402
from solar_io.backends.roofline import bound  # noqa: E402
from solar_io.backends.traffic.kernels import kernels  # noqa: E402
from solar_io.format.encode import encode  # noqa: E402
from solar_io.format.yamltext import parse  # noqa: E402
from solar_io.frontends.torch.bytecount import program_bytes, touched_bytes, union_bytes  # noqa: E402
from solar_io.frontends.torch.capture import Capture, capture_source  # noqa: E402
from solar_io.frontends.torch.loader import load_source  # noqa: E402
from solar_io.frontends.torch.rulebook import ruled_ops  # noqa: E402
from solar_io.graph import Graph  # noqa: E402
from solar_io.metrics import graph_metrics  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*PuLP 4.0:DeprecationWarning")

MODELS = sorted((ROOT / "tests" / "models").glob("*.py"))
#: Files whose capture has opaque nodes on purpose, with the ops (topk and sort are lowered since
#: issue 18: rules/select.py).
EXPECTED_OPAQUE = {"vae_reparam": {"aten.randn_like"}}
#: FlopCounterMode does not count aten.mv (matrix-vector), which these files use.
FLOPCOUNTER_GAPS = {"matvec"}
_CACHE: dict[Path, Capture] = {}


def captured(path: Path) -> Capture:
    if path not in _CACHE:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _CACHE[path] = capture_source(load_source(path), validate=True)
    return _CACHE[path]


def test_corpus_size() -> None:
    assert len(MODELS) >= 60


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_capture_validates_and_roundtrips(path: Path) -> None:
    cap = captured(path)
    g = cap.graph
    assert g.validation.status == "passed", g.validation.reason
    assert not [i for i in validate(g) if i.severity == "error"]
    assert loads(dumps(g)) == g
    assert parse(dumps(g)) == encode(g)  # the document checked_dumps checks is the text's
    assert g.producer.frontend == "torch" and g.producer.source == path.name
    assert len(g.producer.source_sha256 or "") == 64
    opaque = {n.op for n in g.nodes if n.kind == "opaque"}
    assert opaque == EXPECTED_OPAQUE.get(path.stem, set())


def eager(g: Graph) -> Graph:
    """``g`` as eager runs it: every node over its whole space, the results no output uses included
    (the node field ``live`` dropped)."""
    return replace(g, nodes=tuple(replace(n, live=()) for n in g.nodes))


#: MACs of results no output uses, by hand: mamba_like's causal conv1d (padding k - 1) computes s + k - 1 = 15
#: positions of which ``[..., :s]`` keeps 12: 2 batches x 64 channels x 3 positions x 4 taps
DEAD_MACS = {"mamba_like": 2 * 64 * 3 * 4}


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_macs_match_flop_counter(path: Path) -> None:
    from torch.utils.flop_counter import FlopCounterMode

    src = load_source(path)
    g = captured(path).graph
    macs = graph_metrics(eager(g)).macs
    assert macs - graph_metrics(g).macs == DEAD_MACS.get(path.stem, 0)
    model, inputs = src.model("meta"), src.inputs("meta")
    with FlopCounterMode(display=False) as fc, torch.device("meta"), torch.no_grad():
        model(*inputs)
    if path.stem in FLOPCOUNTER_GAPS:
        assert 2 * macs > fc.get_total_flops()
    else:
        assert 2 * macs == fc.get_total_flops()


def test_capture_is_deterministic() -> None:
    path = ROOT / "tests" / "models" / "llama_block.py"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = capture_source(load_source(path), validate=True).graph
        b = capture_source(load_source(path), validate=True).graph
    assert dumps(a) == dumps(b)


#: rules exercised by captures in their own test file (NVFP4 needs packed fp4 operands and blocked scales)
TESTED_IN_OWN_FILE = {"aten._scaled_mm": "test_nvfp4.py"}


def test_every_rule_is_tested() -> None:
    """Every rule is exercised by a corpus model, a case of tests/frontends/torch/test_torch_rules.py or a training step
    of tests/frontends/torch/test_train.py."""
    from test_torch_rules import CASES
    from test_train import TRAINING_RULES  # lowered only in training steps (tests/frontends/torch/test_train.py)

    seen: set[str] = set(CASES) | TRAINING_RULES
    for op, name in TESTED_IN_OWN_FILE.items():  # rules whose cases need their own set-up
        text = (Path(__file__).parent / name).read_text()
        assert f"torch.{op.removeprefix('aten.')}(" in text and "def test_" in text, (op, name)
        seen.add(op)
    for path in MODELS:
        seen |= captured(path).lowered.lowered_ops
    missing = sorted(op for op in ruled_ops() if op not in seen
                     and not (op.startswith("transformers.") and importlib.util.find_spec("transformers") is None))
    assert not missing, f"rules with no test: {missing}"


def test_buffer_updates_keep_ops_whole() -> None:
    """``num_batches_tracked.add_(1)`` (training-mode batch norm) is lowered in place, so the
    program is not decomposed and batch_norm stays one op."""
    ops = captured(ROOT / "tests" / "models" / "resnet_block.py").lowered.lowered_ops
    assert "aten.batch_norm" in ops and "aten.add_" in ops


def test_locations_are_relative() -> None:
    g = captured(ROOT / "tests" / "models" / "mlp.py").graph
    assert {n.location for n in g.nodes} <= {None} | {f"mlp.py:{i}" for i in range(1, 30)}
    assert any(n.location for n in g.nodes)


# ---------------------------------------------------------------- bytes against the dispatcher
# The bytes a capture counts, against an independent reference counted at the dispatcher.
#
# The reference (:mod:`solar_io.frontends.torch.bytecount`) runs each model's exported program on
# fake tensors and counts, per source op, the distinct storages its ATen calls read and the ones it
# creates and returns, at the bytes of the elements its views touch (storage offsets, so a view is
# its own elements, a broadcast adds none and disjoint slices add up). It is compared with the
# classical per-kernel bytes of the graph (``bound(..., residency=False)``: every kernel's operands
# cross DRAM once), matching each kernel to the source op of the same name in program order.
#
# They must be equal wherever the count is exact: elementwise ops, matmuls, convolutions, norms,
# reductions, copies. Where it cannot be, the cause is one of these, and the test asserts that the
# kernels that differ are exactly the ones these causes explain, so a new mismatch fails it:
#
# - *view*: a view-only node (reshape, permute, transpose, select, slice, expand, squeeze, split,
#   unbind, unfold, ...) moves no bytes in the graph; at the dispatcher it receives its input.
# - *immediate*: the kernel reads a constant that is one repeated value (``zeros_like``, ``fill``,
#   ``scalar_tensor``, ``new_zeros``): zero bytes in the graph, a materialised tensor at the
#   dispatcher.
# - *generated*: the kernel reads a constant the program computes from indices (a causal or
#   triangular mask, an ``arange``, a resampling table: ``generated: true``, zero bytes in the
#   graph); at the dispatcher it is a materialised tensor (or the op makes it internally).
# - *indirect*: a gather or scatter (embedding, index, gather, index_select, index_add, scatter*,
#   index_put, nll_loss): the graph counts at most one element per iteration point and the
#   selected elements of a scattered output; the dispatcher counts every tensor passed, whole.
# - the source ops of :data:`EXPLAINED_OPS`, each with its reason: strided windows that skip
#   input elements (the graph counts the elements read), in-place writes and functional scatters
#   whose output aliases its input, recurrent and attention ops the capture lowers into per-step or
#   per-stage kernels, triangular masks and pools whose graph reads a stored mask or several
#   overlapping windows, and multi-output ops whose unused outputs the graph never writes.

_UNION = "several accesses of one tensor (two halves, shifted or overlapping windows): the graph charges the largest"
_OUTPUTS = "values and indices: the graph writes only the output the program uses"
_REGION = "a write into part of a tensor: the graph counts the region written, the dispatcher the whole output"
_RECURRENT = "a recurrent op lowered per step; its initial state is an immediate"
#: Source ops whose graph bytes are below the dispatcher count (a lower bound stays one), and why.
EXPLAINED_OPS: dict[str, str] = {
    "aten.conv2d": "a strided 1x1 convolution skips input elements: the graph counts the elements read",
    "aten.adaptive_max_pool2d": _OUTPUTS, "aten.cummax": _OUTPUTS, "aten.cummin": _OUTPUTS,
    "aten.glu": _UNION, "aten.roll": _UNION, "aten.sum": _UNION, "aten.mul": _UNION,
    "aten.einsum": _UNION, "aten.copy": _REGION, "aten.select_scatter": _REGION, "aten.slice_scatter": _REGION,
    "aten.lstm": _RECURRENT, "aten.rnn_tanh": _RECURRENT,
    "aten.matmul": "eager copies a strided operand (a head split of a fused projection) to merge its batch dims "
                   "before bmm; the graph contracts the strided view directly",
}
#: Source ops whose graph bytes are ABOVE the dispatcher count: the classical count would charge bytes the
#: eager program does not move, so an unfused bound could be beaten. None today: views lowered as copies
#: and stored masks/resampling tables were such findings, fixed by exact view decisions and generated
#: constants (format 1.2). A new one must be fixed or listed here with its reason.
OVERCOUNTS: dict[str, str] = {}
STRUCTURAL = ("view", "indirect", "immediate", "generated", "decomposed")


def _root(g: Graph, tensor: str) -> str:
    """The tensor ``tensor`` views, through chains of view-only nodes."""
    producer = {a.tensor: n for n in g.nodes for a in n.outputs}
    while (n := producer.get(tensor)) is not None and n.kind == "data_movement" and n.view and len(n.inputs) == 1:
        tensor = n.inputs[0].tensor
    return tensor


def _cause(g: Graph, span: tuple[int, int]) -> str | None:
    nodes = g.nodes[span[0]:span[1] + 1]
    if all(n.kind == "data_movement" and n.view for n in nodes):
        return "view"
    if any(any(type(e) is Indirect for a in n.inputs + n.outputs for e in a.index or ()) for n in nodes):
        return "indirect"
    tmap = g.tensor_map
    if any(tmap[a.tensor].value is not None for n in nodes for a in n.inputs):
        return "immediate"
    if any(tmap[_root(g, a.tensor)].generated for n in nodes for a in n.inputs):
        return "generated"
    return None


def compare(path: Path) -> tuple[int, list[tuple[str, str, str, float, float]]]:
    """(kernels equal, [(kernel, op, cause, graph bytes, dispatcher bytes)] for the others)."""
    cap = captured(path)
    g = eager(cap.graph)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        records = program_bytes(cap.program, tuple(cap.source.inputs("meta")))
    report = bound(g, "h100-pcie", residency=False)
    equal, differ, j = 0, [], 0
    for k, span in zip(report.kernels, kernels(g), strict=True):
        start = j
        while j < len(records) and records[j].op != k.op:
            j += 1
        if j == len(records):  # no source op of this name left: the capture decomposed it
            differ.append((k.name, k.op, "decomposed", 0.0, 0.0))
            j = start
            continue
        ref = records[j].bytes
        j += 1
        if abs(ref - k.dram_bytes) <= 1e-9 * max(ref, 1.0):
            equal += 1
        else:
            cause = _cause(g, span) or ("explained" if k.op in EXPLAINED_OPS else "unexplained")
            differ.append((k.name, k.op, cause, k.dram_bytes, ref))
    return equal, differ


def test_views_touch_their_own_elements() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        base = torch.empty(6, 8)
        assert touched_bytes(base[2:4]) == 2 * 8 * 4  # a slice: its own elements, not the base's
        assert touched_bytes(base[:, :1].expand(6, 5)) == 6 * 4  # a broadcast adds no elements
        assert union_bytes([base[:2], base[4:]]) == 4 * 8 * 4  # disjoint slices add up
        assert union_bytes([base[:3], base[1:4]]) == 4 * 8 * 4  # overlapping ones count once
        assert union_bytes([base[::2, ::2]]) == 3 * 4 * 4


def test_classical_bytes_equal_the_dispatcher_count_where_exact() -> None:
    equal = 0
    under: dict[str, set[str]] = defaultdict(set)  # cause -> ops whose graph bytes are below the reference
    over: set[str] = set()
    unexplained = []
    for path in MODELS:
        n, differ = compare(path)
        equal += n
        for name, op, cause, got, ref in differ:
            if got > ref:
                over.add(op)
            else:
                under[cause].add(op)
            if cause == "unexplained" and op not in OVERCOUNTS:
                unexplained.append(f"{path.stem}:{name} ({op}): graph {got:.0f} B, dispatcher {ref:.0f} B")
    assert not unexplained, "\n".join(unexplained)
    assert set().union(*(ops for c, ops in under.items() if c not in STRUCTURAL)) == set(EXPLAINED_OPS)
    assert over == set(OVERCOUNTS)
    assert equal >= 500
