"""Capture records never hide a failure (issue 15, items 3-5).

- A model that raises when run eagerly is a capture error (one line, exit 1, nothing written),
  unless --no-validate, whose record says the model was not run.
- Uninitialised memory (``empty_like`` buffers of a Mixtral-style MoE block) is never compared,
  while what is later written into it is.
- An op with no CPU kernel for its dtypes (``histc`` on integer expert ids, DeepSeek-V3 style) is
  listed as unchecked with the reason; the rest of the graph is validated and written.

Uninitialised memory holds arbitrary values; to make the "before" behaviour reproducible these
tests run under ``torch.use_deterministic_algorithms(True, warn_only=True)``, where PyTorch fills
it with NaN (the worst case of arbitrary values), as the validation itself now does.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from inprocess import Result, run_main  # noqa: E402
from paths import TESTS  # noqa: E402

from solar_io import FORMAT_VERSION, GraphError, dumps, load, loads, validate  # noqa: E402
from solar_io.frontends.torch.capture import capture_source  # noqa: E402
from solar_io.frontends.torch.check import validate_capture  # noqa: E402
from solar_io.frontends.torch.loader import load_source  # noqa: E402
from solar_io.graph import Unchecked  # noqa: E402

MODELS = TESTS / "models_records"


@pytest.fixture
def filled_memory() -> Iterator[None]:
    """Uninitialised memory filled with NaN (floats) / the largest integer, as in the validation."""
    before = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])


def cli(*args: str) -> Result:
    """``solar-io ARGS`` in this process (a fresh interpreter costs seconds of CPU importing torch):
    these tests check exit status, stderr and the file written, not process-level behaviour."""
    return run_main(*args)


def cli_process(*args: str) -> subprocess.CompletedProcess:
    """``solar-io ARGS`` in a fresh interpreter: for a model file that registers a torch op library,
    global state that must not leak into the other tests of this worker."""
    return subprocess.run([sys.executable, "-m", "solar_io", *args], capture_output=True, text=True, timeout=300)


def capture(path: Path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return capture_source(load_source(path), validate=True, **kw)


MIXED = '''
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)  # float32 weights

    def forward(self, x):
        return self.fc(x)


def get_inputs():
    return [torch.randn(2, 8, dtype=torch.float16)]
'''


def test_a_model_that_raises_eagerly_is_a_capture_error(tmp_path: Path) -> None:
    """fp16 input meets fp32 weights: eager PyTorch raises, so the capture fails, names the
    exception in one line and writes nothing; --no-validate writes it, saying it was not run."""
    src = tmp_path / "mixed.py"
    src.write_text(MIXED)
    out = tmp_path / "g.yaml"
    res = cli("capture", str(src), "-o", str(out))
    assert res.returncode == 1 and not out.exists()
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert "mixed.py: running the model eagerly raised RuntimeError" in res.stderr and "same dtype" in res.stderr
    res = cli("capture", str(src), "--no-validate", "-o", str(out))
    assert res.returncode == 0, res.stderr
    v = load(out).validation
    assert v.status == "skipped" and "--no-validate" in v.reason and "not run" in v.reason


def test_jax_function_that_raises_when_run_is_a_capture_error(tmp_path: Path) -> None:
    """A host callback that raises: the function traces (abstract values) but cannot run."""
    pytest.importorskip("jax")
    src = tmp_path / "jraise.py"
    src.write_text(textwrap.dedent('''
        import jax
        import jax.numpy as jnp
        import numpy as np


        def _host(x):
            raise ValueError("no table entry for these ids")


        def model(x):
            return jnp.tanh(x) + jax.pure_callback(_host, jax.ShapeDtypeStruct(x.shape, x.dtype), x)


        def get_inputs():
            return [np.ones((4, 8), np.float32)]
    '''))
    out = tmp_path / "g.yaml"
    res = cli("capture", str(src), "-o", str(out))
    assert res.returncode == 1 and not out.exists()
    assert res.stderr.count("\n") == 1 and "no table entry for these ids" in res.stderr


GPU_ONLY = '''
import torch
from torch import nn

lib = torch.library.Library("solario_records", "DEF")
lib.define("gpu_only(Tensor x) -> Tensor")
lib.impl("gpu_only", lambda x: torch.empty_like(x), "Meta")  # shapes only: no CPU kernel


class Model(nn.Module):
    def forward(self, x):
        return torch.ops.solario_records.gpu_only(x) + 1


def get_inputs():
    return [torch.randn(4)]
'''


def test_an_op_with_no_cpu_kernel_at_all_is_a_skip_not_an_error(tmp_path: Path) -> None:
    """An op registered for meta (and, say, CUDA) but not the CPU: the program cannot run on the
    validation device, which is not its failure: the record says skipped and names the op."""
    src = tmp_path / "gpu_only.py"
    src.write_text(GPU_ONLY)
    res = cli_process("capture", str(src), "-o", str(tmp_path / "g.yaml"))
    assert res.returncode == 0, res.stderr
    v = load(tmp_path / "g.yaml").validation
    assert v.status == "skipped" and "solario_records.gpu_only has no kernel on the cpu" in v.reason


def test_uninitialised_buffers_are_not_compared_per_node(filled_memory: None) -> None:
    """Validated per node (over the budget), the empty_like call of the MoE block was compared with
    eager's arbitrary values ("output empty_like.out differs"); it is now listed as not compared."""
    g = capture(MODELS / "mixtral_moe.py", validate_budget=1024).graph
    assert g.validation.status == "passed", g.validation.reason
    assert "not compared (uninitialised memory): aten.empty_like.default" in g.validation.reason


def test_uninitialised_buffers_whole_graph_and_what_overwrites_them_is_compared(filled_memory: None) -> None:
    g = capture(MODELS / "mixtral_moe.py").graph
    assert g.validation.status == "passed" and g.validation.method == "reference-executor", g.validation.reason
    assert any(t.value == 0.0 and t.role == "constant" for t in g.tensors)  # the file keeps 0 for empty_like


PARTIAL = '''
import torch
from torch import nn


class Model(nn.Module):
    """Rows 0..2 of an empty_like buffer are written (index_copy_), rows 3..5 never are."""

    def __init__(self, scale=2.0):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.scale = scale

    def forward(self, x):
        out = torch.empty_like(x)
        out.index_copy_(0, torch.arange(3), self.fc(x[:3]) * self.scale)
        return out


def get_inputs():
    return [torch.randn(6, 8)]
'''


def test_rows_never_written_are_not_compared_rows_written_are(tmp_path: Path, filled_memory: None) -> None:
    """Today's code compared the unwritten rows (eager: arbitrary, graph: 0) and failed; they are
    now arbitrary on both sides, while the written rows are still compared: a model writing other
    values there (scale 3 instead of the captured 2) fails the same graph."""
    src = tmp_path / "partial.py"
    src.write_text(PARTIAL)
    cap = capture(src)
    assert cap.graph.validation.status == "passed", cap.graph.validation.reason
    factory = cap.source.model_factory
    other = dataclasses.replace(cap.source, model_factory=lambda: _rescaled(factory(), 3.0))
    v = validate_capture(dataclasses.replace(cap, source=other))
    assert v.status == "failed" and "differs" in v.reason


def _rescaled(model: torch.nn.Module, scale: float) -> torch.nn.Module:
    model.scale = scale
    return model


def test_histc_on_integer_ids_is_unchecked_and_the_rest_validated(tmp_path: Path) -> None:
    """DeepSeek-V3-style routing counts with histc on int64 ids: no CPU kernel for Long. Before,
    the eager run raised and the whole validation was skipped; now the node is unchecked, with
    the reason in the file and on stderr, and everything else is compared."""
    out = tmp_path / "g.yaml"
    res = cli("capture", str(MODELS / "deepseek_histc.py"), "-o", str(out))
    assert res.returncode == 0, res.stderr
    g = load(out)
    v = g.validation
    assert v.status == "passed" and v.method == "reference-executor", v.reason
    # histc is lowered (rules/select.py): every node of it is unchecked, the one writing its result included
    assert {u.op for u in v.unchecked} == {"aten.histc"} and "histc" in [u.node for u in v.unchecked]
    assert "not implemented for 'Long'" in v.unchecked[0].reason and "float64" in v.unchecked[0].reason
    assert "histc (aten.histc): no kernel on the cpu" in res.stderr
    assert not [i for i in validate(g) if i.severity == "error"] and loads(dumps(g)) == g


def test_histc_behind_a_device_test_runs_widened_in_the_executor() -> None:
    """The graph (traced on meta) counts integer ids, the CPU eager run counts floats: before, the
    executor's histc raised and validation failed; then it ran widened and the node was unchecked; now
    histc is lowered (rules/select.py), counts integers exactly, and nothing runs widened."""
    v = capture(MODELS / "histc_device_branch.py").graph.validation
    assert v.status == "passed", v.reason
    assert list(v.unchecked) == []


def test_a_wrong_value_downstream_of_an_unchecked_node_still_fails() -> None:
    """The check stays honest around the unchecked node: an eager model that computes something
    else after histc fails against the captured graph."""
    cap = capture(MODELS / "deepseek_histc.py")
    factory = cap.source.model_factory

    def other():  # counts over two bins (ids 2 and 3 fall outside): a different histc, downstream
        m = factory()
        m.experts = 2
        return m

    v = validate_capture(dataclasses.replace(cap, source=dataclasses.replace(cap.source, model_factory=other)))
    assert v.status == "failed"


def test_unchecked_round_trips_and_is_refused_in_a_1_0_or_1_1_file() -> None:
    g = capture(MODELS / "deepseek_histc.py").graph
    text = dumps(g)
    assert "unchecked:\n  - node: histc.float\n    op: aten.histc\n" in text  # the first of its nodes
    assert loads(text) == g
    for old_version in ("1.0", "1.1"):
        old = text.replace(f'version: "{FORMAT_VERSION}"', f'version: "{old_version}"', 1)
        with pytest.raises(GraphError) as e:  # among the problems (1.2's generated, 1.3's kernel, ...)
            loads(old)
        assert any(f"new in format 1.2; this file says version {old_version}" in i.message
                   and "unchecked" in str(i.path) for i in e.value.issues), e.value.lines()
    bad = dataclasses.replace(g, validation=dataclasses.replace(g.validation, unchecked=(
        Unchecked("nope", "aten.histc", "x"),)))
    assert any("unchecked node 'nope'" in i.message for i in validate(bad))
