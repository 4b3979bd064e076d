"""The same network in PyTorch and in JAX captures to identical MACs, FLOPs per unit and bytes per role."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("jax")
pytest.importorskip("torch")

from solar_io.graph import Graph  # noqa: E402
from solar_io.metrics import graph_metrics, tensor_bytes  # noqa: E402

TORCH_MLP = '''
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.fc2 = nn.Linear(64, 16)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return []
'''

JAX_MLP = '''
import jax
import jax.numpy as jnp


def get_params():
    k1, k2 = jax.random.split(jax.random.PRNGKey(1))
    return {"w1": jax.random.normal(k1, (32, 64)), "b1": jnp.zeros(64),
            "w2": jax.random.normal(k2, (64, 16)), "b2": jnp.zeros(16)}


def get_inputs():
    return (jax.random.normal(jax.random.PRNGKey(2), (8, 32)),)


def model(p, x):
    return jax.nn.relu(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
'''

TORCH_CONV = '''
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, stride=2, padding=1, bias=False)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, groups=2, bias=False)

    def forward(self, x):
        return self.conv2(torch.tanh(self.conv(x)))


def get_inputs():
    return [torch.randn(2, 4, 16, 16)]


def get_init_inputs():
    return []
'''

JAX_CONV = '''
import jax
from jax import lax


def get_params():
    k1, k2 = jax.random.split(jax.random.PRNGKey(1))
    return {"w": jax.random.normal(k1, (8, 4, 3, 3)), "w2": jax.random.normal(k2, (8, 4, 3, 3))}


def get_inputs():
    return (jax.random.normal(jax.random.PRNGKey(2), (2, 4, 16, 16)),)


def model(p, x):
    y = jax.numpy.tanh(lax.conv_general_dilated(x, p["w"], (2, 2), ((1, 1), (1, 1))))
    return lax.conv_general_dilated(y, p["w2"], (1, 1), ((1, 1), (1, 1)), feature_group_count=2)
'''


TORCH_ATTN = '''
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(32, 96, bias=False)
        self.out = nn.Linear(32, 32, bias=False)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(32, dim=-1)
        q, k, v = (t.reshape(b, s, 4, 8).transpose(1, 2) for t in (q, k, v))
        a = torch.softmax(q @ k.transpose(-1, -2) * 8 ** -0.5, dim=-1)
        return self.out((a @ v).transpose(1, 2).reshape(b, s, d))


def get_inputs():
    return [torch.randn(2, 16, 32)]


def get_init_inputs():
    return []
'''

JAX_ATTN = '''
import jax
import jax.numpy as jnp


def get_params():
    k1, k2 = jax.random.split(jax.random.PRNGKey(1))
    return {"wqkv": jax.random.normal(k1, (32, 96)) * 0.1, "wo": jax.random.normal(k2, (32, 32)) * 0.1}


def get_inputs():
    return (jax.random.normal(jax.random.PRNGKey(2), (2, 16, 32)),)


def model(p, x):
    b, s, d = x.shape
    q, k, v = jnp.split(x @ p["wqkv"], 3, axis=-1)
    q, k, v = (t.reshape(b, s, 4, 8).transpose(0, 2, 1, 3) for t in (q, k, v))
    a = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) * 8 ** -0.5, axis=-1)
    return (a @ v).transpose(0, 2, 1, 3).reshape(b, s, d) @ p["wo"]
'''

# A pre-norm transformer block: layer norm, 4-head attention, GELU (exact) MLP, residuals
TORCH_BLOCK = '''
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(32), nn.LayerNorm(32)
        self.qkv = nn.Linear(32, 96)
        self.proj = nn.Linear(32, 32)
        self.fc1, self.fc2 = nn.Linear(32, 128), nn.Linear(128, 32)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(32, dim=-1)
        q, k, v = (t.reshape(b, s, 4, 8).transpose(1, 2) for t in (q, k, v))
        a = torch.softmax(q @ k.transpose(-1, -2) * 8 ** -0.5, dim=-1)
        x = x + self.proj((a @ v).transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


def get_inputs():
    return [torch.randn(2, 16, 32)]


def get_init_inputs():
    return []
'''

JAX_BLOCK = '''
import jax
import jax.numpy as jnp
import numpy as np


def get_params():
    r = np.random.default_rng(1)
    n = lambda *s: (r.standard_normal(s, dtype=np.float32) * 0.1)
    return {"g1": np.ones(32, np.float32), "b1": np.zeros(32, np.float32), "g2": np.ones(32, np.float32),
            "b2": np.zeros(32, np.float32), "wqkv": n(32, 96), "bqkv": n(96), "wo": n(32, 32), "bo": n(32),
            "w1": n(32, 128), "c1": n(128), "w2": n(128, 32), "c2": n(32)}


def get_inputs():
    return (np.random.default_rng(2).standard_normal((2, 16, 32), dtype=np.float32),)


def layer_norm(x, g, b):
    c = x - x.mean(-1, keepdims=True)
    return c * jax.lax.rsqrt((c ** 2).mean(-1, keepdims=True) + 1e-5) * g + b


def model(p, x):
    b, s, d = x.shape
    q, k, v = jnp.split(layer_norm(x, p["g1"], p["b1"]) @ p["wqkv"] + p["bqkv"], 3, axis=-1)
    q, k, v = (t.reshape(b, s, 4, 8).transpose(0, 2, 1, 3) for t in (q, k, v))
    a = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) * 8 ** -0.5, axis=-1)
    x = x + (a @ v).transpose(0, 2, 1, 3).reshape(b, s, d) @ p["wo"] + p["bo"]
    h = jax.nn.gelu(layer_norm(x, p["g2"], p["b2"]) @ p["w1"] + p["c1"], approximate=False)
    return x + h @ p["w2"] + p["c2"]
'''


def summary(g: Graph) -> dict:
    m = graph_metrics(g)
    roles: dict[str, float] = {}
    for t in g.tensors:
        if t.role in ("input", "weight", "output"):
            roles[t.role] = roles.get(t.role, 0) + tensor_bytes(g, t)
    return {"macs": m.macs, "flops_matrix": m.flops_matrix, "flops_vector": m.flops_vector,
            "transcendental": m.transcendental, "bytes_by_role": roles}


# Vector FLOPs the JAX writing has beyond the PyTorch one, derived op by op:
# - jax.nn.softmax takes max(row max, -inf) once per row after the reduction (its guard for
#   all -inf rows): one vector FLOP per softmax row (batch 2 x 4 heads x 16 query rows);
# - jax.nn.gelu(approximate=False) is 0.5*x * erfc(-x * 1/sqrt(2)) in the jaxpr: four vector
#   ops per element (halve, negate, scale, multiply) and one special function (erfc), exactly
#   the gelu map op's cost, so the transformer block differs by its softmax rows only.
SOFTMAX_ROWS = 2 * 4 * 16
CASES = [("mlp", TORCH_MLP, JAX_MLP, 0), ("conv", TORCH_CONV, JAX_CONV, 0),
         ("attention", TORCH_ATTN, JAX_ATTN, SOFTMAX_ROWS),
         ("transformer_block", TORCH_BLOCK, JAX_BLOCK, SOFTMAX_ROWS)]


@pytest.mark.parametrize("torch_src,jax_src,extra", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_same_counts_as_torch(tmp_path: Path, torch_src: str, jax_src: str, extra: int) -> None:
    from solar_io.frontends import jax as jfe
    from solar_io.frontends import torch as tfe

    (tmp_path / "t.py").write_text(torch_src)
    (tmp_path / "j.py").write_text(jax_src)
    gt = tfe.capture_file(tmp_path / "t.py")
    gj = jfe.capture_file(tmp_path / "j.py")
    assert gt.validation.status == gj.validation.status == "passed"
    sj, st = summary(gj), summary(gt)
    assert sj.pop("flops_vector") - st.pop("flops_vector") == extra
    assert sj == st
