"""JAX: a matrix product written as a broadcast product and a sum is captured as one contraction
(frontends/common/contract.py, applied by the graph builder), its MACs equal to what XLA counts for
the same product written ``a @ b``."""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from solar_io.frontends.common.contract import CONTRACTION_ATTR  # noqa: E402
from solar_io.frontends.jax import capture_function  # noqa: E402
from solar_io.metrics import graph_metrics  # noqa: E402


def rnd(*shape: int, seed: int = 0) -> jax.Array:
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape, dtype=np.float32))


def test_broadcast_product_sum_is_one_contraction():
    a, b = rnd(6, 5), rnd(5, 7, seed=1)
    g = capture_function(lambda a, b: (a[:, :, None] * b[None]).sum(1), a, b, name="bmm.py").graph
    assert g.validation.status == "passed", g.validation.reason
    (node,) = [n for n in g.nodes if dict(n.attrs).get(CONTRACTION_ATTR)]
    assert (node.map, node.reduce, node.op) == ("mul", "add", "jax.mul+jax.reduce_sum")
    assert len([n for n in g.nodes if n.kind == "einsum"]) == 1
    macs = graph_metrics(g).macs
    assert macs == 6 * 5 * 7
    cost = jax.jit(lambda a, b: a @ b).lower(a, b).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    if cost and "flops" in cost:
        assert cost["flops"] == 2 * macs


def test_elementwise_product_summed_stays_vector_work():
    a, b = rnd(6, 5), rnd(6, 5, seed=1)
    g = capture_function(lambda a, b: (a * b).sum(1), a, b, name="dot.py").graph
    assert g.validation.status == "passed", g.validation.reason
    assert not [n for n in g.nodes if dict(n.attrs).get(CONTRACTION_ATTR)]
    assert graph_metrics(g).macs == 0
