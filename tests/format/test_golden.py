"""Golden files of every released format version: they must load, and re-dump byte for byte, forever.

``tests/golden/vMAJOR.MINOR/`` holds small complete graphs written in that version. A change that
breaks one of them breaks users' archived files: it needs a new major version and a migration
(``solar-io migrate``), not an edit of the golden file.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator
from paths import ROOT

import solar_io
from solar_io import dtypes, ops
from solar_io.format.codec import VALIDATION_KEYS
from solar_io.format.encode import encode
from solar_io.format.yamltext import parse
from solar_io.graph import KINDS, MOVEMENTS, ROLES, VALIDATION_STATUS

GOLDEN = ROOT / "tests" / "golden"
FILES = sorted(GOLDEN.rglob("*.yaml"))
SCHEMA = json.loads((ROOT / "schema" / "einsum-graph-v1.schema.json").read_text(encoding="utf-8"))

# The vocabulary of format v1.0, frozen: the v1.0 golden files cover all of it, and a reader must keep
# every name (removing one breaks archived files).
V1_0_DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp6_e2m3", "fp6_e3m2",
               "fp4_e2m1", "mxfp8", "mxfp4", "nvfp4", "int64", "int32", "int16", "int8", "int4", "uint8", "bool")
V1_0_MAP_OPS = ("identity", "add", "sub", "mul", "div", "max", "min", "pow", "neg", "abs", "square", "relu",
                "sign", "floor", "ceil", "round", "exp", "log", "sqrt", "rsqrt", "reciprocal", "tanh", "sin",
                "cos", "erf", "sigmoid", "silu", "gelu", "gelu_tanh", "where", "eq", "ne", "lt", "le", "gt", "ge",
                "and", "or", "not")
V1_0_REDUCE_OPS = ("none", "add", "mul", "max", "min", "argmax", "argmin")
V1_0_VALIDATION_KEYS = ("status", "method", "reference", "seed", "rtol", "atol", "max_abs_error", "max_rel_error",
                        "reduced_ranks", "reason")
# What 1.1 added, frozen likewise.
V1_1_MAP_OPS = ("tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "atan2", "erfc", "erfinv",
                "log1p", "expm1", "log2", "log10", "exp2", "trunc", "fmod", "remainder")
V1_1_NODE_FIELDS = ("scan", "init")
V1_1_VALIDATION_KEYS = ("model", "attempts")
# What 1.2 added, frozen likewise.
V1_2_VALIDATION_KEYS = ("unchecked",)
V1_2_PRODUCER_KEYS = ("workload",)
V1_2_TENSOR_KEYS = ("generated",)
# What 1.3 added, frozen likewise.
V1_3_NODE_FIELDS = ("kernel", "phase")
V1_3_TOP_KEYS = ("assumptions",)
# What 1.5 added, frozen likewise.
V1_5_TENSOR_KEYS = ("updates",)
# What 1.6 added, frozen likewise.
V1_6_NODE_FIELDS = ("live",)
# What 1.7 added, frozen likewise: the node kind 'fft' and its field.
V1_7_NODE_FIELDS = ("fft",)
# What 1.8 added, frozen likewise.
V1_8_TENSOR_KEYS = ("prefilled",)
V1_0_KINDS = ("einsum", "data_movement", "opaque")


def _id(p: Path) -> str:
    return str(p.relative_to(GOLDEN))


def test_golden_files_exist_for_v1_0():
    assert len([p for p in FILES if p.parent.name == "v1.0"]) >= 5


@pytest.mark.parametrize("path", FILES, ids=_id)
def test_golden_file_loads_validates_and_round_trips(path: Path):
    text = path.read_text(encoding="utf-8")
    g, issues = solar_io.check_text(text, str(path))
    assert g is not None and issues == [], [i.format() for i in issues]
    assert solar_io.load(path) == g
    assert solar_io.dumps(g) == text
    assert solar_io.loads(solar_io.dumps(g)) == g
    assert parse(text) == encode(g)  # what checked_dumps checks instead of the text: the document it is emitted from


@pytest.mark.parametrize("path", FILES, ids=_id)
def test_golden_file_matches_its_directory_and_the_schema(path: Path):
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert path.parent.name == f"v{doc['version']}"
    if doc["version"].split(".")[0] == "1":
        Draft202012Validator(SCHEMA).validate(doc)


def _v1_0_documents() -> list[dict]:
    return [yaml.safe_load(p.read_text(encoding="utf-8")) for p in FILES if p.parent.name == "v1.0"]


def test_v1_0_vocabulary_is_still_known():
    assert set(V1_0_DTYPES) <= set(dtypes.DTYPES)
    assert set(V1_0_MAP_OPS) <= set(ops.MAP_OPS)
    assert set(V1_0_REDUCE_OPS) <= set(ops.REDUCE_OPS)
    assert {d.name: d.bits for d in dtypes.DTYPES.values() if d.name in V1_0_DTYPES} == {
        "fp64": 64, "fp32": 32, "tf32": 32, "bf16": 16, "fp16": 16, "fp8_e4m3": 8, "fp8_e5m2": 8, "fp6_e2m3": 6,
        "fp6_e3m2": 6, "fp4_e2m1": 4, "mxfp8": 8.25, "mxfp4": 4.25, "nvfp4": 4.5, "int64": 64, "int32": 32,
        "int16": 16, "int8": 8, "int4": 4, "uint8": 8, "bool": 8}


def test_v1_0_golden_files_cover_the_format():
    docs = _v1_0_documents()
    tensors = [t for d in docs for t in d["tensors"]]
    nodes = [n for d in docs for n in d["nodes"]]
    validations = [d["validation"] for d in docs]
    einsums = [n for n in nodes if n["kind"] == "einsum"]
    moves = [n for n in nodes if n["kind"] == "data_movement"]
    accesses = [a for n in nodes for a in n["inputs"] + [n.get("output", "")] + n.get("outputs", [])]

    assert {t["dtype"] for t in tensors} >= set(V1_0_DTYPES)
    assert {t["role"] for t in tensors} == set(ROLES)
    assert {n["kind"] for n in nodes} == set(V1_0_KINDS) <= set(KINDS)
    assert {n["movement"] for n in moves} == set(MOVEMENTS)
    assert {n["map"] for n in einsums} >= set(V1_0_MAP_OPS)
    assert {n["reduce"] for n in einsums} >= set(V1_0_REDUCE_OPS)
    assert {v["status"] for v in validations} == set(VALIDATION_STATUS)
    assert any(set(v) == set(V1_0_VALIDATION_KEYS) and v["status"] == "passed" for v in validations)
    assert any(d["producer"].keys() >= {"frontend_version", "source", "source_sha256"} for d in docs)
    assert any("density" in t for t in tensors)
    assert any("value" in t for t in tensors) and any(t["role"] == "constant" and "value" not in t for t in tensors)
    assert any(t["ranks"] == [] for t in tensors)
    assert any("pad" in n for n in einsums) and any("pad" in n for n in moves)
    assert {n["fill"] for n in nodes if "fill" in n} >= {0.0, float("-inf")}
    assert any(n.get("view") and n["movement"] == "reshape" for n in moves)
    assert any(n.get("view") and n["movement"] == "copy" for n in moves)
    assert any("@" in a for a in accesses)
    assert any("*" in a for a in accesses) and any("[]" in a for a in accesses)
    assert any("attrs" in n for n in nodes) and any("location" in n for n in nodes)
    assert any(len(n.get("outputs", [])) > 1 for n in nodes)


def test_golden_files_exist_for_v1_1():
    assert [p for p in FILES if p.parent.name == "v1.1"]


def test_v1_1_additions_are_known_and_covered_by_its_golden_files():
    assert set(V1_0_VALIDATION_KEYS) | set(V1_1_VALIDATION_KEYS) | set(V1_2_VALIDATION_KEYS) == set(VALIDATION_KEYS)
    assert set(V1_0_MAP_OPS) | set(V1_1_MAP_OPS) <= set(ops.MAP_OPS)
    assert {m.name for m in ops.MAP_OPS.values() if m.since == (1, 1)} == set(V1_1_MAP_OPS)
    docs = [yaml.safe_load(p.read_text(encoding="utf-8")) for p in FILES if p.parent.name == "v1.1"]
    nodes = [n for d in docs for n in d["nodes"]]
    assert {n["map"] for n in nodes if n["kind"] == "einsum"} >= set(V1_1_MAP_OPS)
    assert {n["reduce"] for n in nodes if "scan" in n} >= {"add", "max"}
    assert {n["reduce"] for n in nodes if "init" in n} >= {"add", "none"}
    assert any("@" in n["output"] for n in nodes if "init" in n)
    assert all(any(k in d["validation"] for d in docs) for k in V1_1_VALIDATION_KEYS)


def test_v1_2_additions_are_known_and_covered_by_its_golden_files():
    from solar_io.format.codec import PRODUCER_KEYS, TENSOR_KEYS
    from solar_io.format.versioning import SINCE

    assert {k for (_, k), v in SINCE.items() if v == (1, 2)} == set(
        V1_2_VALIDATION_KEYS + V1_2_PRODUCER_KEYS + V1_2_TENSOR_KEYS)
    assert set(V1_2_PRODUCER_KEYS) <= set(PRODUCER_KEYS) and set(V1_2_TENSOR_KEYS) <= set(TENSOR_KEYS)
    docs = [yaml.safe_load(p.read_text(encoding="utf-8")) for p in FILES if p.parent.name == "v1.2"]
    assert all(any(k in d["validation"] for d in docs) for k in V1_2_VALIDATION_KEYS)
    assert all(any(k in d["producer"] for d in docs) for k in V1_2_PRODUCER_KEYS)
    assert all(any(k in t for d in docs for t in d["tensors"]) for k in V1_2_TENSOR_KEYS)


@pytest.mark.parametrize("record, field", [("validation", "unchecked"), ("producer", "workload"),
                                           ("tensors", "generated")])
@pytest.mark.parametrize("old", ["1.0", "1.1"])
def test_a_1_0_or_1_1_file_cannot_use_what_1_2_added(record: str, field: str, old: str):
    """Decoder and schema both refuse a 1.2 field in an older file, naming the field and the version."""
    from solar_io.errors import GraphError
    from solar_io.format.codec import decode

    docs = [yaml.safe_load(p.read_text(encoding="utf-8")) for p in FILES if p.parent.name == "v1.2"]
    doc = next(d for d in docs if (any(field in t for t in d["tensors"]) if record == "tensors"
                                   else field in d[record]))
    assert Draft202012Validator(SCHEMA).is_valid(doc)
    doc["version"] = old
    for key in V1_2_VALIDATION_KEYS:  # strip what 1.2 added, except the field under test
        if (record, field) != ("validation", key):
            doc["validation"].pop(key, None)
    if (record, field) != ("producer", "workload"):
        doc["producer"].pop("workload", None)
    if record != "tensors":
        for t in doc["tensors"]:
            t.pop("generated", None)
    assert not Draft202012Validator(SCHEMA).is_valid(doc)
    with pytest.raises(GraphError, match=f"{field}.*new in format 1.2; this file says version {old}"):
        decode(doc)


def test_generated_constants_move_no_bytes():
    """The 1.2 golden causal attention / tril / arange graph: its generated constants (mask, arange)
    cross no DRAM boundary; the boundary is q, k, v, x and the three outputs, counted by hand."""
    g = solar_io.load(GOLDEN / "v1.2" / "generated_constants.yaml")
    assert {t.name for t in g.tensors if t.generated} == {
        "scaled_dot_product_attention.causal_mask", "tril.mask", "arange.arange"}
    m = solar_io.graph_metrics(g)
    hand = 3 * 48 * 4 + 48 * 4 + 25 * 4 + 25 * 4 + 6 * 8  # q, k, v; attention out; x; tril out; arange * 2
    assert m.boundary_bytes == hand
    r = solar_io.bound(g, "h100-pcie", residency=False)
    assert r.fused.bytes == hand


@pytest.mark.parametrize("path", [p for p in FILES if p.parent.name == "v1.0"], ids=_id)
def test_v1_0_file_keeps_its_version_and_migrates_to_the_current_one(path: Path):
    """A 1.0 file loads as 1.0 and dumps unchanged; migrating only changes the version line."""
    from solar_io.format.codec import decode
    from solar_io.format.versioning import migrate

    text = path.read_text(encoding="utf-8")
    g = solar_io.loads(text)
    assert g.version == "1.0" and solar_io.dumps(g) == text
    new = migrate(yaml.safe_load(text))
    assert new["version"] == solar_io.FORMAT_VERSION
    g2, issues = decode(new)
    assert issues == [] and g2.version == solar_io.FORMAT_VERSION
    # 1.3 declares each multi-node kernel (nodes of one source-op call) that 1.0 read from name prefixes
    kernel_lines = [ln for ln in solar_io.dumps(g2).splitlines() if ln.lstrip().startswith("kernel:")]
    assert len(kernel_lines) == sum(n.kernel is not None for n in g.nodes)
    undeclared = "\n".join(ln for ln in solar_io.dumps(g2).splitlines() if not ln.lstrip().startswith("kernel:"))
    assert undeclared + "\n" == text.replace('version: "1.0"', f'version: "{solar_io.FORMAT_VERSION}"', 1)


@pytest.mark.parametrize("field, value, where", [
    ("scan", "S", "nodes"), ("init", "table", "nodes"), ("map", "atan2", "nodes"),
    ("model", "claude-sonnet-4-5", "validation"), ("attempts", 2, "validation"),
])
def test_a_1_0_file_cannot_use_what_1_1_added(field: str, value: object, where: str):
    """Decoder and schema both refuse a 1.1 field in a file that says 1.0, naming the field and the version."""
    from solar_io.errors import GraphError
    from solar_io.format.codec import decode

    doc = yaml.safe_load((GOLDEN / "v1.1" / "scans_scatters_maps.yaml").read_text(encoding="utf-8"))
    assert Draft202012Validator(SCHEMA).is_valid(doc)
    doc["version"] = "1.0"
    for key in ("scan", "init", "model", "attempts"):  # strip what 1.1 added, except the field under test
        for rec in doc["nodes"] + [doc["validation"]]:
            rec.pop(key, None)
    doc["nodes"] = [n for n in doc["nodes"] if n.get("map") in V1_0_MAP_OPS and "@" not in n["output"]]
    doc["tensors"] = [t for t in doc["tensors"] if t["role"] != "output" or t["name"] in
                      {n["output"].split("[")[0] for n in doc["nodes"]}]
    assert Draft202012Validator(SCHEMA).is_valid(doc)
    decode(doc)
    target = doc["validation"] if where == "validation" else doc["nodes"][0]
    target[field] = value
    assert not Draft202012Validator(SCHEMA).is_valid(doc)
    with pytest.raises(GraphError, match=f"{field}.*new in format 1.1; this file says version 1.0"):
        decode(doc)


def test_a_graph_built_in_code_as_1_0_cannot_use_a_scatter_output():
    """The @ index in an output is a use, not a field: validation refuses it in a 1.0 graph."""
    import dataclasses

    g = solar_io.load(GOLDEN / "v1.1" / "scans_scatters_maps.yaml")
    errors = [i.message for i in solar_io.validate(dataclasses.replace(g, version="1.0")) if i.severity == "error"]
    assert any("an @ index in an output is new in format 1.1" in m for m in errors)
    assert any("field 'scan' is new in format 1.1" in m for m in errors)
    assert any("map op 'erfinv' is new in format 1.1" in m for m in errors)
    assert any("field 'model' is new in format 1.1" in m for m in errors)


def test_every_backend_reads_the_1_1_golden_graph():
    """Roofline (unfused, fused, cache-aware) bounds a graph with scans and scatters; the tiling
    model charges those nodes their unfused bytes; exporters skip them, naming each node and why."""
    from solar_io.exporters.accelforge import export_accelforge
    from solar_io.exporters.timeloop import export_timeloop

    g = solar_io.load(GOLDEN / "v1.1" / "scans_scatters_maps.yaml")
    m = solar_io.graph_metrics(g)
    special = {n.name for n in g.nodes if n.scan is not None or n.init is not None}
    r = solar_io.bound(g, "h100-pcie", cache_aware=True, capacity=256)
    assert r.fused.time <= r.cache_aware.time * (1 + 1e-12) and r.fused.time <= r.unfused.time
    assert r.totals.bytes == m.bytes and not m.opaque
    by_node = {n.name: n for n in m.nodes}
    untiled = {gr.nodes[0]: gr for gr in r.cache.groups if set(gr.nodes) & special}
    assert set(untiled) == special
    for name, gr in untiled.items():  # one node each, charged what the node moves unfused
        assert gr.nodes == (name,) and gr.kind == "untiled" and gr.traffic + gr.resident == by_node[name].bytes
    for export in (export_timeloop, export_accelforge):
        skipped = {s.node: s.reason for s in export(g, "g").skipped}
        assert special <= set(skipped)
        assert all(("scan along S" in skipped[n]) if g.node_map[n].scan else ("indirect index @idx" in skipped[n])
                   for n in special)


def test_v1_3_additions_are_known_and_covered_by_its_golden_files():
    from solar_io.format.codec import COMMON_NODE, TOP_KEYS
    from solar_io.format.versioning import SINCE
    from solar_io.graph import PHASES

    assert {k for (_, k), v in SINCE.items() if v == (1, 3)} == set(V1_3_NODE_FIELDS + V1_3_TOP_KEYS)
    assert set(V1_3_NODE_FIELDS) <= COMMON_NODE and set(V1_3_TOP_KEYS) <= set(TOP_KEYS)
    docs = [yaml.safe_load(p.read_text(encoding="utf-8")) for p in FILES if p.parent.name == "v1.3"]
    assert all(any(k in n for d in docs for n in d["nodes"]) for k in V1_3_NODE_FIELDS)
    assert all(any(k in d for d in docs) for k in V1_3_TOP_KEYS)
    assert {n["phase"] for d in docs for n in d["nodes"] if "phase" in n} == set(PHASES)


@pytest.mark.parametrize("field", ["kernel", "phase", "assumptions"])
@pytest.mark.parametrize("old", ["1.0", "1.2"])
def test_a_file_before_1_3_cannot_use_what_1_3_added(field: str, old: str):
    """Decoder and schema both refuse a 1.3 field in an older file, naming the field and the version."""
    from solar_io.errors import GraphError
    from solar_io.format.codec import decode

    doc = yaml.safe_load((GOLDEN / "v1.3" / "training_kernels_assumptions.yaml").read_text(encoding="utf-8"))
    assert Draft202012Validator(SCHEMA).is_valid(doc)
    doc["version"] = old
    if field != "assumptions":
        doc.pop("assumptions")
    for n in doc["nodes"]:
        for k in V1_3_NODE_FIELDS:
            if k != field:
                n.pop(k, None)
    assert not Draft202012Validator(SCHEMA).is_valid(doc)
    with pytest.raises(GraphError, match=f"{field}.*new in format 1.3; this file says version {old}"):
        decode(doc)


def test_declared_kernels_decide_the_unfused_kernels():
    """The 1.3 golden's two declared kernels (softmax: 5 nodes, sgd: 2 nodes) are its only multi-node
    kernels; renaming the nodes (no shared name prefix left) changes nothing, since 1.3 reads the
    declaration; a kernel whose nodes are split apart is a validation error naming it."""
    import dataclasses

    from solar_io.format.kernels import kernel_spans, split_kernels

    g = solar_io.load(GOLDEN / "v1.3" / "training_kernels_assumptions.yaml")
    assert [(g.nodes[i].name, j - i + 1) for i, j in kernel_spans(g.nodes) if j > i] == [("softmax.max", 5),
                                                                                      ("sgd.scale", 2)]
    renamed = dataclasses.replace(g, nodes=tuple(dataclasses.replace(n, name=f"n{i}") for i, n in enumerate(g.nodes)))
    assert kernel_spans(renamed.nodes) == kernel_spans(g.nodes)
    apart = g.nodes[:2] + g.nodes[6:7] + g.nodes[2:6] + g.nodes[7:]  # the softmax kernel split by another node
    assert split_kernels(apart) == ["softmax"]
    issues = solar_io.validate(dataclasses.replace(g, nodes=apart))
    assert any("kernel 'softmax'" in i.message and "consecutive" in i.message for i in issues)
    assert g.assumptions[1].values == (("tokens_per_expert", (3, 1)),)


def test_the_prefix_rule_keeps_runs_apart_that_share_a_prefix():
    """Two runs of one call prefix with another node between them are two kernels under the 1.2 rule;
    declaring them gives the second its own id (``CALL#2``), so a migrated file stays valid."""
    from solar_io.affine import parse_access
    from solar_io.format.kernels import declare_kernels, declare_kernels_doc, kernel_spans
    from solar_io.graph import Node

    def node(name: str, op: str) -> Node:
        return Node(name, "einsum", op, (parse_access("x[i]"),), (parse_access(f"{name}[i]"),), space=("i",),
                    map="identity", reduce="none")

    nodes = [node("cell.a", "lstm"), node("cell.b", "lstm"), node("mid", "add"), node("cell.c", "lstm"),
             node("cell", "lstm")]
    declared = declare_kernels(nodes)
    assert [n.kernel for n in declared] == ["cell", "cell", None, "cell#2", "cell#2"]
    assert kernel_spans(declared) == [(0, 1), (2, 2), (3, 4)]
    docs = declare_kernels_doc([{"name": n.name, "op": n.op} for n in nodes])
    assert [d.get("kernel") for d in docs] == ["cell", "cell", None, "cell#2", "cell#2"]


def test_v1_5_additions_are_known_and_covered_by_its_golden_files():
    from solar_io.format.codec import TENSOR_KEYS
    from solar_io.format.versioning import SINCE

    assert {k for (_, k), v in SINCE.items() if v == (1, 5)} == set(V1_5_TENSOR_KEYS) <= set(TENSOR_KEYS)
    docs = [yaml.safe_load(p.read_text(encoding="utf-8")) for p in FILES if p.parent.name == "v1.5"]
    assert all(any(k in t for d in docs for t in d["tensors"]) for k in V1_5_TENSOR_KEYS)


@pytest.mark.parametrize("golden, field, since, old", [
    ("v1.5/in_place_update.yaml", "updates", "1.5", "1.0"), ("v1.5/in_place_update.yaml", "updates", "1.5", "1.4"),
    ("v1.6/live_work.yaml", "live", "1.6", "1.3"), ("v1.6/live_work.yaml", "live", "1.6", "1.5"),
    ("v1.7/fft_round_trip.yaml", "fft", "1.7", "1.6"),
    ("v1.8/prefilled_scatter.yaml", "prefilled", "1.8", "1.7")])
def test_a_file_older_than_a_field_cannot_use_it(golden: str, field: str, since: str, old: str):
    """Decoder and schema both refuse 'updates' (1.5), 'live' (1.6), 'fft' (1.7) and 'prefilled' (1.8) in an older
    file, naming
    the field and the version."""
    from solar_io.errors import GraphError
    from solar_io.format.codec import decode

    doc = yaml.safe_load((GOLDEN / golden).read_text(encoding="utf-8"))
    assert Draft202012Validator(SCHEMA).is_valid(doc)
    doc["version"] = old
    assert not Draft202012Validator(SCHEMA).is_valid(doc)
    with pytest.raises(GraphError, match=f"{field}.*new in format {since}; this file says version {old}"):
        decode(doc)


def test_in_place_update_moves_only_the_written_rows():
    """The 1.5 golden: ``cache[:, pos] = k`` returned (``updates: cache``) and ``values.index_copy(1, pos, v)``
    returned as a new tensor. By hand (fp32, pos int64[2]): the in-place output writes its 2 x 2 x 4
    selected elements (64 B) and reads none of cache; the new one writes all 2 x 8 x 4 (256 B) and copies
    the 48 elements it does not overwrite from values (192 B); k, v 64 B each, pos 16 B once."""
    g = solar_io.load(GOLDEN / "v1.5" / "in_place_update.yaml")
    assert {t.name: t.updates for t in g.tensors if t.role == "output"} == {"index_put_": "cache",
                                                                           "index_copy": None}
    m = solar_io.graph_metrics(g)
    assert m.boundary_bytes == 64 + 64 + 16 + (64 + 192 + 256)
    assert m.macs == 0
    r = solar_io.bound(g, "h100-pcie", residency=False)
    assert r.fused.bytes == m.boundary_bytes and r.unfused.bytes == (64 + 16 + 64) + (192 + 64 + 16 + 256)
    assert [n for n in r.notes if n.startswith("in place: output index_put_ is input cache")]
    functional = dataclasses.replace(g, tensors=tuple(dataclasses.replace(t, updates=None) for t in g.tensors))
    assert solar_io.graph_metrics(functional).boundary_bytes == 2 * (64 + 192 + 256) + 16
    assert not [n for n in solar_io.bound(functional, "h100-pcie").notes if n.startswith("in place")]


def test_v1_6_additions_are_known_and_covered_by_its_golden_files():
    from solar_io.format.versioning import SINCE

    assert {k for (_, k), v in SINCE.items() if v == (1, 6)} == set(V1_6_NODE_FIELDS)
    docs = [yaml.safe_load(p.read_text(encoding="utf-8")) for p in FILES if p.parent.name == "v1.6"]
    assert all(any(k in n for d in docs for n in d["nodes"]) for k in V1_6_NODE_FIELDS)


def test_live_work_counts_the_used_rows_only():
    """The 1.6 golden: ``y = (x @ w)[2:5]`` with x 8 x 4 and w 4 x 2 fp32, the product ``live: {M: 3}``.
    By hand: 3 x 2 x 4 = 24 MACs; x's 3 used rows (48 B), w (32 B) and y (24 B) cross the boundary."""
    g = solar_io.load(GOLDEN / "v1.6" / "live_work.yaml")
    m = solar_io.graph_metrics(g)
    assert (m.macs, m.boundary_bytes) == (24, 48 + 32 + 24)
    whole = dataclasses.replace(g, nodes=tuple(dataclasses.replace(n, live=()) for n in g.nodes))
    assert (solar_io.graph_metrics(whole).macs, solar_io.graph_metrics(whole).boundary_bytes) == (64, 128 + 32 + 24)


def test_v1_7_additions_are_known_and_covered_by_its_golden_files():
    from solar_io.format.versioning import SINCE

    assert {k for (_, k), v in SINCE.items() if v == (1, 7)} == set(V1_7_NODE_FIELDS)
    docs = [yaml.safe_load(p.read_text(encoding="utf-8")) for p in FILES if p.parent.name == "v1.7"]
    nodes = [n for d in docs for n in d["nodes"]]
    assert all(any(k in n for n in nodes) for k in V1_7_NODE_FIELDS)
    assert {n["kind"] for n in nodes} == {"fft"} and {n["fft"]["type"] for n in nodes} >= {"r2c", "c2r"}


def test_fft_round_trip_counts_and_values():
    """The 1.7 golden: rfft of x (2 x 8 fp32) then irfft back, both fft nodes. By hand: the spectrum is
    2 x 5 complex (80 B), x and y 64 B each; the floor is the zero-frequency sums, 7 additions per r2c row
    and 4 per c2r row (5 stored values), 2 rows each; and running it gives x back."""
    import numpy as np

    g = solar_io.load(GOLDEN / "v1.7" / "fft_round_trip.yaml")
    m = solar_io.graph_metrics(g)
    assert (m.macs, m.flops_matrix, m.flops_vector) == (0, 0, 2 * 7 + 2 * 4)
    assert m.boundary_bytes == 64 + 80 + 64
    x = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)
    out = solar_io.execute(g, {"x": x})
    np.testing.assert_allclose(out["y"], x, atol=1e-5)
    np.testing.assert_allclose(out["s"][:, 0, 0], x.sum(axis=1), rtol=1e-5)
    assert not solar_io.bound(g, "b200", cache_aware=False).opaque


def test_v1_8_additions_are_known_and_covered_by_its_golden_files():
    from solar_io.format.codec import TENSOR_KEYS
    from solar_io.format.versioning import SINCE

    assert {k for (_, k), v in SINCE.items() if v == (1, 8)} == set(V1_8_TENSOR_KEYS) <= set(TENSOR_KEYS)
    docs = [yaml.safe_load(p.read_text(encoding="utf-8")) for p in FILES if p.parent.name == "v1.8"]
    assert all(any(k in t for d in docs for t in d["tensors"]) for k in V1_8_TENSOR_KEYS)


def test_prefilled_output_writes_only_the_scattered_rows():
    """The 1.8 golden: an embedding gradient, ``zeros(16, 4)`` fp32, ``index_add_`` of 3 bf16 rows cast up,
    cast back to bf16 and returned into memory the caller hands in zeroed (``prefilled: 0.0``). By hand: the
    3 scattered rows of the output (3 x 4 bf16, 24 B) are written, not all 16 (128 B); grad (24 B) and ids
    (3 int64, 24 B) are read; the fill is an immediate. Without the field the output is written whole."""
    g = solar_io.load(GOLDEN / "v1.8" / "prefilled_scatter.yaml")
    assert {t.name: t.prefilled for t in g.tensors if t.role == "output"} == {"to_1": 0.0}
    assert solar_io.graph_metrics(g).boundary_bytes == 24 + 24 + 24
    r = solar_io.bound(g, "h100-pcie")
    assert r.fused.bytes == 72
    assert [n for n in r.notes if n.startswith("prefilled: output to_1 arrives holding 0")]
    fresh = dataclasses.replace(g, tensors=tuple(dataclasses.replace(t, prefilled=None) for t in g.tensors))
    assert solar_io.graph_metrics(fresh).boundary_bytes == 24 + 24 + 128
    assert not [n for n in solar_io.bound(fresh, "h100-pcie").notes if n.startswith("prefilled")]
