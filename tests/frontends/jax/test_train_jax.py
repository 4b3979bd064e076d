"""JAX training-step capture (issue 22): jax.value_and_grad of a model, phases, MACs and AdamW bytes by
hand, validation against jax.jit and optax, --recompute, the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("optax")

from inprocess import run_main  # noqa: E402
from paths import TESTS  # noqa: E402

from solar_io.frontends.common.training import TrainSpec  # noqa: E402
from solar_io.frontends.jax.train import capture_train_file  # noqa: E402
from solar_io.metrics import graph_metrics, tensor_bytes  # noqa: E402
from solar_io.training import live_activations  # noqa: E402

MLP = """
import jax
import jax.numpy as jnp
import numpy as np
DT = jnp.float32
def get_params():
    r = np.random.default_rng(0)
    f = lambda *s: jnp.asarray(r.standard_normal(s) * 0.3, DT)
    return {"l1": {"w": f(8, 16), "b": f(16)}, "l2": {"w": f(16, 4), "b": f(4)}}
def model(p, x):
    h = jax.nn.relu(x @ p["l1"]["w"] + p["l1"]["b"])
    return h @ p["l2"]["w"] + p["l2"]["b"]
def get_inputs():
    return [jnp.asarray(np.random.default_rng(1).standard_normal((6, 8)), DT)]
"""

PARAMS = 8 * 16 + 16 + 16 * 4 + 4


def _file(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "model.py"
    p.write_text(text)
    return p


@pytest.mark.parametrize("loss", ["mse", "ce", "sum"])
def test_mlp_step_macs_phases_validation(tmp_path: Path, loss: str) -> None:
    g = capture_train_file(_file(tmp_path, MLP), TrainSpec(loss=loss, optimizer="none"))
    assert g.validation.status == "passed", g.validation.reason
    assert not [n for n in g.nodes if n.kind == "opaque"]
    m, d, h, o = 6, 8, 16, 4
    forward = m * d * h + m * h * o
    # both weight gradients (one forward each) and layer 2's input gradient: the input x needs none
    assert graph_metrics(g).macs == 3 * forward - m * d * h
    by_phase: dict[str, int] = {}
    for n, nm in zip(g.nodes, graph_metrics(g).nodes, strict=True):
        by_phase[n.phase] = by_phase.get(n.phase, 0) + nm.macs
    assert by_phase["forward"] == forward and by_phase["backward"] == 2 * forward - m * d * h
    assert {n.phase for n in g.nodes} == {"forward", "loss", "backward"}
    outs = {t.name for t in g.tensors if t.role == "output"}
    assert {"l1.w.grad", "l1.b.grad", "l2.w.grad", "l2.b.grad"} <= outs


def _optimizer_bytes(g) -> float:  # noqa: ANN001
    opt = [n for n in g.nodes if n.phase == "optimizer"]
    written = {a.tensor for n in opt for a in n.outputs}
    read = {a.tensor for n in opt for a in n.inputs} - written
    tm = g.tensor_map
    return sum(tensor_bytes(g, tm[t]) for t in read | {t for t in written if tm[t].role == "output"})


@pytest.mark.parametrize(("dtype", "master", "per_param"), [
    ("jnp.float32", None, 4 * 4 + 3 * 4),            # read g, m, v, w; write m, v, w (fp32)
    ("jnp.bfloat16", "fp32", 2 + 3 * 4 + 3 * 4 + 2)])  # bf16 g; fp32 m, v, master read and written; bf16 param
def test_adamw_bytes_by_hand_and_optax(tmp_path: Path, dtype: str, master: str | None, per_param: int) -> None:
    g = capture_train_file(_file(tmp_path, MLP.replace("DT = jnp.float32", f"DT = {dtype}")),
                           TrainSpec(loss="mse", optimizer="adamw", master_dtype=master))
    assert g.validation.status == "passed", g.validation.reason
    assert "optax adamw" in g.validation.reference
    assert _optimizer_bytes(g) == per_param * PARAMS
    assert {n.kernel for n in g.nodes if n.phase == "optimizer"} == {f"adamw:{p}" for p in
                                                                      ("l1.w", "l1.b", "l2.w", "l2.b")}


def test_sgd_validates(tmp_path: Path) -> None:
    g = capture_train_file(_file(tmp_path, MLP), TrainSpec(optimizer="sgd"))
    assert g.validation.status == "passed", g.validation.reason
    assert _optimizer_bytes(g) == 3 * 4 * PARAMS  # read g, w; write w


RESIDUAL = """
import jax
import jax.numpy as jnp
import numpy as np
def get_params():
    r = np.random.default_rng(0)
    f = lambda *s: jnp.asarray(r.standard_normal(s) * 0.3, jnp.float32)
    return [{"up": f(8, 16), "down": f(16, 8)} for _ in range(2)]
def model(p, x):
    for layer in p:
        x = x + jnp.tanh(x @ layer["up"]) @ layer["down"]
    return x
def get_inputs():
    return [jnp.asarray(np.random.default_rng(1).standard_normal((6, 8)), jnp.float32)]
"""


def test_recompute_residual_layers(tmp_path: Path) -> None:
    # two residual layers x + tanh(x @ up) @ down (B=6, d=8, h=16): the backward re-runs each layer's up
    # projection and tanh (tanh's backward reads its output; down's weight gradient reads it too), not down
    p = _file(tmp_path, RESIDUAL)
    base = capture_train_file(p, TrainSpec(loss="mse", optimizer="none"))
    g = capture_train_file(p, TrainSpec(loss="mse", optimizer="none", recompute=True))
    assert g.validation.status == "passed", g.validation.reason
    b, d, h = 6, 8, 16
    assert graph_metrics(g).macs == graph_metrics(base).macs + 2 * b * d * h
    assert live_activations(g).saved < live_activations(base).saved


def test_cli_jax_train(tmp_path: Path) -> None:
    p = _file(tmp_path, MLP)
    out = tmp_path / "step.yaml"
    r = run_main("capture", str(p), "--train", "--loss", "ce", "-o", str(out))
    assert r.returncode == 0, r.stderr
    r = run_main("bound", str(out), "--hw", "h100-sxm")
    assert r.returncode == 0, r.stderr
    assert "optimizer" in r.stdout and "peak live activations" in r.stdout
    r = run_main("capture", str(_file(tmp_path, "import jax\ndef model(x):\n    return x * 2\n"
                                      "def get_inputs():\n    return [jax.numpy.ones(3)]\n")), "--train")
    assert r.returncode != 0 and "has no parameters to train" in r.stderr and "Traceback" not in r.stderr


def test_flax_batch_stats_are_read_not_trained() -> None:
    # a Flax model with a batch_stats collection: only the params collection gets gradients and updates
    g = capture_train_file(TESTS / "models_jax" / "flax_batchnorm.py", TrainSpec(optimizer="adamw"))
    assert g.validation.status == "passed", g.validation.reason
    kernels = {n.kernel for n in g.nodes if n.phase == "optimizer"}
    assert kernels and not [k for k in kernels if "batch_stats" in k]
    assert not [t for t in g.tensors if t.name.startswith("batch_stats") and t.name.endswith(".grad")]
