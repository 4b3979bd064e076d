"""Golden files of every released format version: they must load, and re-dump byte for byte, forever.

``tests/golden/vMAJOR.MINOR/`` holds small complete graphs written in that version. A change that
breaks one of them breaks users' archived files: it needs a new major version and a migration
(``solar-io migrate``), not an edit of the golden file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

import solar_io
from solar_io import dtypes, ops
from solar_io.codec import VALIDATION_KEYS
from solar_io.graph import KINDS, MOVEMENTS, ROLES, VALIDATION_STATUS

ROOT = Path(__file__).resolve().parents[1]
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
    assert {n["kind"] for n in nodes} == set(KINDS)
    assert {n["movement"] for n in moves} == set(MOVEMENTS)
    assert {n["map"] for n in einsums} >= set(V1_0_MAP_OPS)
    assert {n["reduce"] for n in einsums} >= set(V1_0_REDUCE_OPS)
    assert {v["status"] for v in validations} == set(VALIDATION_STATUS)
    assert any(set(v) == set(VALIDATION_KEYS) and v["status"] == "passed" for v in validations)
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
