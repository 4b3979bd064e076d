"""JAX strided backward passes (issue 22): lax.pad with interior and negative padding (the backward of a
strided slice or pooling), the gradients of a 1x1 stride-2 convolution (a ResNet downsample: a weight
gradient with negative padding, an input gradient whose odd phases no tap reaches) and a max pooling's
backward (select_and_scatter_add) and a depthwise convolution's weight gradient (batch groups) are lowered,
not opaque; bytes and MACs by hand, validated against jax.jit."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("jax")

from solar_io.backends.traffic.graph import traffic_of  # noqa: E402
from solar_io.backends.traffic.kernels import kernel_groups, kernel_traffic  # noqa: E402
from solar_io.frontends.common.training import TrainSpec  # noqa: E402
from solar_io.frontends.jax.train import capture_train_file  # noqa: E402
from solar_io.metrics import graph_metrics  # noqa: E402

PAD = """
import jax
import jax.numpy as jnp
import numpy as np
def get_params():
    return {"s": jnp.asarray(np.random.default_rng(0).standard_normal((4,)), jnp.float32)}
def model(p, x):
    h = (x * p["s"])[:, ::2, 1::2]
    return jax.lax.pad(h, 0.5, [(0, 0, 0), (-1, 2, 1), (1, -2, 2), (0, 0, 0)])
def get_inputs():
    return [jnp.asarray(np.random.default_rng(1).standard_normal((2, 9, 9, 4)), jnp.float32)]
"""

DOWNSAMPLE = """
import jax
import jax.numpy as jnp
import numpy as np
def get_params():
    r = np.random.default_rng(0)
    return {"s": jnp.asarray(r.standard_normal((4,)), jnp.float32),
            "w": jnp.asarray(r.standard_normal((1, 1, 4, 8)) * 0.2, jnp.float32)}
def model(p, x):
    dn = ("NHWC", "HWIO", "NHWC")
    return jax.lax.conv_general_dilated(x * p["s"], p["w"], (2, 2), "VALID", dimension_numbers=dn)
def get_inputs():
    return [jnp.asarray(np.random.default_rng(1).standard_normal((2, 8, 8, 4)), jnp.float32)]
"""


MAXPOOL = """
import jax
import jax.numpy as jnp
import numpy as np
import flax.linen as nn
def get_params():
    return {"s": jnp.asarray(np.random.default_rng(0).standard_normal((4,)), jnp.float32)}
def model(p, x):
    h = jax.nn.relu(x * p["s"])  # many zeros: windows with ties
    return nn.max_pool(h, (3, 3), (2, 2), padding=((1, 1), (1, 1))) * 2.0
def get_inputs():
    return [jnp.asarray(np.random.default_rng(1).standard_normal((2, 9, 9, 4)), jnp.float32)]
"""


DEPTHWISE = """
import jax
import jax.numpy as jnp
import numpy as np
def get_params():
    r = np.random.default_rng(0)
    return {"s": jnp.asarray(r.standard_normal((4,)), jnp.float32),
            "w": jnp.asarray(r.standard_normal((3, 3, 1, 4)) * 0.3, jnp.float32)}
def model(p, x):
    dn = ("NHWC", "HWIO", "NHWC")
    return jax.lax.conv_general_dilated(x * p["s"], p["w"], (1, 1), "SAME", dimension_numbers=dn,
                                        feature_group_count=4)
def get_inputs():
    return [jnp.asarray(np.random.default_rng(1).standard_normal((2, 8, 8, 4)), jnp.float32)]
"""


def _kernels(g):  # noqa: ANN001, ANN202
    """[(op of the kernel's first node, bytes read, bytes written)] of the unfused bound's kernels."""
    gt = traffic_of(g)
    groups = kernel_groups(g, spans=gt.spans)
    return [(g.nodes[k[0]].op, sum(t.reads.values()), sum(t.writes.values()))
            for k, t in zip(groups, kernel_traffic(g, gt.nodes, groups, gt.exposed), strict=True)]


def _step(tmp_path: Path, text: str):  # noqa: ANN202
    src = tmp_path / "model.py"
    src.write_text(text)
    g = capture_train_file(src, TrainSpec(optimizer="none"))
    assert g.validation.status == "passed", g.validation.reason
    assert not [n.name for n in g.nodes if n.kind == "opaque"]
    return g


def test_interior_and_negative_pad(tmp_path: Path) -> None:
    g = _step(tmp_path, PAD)
    assert graph_metrics(g).macs == 0  # pads, slices and elementwise maps: no contraction
    pads = [(r, w) for op, r, w in _kernels(g) if op == "jax.pad"]
    h = 2 * 5 * 4 * 4 * 4  # x[:, ::2, 1::2]: [2, 5, 4, 4] fp32
    # forward pad: H 5 -> -1 + 5 + 4*1 + 2 = 10, W 4 -> 1 + 4 + 3*2 - 2 = 9; write the result once and read
    # the 3 of h's 4 columns it keeps (column i lands at 1 + 3i: the negative high pad cuts column 3, so
    # no output uses it: live_work). Row 0, which the negative low pad cuts, is still read: the demand is
    # carried through the interior padding's reshape as a box that holds it.
    assert (h * 3 // 4, 2 * 10 * 9 * 4 * 4) in pads
    # the strided slice's backward, pad(dh, interior 1 in H, W): read dh once, write [2, 9, 9, 4] once
    assert (h, 2 * 9 * 9 * 4 * 4) in pads
    interior = [n for n in g.nodes if n.op == "jax.pad" and n.pad and n.kernel]
    assert interior and all(n.kernel.startswith("pad_") for n in interior)


def test_strided_1x1_conv_step(tmp_path: Path) -> None:
    g = _step(tmp_path, DOWNSAMPLE)
    n, ho, wo, c, k = 2, 4, 4, 4, 8
    # forward, weight gradient and input gradient: N*Ho*Wo*C*K each; the three phases of the input gradient
    # that fall between strides read no tap and are zeros (no MACs)
    assert graph_metrics(g).macs == 3 * n * ho * wo * c * k
    convs = [(r, w) for op, r, w in _kernels(g) if op == "jax.conv_general_dilated"]
    h_read = n * ho * wo * c * 4  # a 1x1 stride-2 window reads every other pixel of x * s
    dy, w_bytes = n * ho * wo * k * 4, c * k * 4
    assert (h_read + w_bytes, dy) in convs            # forward
    assert (h_read, w_bytes) in convs                 # weight gradient (dy of a sum loss is a broadcast: no bytes)
    assert (w_bytes, n * 8 * 8 * c * 4) in convs      # input gradient: writes all of dx, zeros included


def test_max_pool_backward(tmp_path: Path) -> None:
    # select_and_scatter_add: each window's first maximum (ties among relu zeros: XLA's order) gets the
    # gradient; one kernel reads the pooled input [2, 9, 9, 4] and dy [2, 5, 5, 4] once, writes dx whole
    g = _step(tmp_path, MAXPOOL)
    assert graph_metrics(g).macs == 0
    (k,) = [(r, w) for op, r, w in _kernels(g) if op == "jax.select_and_scatter_add"]
    x = 2 * 9 * 9 * 4 * 4
    assert k == (x + 2 * 5 * 5 * 4 * 4, x)


def test_depthwise_conv_step(tmp_path: Path) -> None:
    # the weight gradient of a depthwise convolution is a batch-grouped convolution (batch_group_count 4) and
    # its result is re-laid-out by a reshape with dimensions (moving size-1 dims only: a view)
    g = _step(tmp_path, DEPTHWISE)
    n, h, w, c, k = 2, 8, 8, 4, 3 * 3
    assert graph_metrics(g).macs == 3 * n * h * w * c * k  # forward, weight and input gradients
    assert any(dict(nd.attrs).get("batch_groups") == 4 for nd in g.nodes)
    (wgrad,) = [(r, wr) for op, r, wr in _kernels(g) if op == "jax.conv_general_dilated" and wr == k * c * 4]
    assert wgrad[0] == n * h * w * c * 4  # reads x * s once (dy of a sum loss is a broadcast: no bytes)
