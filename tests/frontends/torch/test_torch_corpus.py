"""The model corpus (tests/models): every file captures, validates, round-trips, and counts
the same MACs as torch's FlopCounterMode.

Each file is captured once (module-level cache) with whole-graph validation: the model run
eagerly on CPU against the graph on the reference executor.
"""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")


from paths import ROOT  # noqa: E402

from solar_io import dumps, loads, validate  # noqa: E402
from solar_io.frontends.torch.capture import Capture, capture_source  # noqa: E402
from solar_io.frontends.torch.loader import load_source  # noqa: E402
from solar_io.frontends.torch.rulebook import ruled_ops  # noqa: E402
from solar_io.metrics import graph_metrics  # noqa: E402

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
    assert g.producer.frontend == "torch" and g.producer.source == path.name
    assert len(g.producer.source_sha256 or "") == 64
    opaque = {n.op for n in g.nodes if n.kind == "opaque"}
    assert opaque == EXPECTED_OPAQUE.get(path.stem, set())


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_macs_match_flop_counter(path: Path) -> None:
    from torch.utils.flop_counter import FlopCounterMode

    src = load_source(path)
    macs = graph_metrics(captured(path).graph).macs
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


def test_every_rule_is_tested() -> None:
    """Every rule is exercised by a corpus model, a case of tests/frontends/torch/test_torch_rules.py or a training step
    of tests/frontends/torch/test_train.py."""
    from test_torch_rules import CASES
    from test_train import TRAINING_RULES  # lowered only in training steps (tests/frontends/torch/test_train.py)

    seen: set[str] = set(CASES) | TRAINING_RULES
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
