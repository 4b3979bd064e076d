"""Index values the file does not hold: every gather and scatter through them counts its indexes as
distinct rows or positions, and the file (or, for a file written without it, the bound's report)
says so (``gather_indices``, ``scatter_indices``: solar_io.metrics.index_assumptions).

Hand counts: an embedding table w[V=64, D=8] fp32 read through S=5 token ids (int64) reads 5 rows
of 8 x 4 B = 160 B (distinct ids assumed; the same id five times would read one row, 32 B).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from solar_io import graph_metrics, loads
from solar_io.cli.bound import assumption_text
from solar_io.format.yamltext import emit
from solar_io.metrics import index_assumptions

V, D, S = 64, 8, 5
ROWS = S * D * 4  # bytes of the rows read, ids taken as distinct


def hand_written(with_assumption: bool = False):
    doc = {
        "format": "solar-io.einsum-graph", "version": "1.5", "name": "embed",
        "producer": {"tool": "solar-io", "tool_version": "0.1.0", "frontend": "hand-written"},
        "ranks": {"V": V, "D": D, "S": S},
        "tensors": [{"name": "w", "ranks": ["V", "D"], "dtype": "fp32", "role": "weight"},
                    {"name": "ids", "ranks": ["S"], "dtype": "int64", "role": "input"},
                    {"name": "y", "ranks": ["S", "D"], "dtype": "fp32", "role": "output"}],
        "nodes": [{"name": "embed", "kind": "data_movement", "op": "aten.embedding", "movement": "copy",
                   "space": ["S", "D"], "inputs": ["w[@ids, D]", "ids[S]"], "output": "y[S, D]"}],
        "validation": {"status": "skipped", "method": "none"}}
    if with_assumption:
        doc["assumptions"] = [{"kind": "gather_indices", "subject": "gather", "detail": "as derived",
                               "values": {"nodes": ["embed"], "index_tensors": ["ids"]}}]
    return loads(emit(doc))


def test_a_gather_through_input_ids_counts_distinct_rows_and_says_so():
    g = hand_written()
    assert graph_metrics(g).boundary_bytes == ROWS + S * 8 + ROWS  # rows read, ids, y written
    (a,) = index_assumptions(g)
    assert a.kind == "gather_indices" and dict(a.values) == {"nodes": ("embed",), "index_tensors": ("ids",)}
    # a hand-written file without it: the report derives and prints it, marked as not in the file
    text = assumption_text(g)
    assert "gather_indices (derived from the graph, not in the file): gather: each index of a gather reads a " \
           "distinct row" in text and "index_tensors=[ids]" in text
    assert "derived from the graph" not in assumption_text(hand_written(with_assumption=True))


def test_torch_embedding_capture_writes_the_assumption_into_the_file():
    torch = pytest.importorskip("torch")
    from solar_io.frontends.torch.capture import capture_source
    from solar_io.frontends.torch.loader import Source

    emb = torch.nn.Embedding(V, D)
    src = Source(Path("embed.py"), "embed.py", "0" * 64, lambda: emb, lambda: [torch.randint(0, V, (S,))])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = capture_source(src, validate=True).graph
    assert g.validation.status == "passed"
    (a,) = [a for a in g.assumptions if a.kind == "gather_indices"]
    (ids,) = [t.name for t in g.tensors if t.role == "input"]
    assert dict(a.values)["index_tensors"] == (ids,) and len(dict(a.values)["nodes"]) == 1
    assert "derived from the graph" not in assumption_text(g)


def test_jax_take_capture_writes_the_assumption_and_a_one_index_gather_needs_none():
    pytest.importorskip("jax")
    import jax.numpy as jnp
    import numpy as np

    from solar_io.frontends.jax import capture_function

    w = jnp.asarray(np.random.default_rng(0).standard_normal((V, D)), jnp.float32)

    def take(ids):  # noqa: ANN001, ANN202
        return jnp.take(w, ids, axis=0) * 2.0

    g = capture_function(take, jnp.asarray([3, 1, 4, 1, 5], jnp.int32)).graph
    assert g.validation.status == "passed"
    assert [a.kind for a in g.assumptions].count("gather_indices") == 1
    one = capture_function(take, jnp.asarray([3], jnp.int32)).graph  # one index names one row: exact
    assert "gather_indices" not in [a.kind for a in one.assumptions]
