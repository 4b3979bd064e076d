"""The JSON schema of the einsum-graph format agrees with the reader.

``solar_io.format.codec.decode`` is the reference for the document's structure. The schema must accept
exactly the documents it accepts (semantic checks of ``solar_io.format.validate`` are out of scope, except
the per-movement field rules that the schema states as well, which ``validate`` enforces).

JSON has no integer/float distinction, YAML has: a YAML document is validated here with an
``integer`` type that excludes floats (``YAML_VALIDATOR``). See "Limits of JSON Schema" in
schema/README.md for the gaps of a standard validator, pinned down in ``test_known_gaps``.
"""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, validators
from paths import ROOT

import solar_io
from solar_io import dtypes, graph, ops
from solar_io.affine import parse_access
from solar_io.errors import GraphError
from solar_io.format import codec

SCHEMA_PATH = ROOT / "schema" / "einsum-graph-v1.schema.json"
README_PATH = ROOT / "schema" / "README.md"
SCHEMA = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
DEFS = SCHEMA["$defs"]
GRAPH_FILES = sorted((ROOT / "examples" / "graphs").glob("*.yaml")) + sorted(
    (ROOT / "tests" / "golden").rglob("*.yaml"))


def _yaml_integer(checker, instance) -> bool:  # noqa: ANN001
    return isinstance(instance, int) and not isinstance(instance, bool)


YamlValidator = validators.extend(
    Draft202012Validator,
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _yaml_integer),
)
YAML_VALIDATOR = YamlValidator(SCHEMA)
STANDARD_VALIDATOR = Draft202012Validator(SCHEMA)


def schema_ok(doc: object) -> bool:
    return YAML_VALIDATOR.is_valid(doc)


def decode_result(doc: object) -> tuple[bool, list]:
    """(accepted, warnings) of the structural decoder; any exception but GraphError propagates."""
    try:
        _, issues = codec.decode(doc)
    except GraphError:
        return False, []
    return True, [i for i in issues if i.severity == "warning"]


def decode_ok(doc: object) -> bool:
    return decode_result(doc)[0]


def semantic_errors(doc: object) -> list:
    g, _ = codec.decode(doc)
    return [i for i in solar_io.validate(g) if i.severity == "error"]


def load_doc(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


MATMUL = load_doc(ROOT / "examples" / "graphs" / "matmul.yaml")
GOLDEN = ROOT / "tests" / "golden" / "v1.0"
DATA_MOVEMENT = load_doc(GOLDEN / "data_movement.yaml")
OPAQUE = load_doc(GOLDEN / "opaque_sparse.yaml")
CONV = load_doc(GOLDEN / "conv_pool.yaml")
ATTENTION = load_doc(GOLDEN / "attention_softmax.yaml")
BASES = {"matmul": MATMUL, "dm": DATA_MOVEMENT, "opaque": OPAQUE, "conv": CONV}


def node_index(doc: dict, name: str) -> int:
    return next(i for i, n in enumerate(doc["nodes"]) if n["name"] == name)


# indices of the nodes the corpus below mutates
EMBED, RESHAPE, SLICE, PADCOPY, CONCAT = (node_index(DATA_MOVEMENT, n)
                                          for n in ("embed", "split_heads", "slice", "pad", "cat"))
SORT = node_index(OPAQUE, "sort")
CONVN = node_index(CONV, "conv")

DEL = object()


def mutate(base: dict, *changes: tuple) -> object:
    """A deep copy of ``base`` with each (path, value) set, or deleted when value is DEL."""
    doc: object = copy.deepcopy(base)
    for path, value in changes:
        if not path:
            doc = value
            continue
        parent = doc
        for step in path[:-1]:
            parent = parent[step]  # type: ignore[index]
        if value is DEL:
            del parent[path[-1]]  # type: ignore[union-attr]
        else:
            parent[path[-1]] = value  # type: ignore[index]
    return doc


# ---------------------------------------------------------------------------- the schema itself

def test_schema_is_a_valid_draft_2020_12_schema():
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert SCHEMA["$id"] and SCHEMA["title"] and SCHEMA["description"]


def _subschemas(node: object, path: str = "#"):
    """Every (path, schema dict) in the schema, skipping 'if' conditions (they only select)."""
    if isinstance(node, dict):
        yield path, node
        for k, v in node.items():
            if k == "if":
                continue
            if k in ("properties", "$defs", "dependentSchemas"):
                for name, sub in v.items():
                    yield from _subschemas(sub, f"{path}/{k}/{name}")
            elif k in ("allOf", "anyOf", "oneOf") and isinstance(v, list):
                for i, sub in enumerate(v):
                    yield from _subschemas(sub, f"{path}/{k}/{i}")
            elif isinstance(v, dict):
                yield from _subschemas(v, f"{path}/{k}")


def test_every_property_has_a_description():
    missing = []
    for path, sub in _subschemas(SCHEMA):
        for name, prop in sub.get("properties", {}).items():
            if not (isinstance(prop, dict) and prop.get("description")):
                missing.append(f"{path}/properties/{name}")
        extra = sub.get("additionalProperties")
        if isinstance(extra, dict) and not extra.get("description"):
            missing.append(f"{path}/additionalProperties")
    for name, d in DEFS.items():
        if not d.get("description"):
            missing.append(f"#/$defs/{name}")
    assert not missing, missing


def test_additional_properties_are_false_on_every_record():
    """Every object schema that lists fields forbids others (the node dispatcher lists all node fields)."""
    open_records = []
    for path, sub in _subschemas(SCHEMA):
        if sub.get("type") == "object" and "properties" in sub:
            if sub.get("additionalProperties") is not False and "propertyNames" not in sub:
                open_records.append(path)
    assert not open_records, open_records
    assert DEFS["node"]["propertyNames"]["enum"] == list(codec.NODE_KEYS)


# ---------------------------------------------------------------------------- enums and field lists

def test_enums_match_the_code():
    props = DEFS["tensor"]["properties"]
    assert props["dtype"]["enum"] == list(dtypes.DTYPES)
    assert props["role"]["enum"] == list(graph.ROLES)
    assert DEFS["node"]["properties"]["kind"]["enum"] == list(graph.KINDS)
    assert DEFS["dataMovementNode"]["properties"]["movement"]["enum"] == list(graph.MOVEMENTS)
    assert DEFS["einsumNode"]["properties"]["map"]["enum"] == list(ops.MAP_OPS)
    assert DEFS["einsumNode"]["properties"]["reduce"]["enum"] == list(ops.REDUCE_OPS)
    assert SCHEMA["properties"]["validation"]["properties"]["status"]["enum"] == list(graph.VALIDATION_STATUS)
    assert SCHEMA["properties"]["format"]["const"] == graph.FORMAT_NAME
    assert re.fullmatch(SCHEMA["properties"]["version"]["pattern"].strip("^$"), graph.FORMAT_VERSION)


def test_field_lists_match_the_code_in_canonical_order():
    assert tuple(SCHEMA["properties"]) == codec.TOP_KEYS
    assert tuple(SCHEMA["properties"]["producer"]["properties"]) == codec.PRODUCER_KEYS
    assert tuple(DEFS["tensor"]["properties"]) == codec.TENSOR_KEYS
    assert tuple(SCHEMA["properties"]["validation"]["properties"]) == codec.VALIDATION_KEYS
    for kind, ref in (("einsum", "einsumNode"), ("data_movement", "dataMovementNode"), ("opaque", "opaqueNode")):
        required, allowed = codec.KIND_FIELDS[kind]
        sub = DEFS[ref]
        assert set(sub["properties"]) == required | allowed | codec.COMMON_NODE, kind
        assert set(sub["required"]) == required | {"name", "kind", "op"}, kind
        assert [k for k in codec.NODE_KEYS if k in sub["properties"]] == list(sub["properties"]), kind
        assert sub["properties"]["kind"]["const"] == kind
    required = [k for k in codec.TOP_KEYS if k not in ("name", "assumptions")]
    assert SCHEMA["required"] == required


# ---------------------------------------------------------------------------- files in the repository

@pytest.mark.parametrize("path", GRAPH_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_graph_files_validate(path: Path):
    doc = load_doc(path)
    STANDARD_VALIDATOR.validate(doc)
    YAML_VALIDATOR.validate(doc)
    assert decode_result(doc) == (True, [])


def test_there_are_graph_files():
    assert any("golden" in str(p) for p in GRAPH_FILES) and any("examples" in str(p) for p in GRAPH_FILES)


def _readme_documents() -> list[str]:
    text = README_PATH.read_text(encoding="utf-8")
    blocks = re.findall(r"^```yaml\n(.*?)^```", text, flags=re.S | re.M)
    return [b for b in blocks if b.startswith("format:")]


README_DOCS = _readme_documents()


def test_readme_has_an_example_of_every_node_kind():
    docs = [yaml.safe_load(t) for t in README_DOCS]
    nodes = [n for d in docs for n in d["nodes"]]
    assert {n["kind"] for n in nodes} == set(graph.KINDS)
    assert {n["movement"] for n in nodes if n["kind"] == "data_movement"} == set(graph.MOVEMENTS)
    assert any("pad" in n and n["kind"] == "einsum" for n in nodes)
    assert any("@" in a for n in nodes for a in n["inputs"])
    assert any(n.get("view") for n in nodes)
    assert any("scan" in n for n in nodes) and any("init" in n and "@" in n["output"] for n in nodes)  # 1.1


@pytest.mark.parametrize("text", README_DOCS, ids=lambda t: yaml.safe_load(t)["name"])
def test_readme_examples_load_validate_and_are_canonical(text: str):
    g = solar_io.loads(text, "schema/README.md")
    YAML_VALIDATOR.validate(yaml.safe_load(text))
    assert solar_io.dumps(g) == text


def _table(text: str, header: str) -> list[list[str]]:
    """Rows of the markdown table whose header line starts with ``header``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        rows.append(cells)
    return rows


def test_readme_dtype_table_lists_every_dtype_with_its_width():
    rows = _table(README_PATH.read_text(encoding="utf-8"), "| dtype | bits |")
    table = {r[0].strip("`"): float(r[1]) for r in rows}
    assert table == {d.name: float(d.bits) for d in dtypes.DTYPES.values()}


def test_readme_op_tables_match_the_registries():
    text = README_PATH.read_text(encoding="utf-8")
    maps = {r[0].strip("`"): r[1:5] for r in _table(text, "| map | inputs |")}
    assert list(maps) == list(ops.MAP_OPS)
    for name, op in ops.MAP_OPS.items():
        arity = "2 or more" if op.arity is None else str(op.arity)
        result = "bool" if op.result == "bool" else "output dtype"
        assert maps[name] == [arity, str(op.vector), str(op.transcendental), result], name
    reduces = [r[0].strip("`") for r in _table(text, "| reduce | meaning |")]
    assert reduces == list(ops.REDUCE_OPS)


# ---------------------------------------------------------------------------- agreement with the decoder

SHA = "ab" * 32
V1_1 = (("version",), "1.1")
REJECTED = [
    ("pad key not a tensor name", "matmul", [(("nodes", 0, "pad"), {"A": {"M": [0, 2]}, 3: {}})]),
    ("pad rank not a rank name", "matmul", [(("nodes", 0, "pad"), {"A": {"M.x": [0, 2]}})]),
    ("reduced_ranks key not a rank name", "matmul", [(("validation", "reduced_ranks"), {"9x": 2})]),
    # the document and its header
    ("not a mapping: list", "matmul", [((), [])]),
    ("not a mapping: string", "matmul", [((), "format: x")]),
    ("not a mapping: null", "matmul", [((), None)]),
    ("missing format", "matmul", [(("format",), DEL)]),
    ("wrong format", "matmul", [(("format",), "solar-io.hardware")]),
    ("format not a string", "matmul", [(("format",), 1)]),
    ("missing version", "matmul", [(("version",), DEL)]),
    ("version as a float", "matmul", [(("version",), 1.0)]),
    ("version without minor", "matmul", [(("version",), "1")]),
    ("version newer major", "matmul", [(("version",), "2.0")]),
    ("version older major", "matmul", [(("version",), "0.9")]),
    ("version leading zero", "matmul", [(("version",), "1.01")]),
    ("version prefixed", "matmul", [(("version",), "v1.0")]),
    ("version three parts", "matmul", [(("version",), "1.0.0")]),
    ("version with space", "matmul", [(("version",), " 1.0")]),
    ("unknown top-level field", "matmul", [(("created",), "2024-01-01")]),
    ("name not a string", "matmul", [(("name",), 3)]),
    ("name null", "matmul", [(("name",), None)]),
    ("missing producer", "matmul", [(("producer",), DEL)]),
    ("producer null", "matmul", [(("producer",), None)]),
    ("producer a list", "matmul", [(("producer",), ["solar-io"])]),
    ("producer missing tool", "matmul", [(("producer", "tool"), DEL)]),
    ("producer missing tool_version", "matmul", [(("producer", "tool_version"), DEL)]),
    ("producer missing frontend", "matmul", [(("producer", "frontend"), DEL)]),
    ("producer tool_version a float", "matmul", [(("producer", "tool_version"), 0.1)]),
    ("producer unknown field", "matmul", [(("producer", "host"), "gpu-01")]),
    ("sha256 uppercase", "matmul", [(("producer", "source_sha256"), SHA.upper())]),
    ("sha256 short", "matmul", [(("producer", "source_sha256"), SHA[:-1])]),
    ("sha256 long", "matmul", [(("producer", "source_sha256"), SHA + "0")]),
    # ranks
    ("missing ranks", "matmul", [(("ranks",), DEL)]),
    ("ranks a list", "matmul", [(("ranks",), ["M", "N", "K"])]),
    ("rank size zero", "matmul", [(("ranks", "M"), 0)]),
    ("rank size negative", "matmul", [(("ranks", "M"), -4)]),
    ("rank size a float", "matmul", [(("ranks", "M"), 2.5)]),
    ("rank size an integral float", "matmul", [(("ranks", "M"), 1024.0)]),
    ("rank size a string", "matmul", [(("ranks", "M"), "1024")]),
    ("rank size a boolean", "matmul", [(("ranks", "M"), True)]),
    ("rank size null", "matmul", [(("ranks", "M"), None)]),
    ("rank name starts with a digit", "matmul", [(("ranks", "1M"), 4)]),
    ("rank name with a dash", "matmul", [(("ranks", "M-N"), 4)]),
    ("rank name an integer", "matmul", [(("ranks", 7), 4)]),
    # tensors
    ("missing tensors", "matmul", [(("tensors",), DEL)]),
    ("tensors a mapping", "matmul", [(("tensors",), {"A": "bf16"})]),
    ("tensor not a mapping", "matmul", [(("tensors", 0), "A")]),
    ("tensor missing name", "matmul", [(("tensors", 0, "name"), DEL)]),
    ("tensor missing ranks", "matmul", [(("tensors", 0, "ranks"), DEL)]),
    ("tensor missing dtype", "matmul", [(("tensors", 0, "dtype"), DEL)]),
    ("tensor missing role", "matmul", [(("tensors", 0, "role"), DEL)]),
    ("tensor unknown field", "matmul", [(("tensors", 0, "layout"), "row-major")]),
    ("tensor name starts with a digit", "matmul", [(("tensors", 0, "name"), "1A")]),
    ("tensor name with a space", "matmul", [(("tensors", 0, "name"), "A B")]),
    ("tensor name with brackets", "matmul", [(("tensors", 0, "name"), "A[M]")]),
    ("tensor ranks a string", "matmul", [(("tensors", 0, "ranks"), "M, K")]),
    ("tensor ranks repeated", "matmul", [(("tensors", 0, "ranks"), ["M", "M"])]),
    ("tensor rank an integer", "matmul", [(("tensors", 0, "ranks"), ["M", 3])]),
    ("unknown dtype", "matmul", [(("tensors", 0, "dtype"), "float8")]),
    ("dtype alias", "matmul", [(("tensors", 0, "dtype"), "float32")]),
    ("dtype upper case", "matmul", [(("tensors", 0, "dtype"), "BF16")]),
    ("unknown role", "matmul", [(("tensors", 0, "role"), "activation")]),
    ("density zero", "matmul", [(("tensors", 1, "density"), 0)]),
    ("density above one", "matmul", [(("tensors", 1, "density"), 1.5)]),
    ("density negative", "matmul", [(("tensors", 1, "density"), -0.25)]),
    ("density infinite", "matmul", [(("tensors", 1, "density"), math.inf)]),
    ("density a string", "matmul", [(("tensors", 1, "density"), "0.5")]),
    ("density a boolean", "matmul", [(("tensors", 1, "density"), True)]),
    ("value on an input", "matmul", [(("tensors", 0, "value"), 1.0)]),
    ("value a string", "matmul", [(("tensors", 0, "role"), "constant"), (("tensors", 0, "value"), "1")]),
    ("value null", "matmul", [(("tensors", 0, "role"), "constant"), (("tensors", 0, "value"), None)]),
    # nodes, any kind
    ("missing nodes", "matmul", [(("nodes",), DEL)]),
    ("nodes a mapping", "matmul", [(("nodes",), {"mm": {}})]),
    ("node not a mapping", "matmul", [(("nodes", 0), "mm")]),
    ("node missing name", "matmul", [(("nodes", 0, "name"), DEL)]),
    ("node missing kind", "matmul", [(("nodes", 0, "kind"), DEL)]),
    ("node missing op", "matmul", [(("nodes", 0, "op"), DEL)]),
    ("node unknown kind", "matmul", [(("nodes", 0, "kind"), "matmul")]),
    ("node kind an integer", "matmul", [(("nodes", 0, "kind"), 1)]),
    ("node unknown field", "matmul", [(("nodes", 0, "stride"), 2)]),
    ("node unknown field, integer key", "matmul", [(("nodes", 0, 7), 2)]),
    ("node name with a space", "matmul", [(("nodes", 0, "name"), "mat mul")]),
    ("node op not a string", "matmul", [(("nodes", 0, "op"), None)]),
    ("node location not a string", "matmul", [(("nodes", 0, "location"), 12)]),
    ("attrs a list", "matmul", [(("nodes", 0, "attrs"), ["stride"])]),
    ("attrs value a list", "matmul", [(("nodes", 0, "attrs"), {"stride": [2, 2]})]),
    ("attrs value a mapping", "matmul", [(("nodes", 0, "attrs"), {"cfg": {"a": 1}})]),
    ("attrs value null", "matmul", [(("nodes", 0, "attrs"), {"bias": None})]),
    ("attrs integer key", "matmul", [(("nodes", 0, "attrs"), {1: "a"})]),
    # einsum
    ("einsum missing space", "matmul", [(("nodes", 0, "space"), DEL)]),
    ("einsum missing inputs", "matmul", [(("nodes", 0, "inputs"), DEL)]),
    ("einsum missing output", "matmul", [(("nodes", 0, "output"), DEL)]),
    ("einsum missing map", "matmul", [(("nodes", 0, "map"), DEL)]),
    ("einsum missing reduce", "matmul", [(("nodes", 0, "reduce"), DEL)]),
    ("einsum with movement", "matmul", [(("nodes", 0, "movement"), "copy")]),
    ("einsum with view", "matmul", [(("nodes", 0, "view"), True)]),
    ("einsum with outputs", "matmul", [(("nodes", 0, "outputs"), ["C"])]),
    ("einsum with axis", "matmul", [(("nodes", 0, "axis"), "K")]),
    ("einsum with reason", "matmul", [(("nodes", 0, "reason"), "because")]),
    ("unknown map op", "matmul", [(("nodes", 0, "map"), "fma")]),
    ("map op an integer", "matmul", [(("nodes", 0, "map"), 2)]),
    ("unknown reduce op", "matmul", [(("nodes", 0, "reduce"), "sum")]),
    ("reduce op null", "matmul", [(("nodes", 0, "reduce"), None)]),
    ("space a string", "matmul", [(("nodes", 0, "space"), "M, N, K")]),
    ("space repeats a rank", "matmul", [(("nodes", 0, "space"), ["M", "N", "K", "M"])]),
    ("space bad rank name", "matmul", [(("nodes", 0, "space"), ["M", "N", "2K"])]),
    ("inputs a string", "matmul", [(("nodes", 0, "inputs"), "A[M, K]")]),
    ("input access an integer", "matmul", [(("nodes", 0, "inputs", 0), 3)]),
    ("input access missing comma", "matmul", [(("nodes", 0, "inputs", 0), "A[M K]")]),
    ("input access empty index", "matmul", [(("nodes", 0, "inputs", 0), "A[M,,K]")]),
    ("input access trailing comma", "matmul", [(("nodes", 0, "inputs", 0), "A[M, K,]")]),
    ("input access unclosed", "matmul", [(("nodes", 0, "inputs", 0), "A[M, K")]),
    ("input access juxtaposed coefficient", "matmul", [(("nodes", 0, "inputs", 0), "A[2M, K]")]),
    ("input access product of ranks", "matmul", [(("nodes", 0, "inputs", 0), "A[M*K, K]")]),
    ("input access nested brackets", "matmul", [(("nodes", 0, "inputs", 0), "A[M, K]]")]),
    ("input access bad indirect", "matmul", [(("nodes", 0, "inputs", 0), "A[@ ids, K]")]),
    ("input access bad tensor name", "matmul", [(("nodes", 0, "inputs", 0), "1A[M, K]")]),
    ("output a list", "matmul", [(("nodes", 0, "output"), ["C[M, N]"])]),
    ("pad not a mapping", "conv", [(("nodes", CONVN, "pad"), [1, 1])]),
    ("pad entry not a mapping", "conv", [(("nodes", CONVN, "pad"), {"x": [1, 1]})]),
    ("pad one number", "conv", [(("nodes", CONVN, "pad", "x", "H"), [1])]),
    ("pad three numbers", "conv", [(("nodes", CONVN, "pad", "x", "H"), [1, 1, 1])]),
    ("pad negative", "conv", [(("nodes", CONVN, "pad", "x", "H"), [-1, 1])]),
    ("pad a boolean", "conv", [(("nodes", CONVN, "pad", "x", "H"), [1, True])]),
    ("pad a float", "conv", [(("nodes", CONVN, "pad", "x", "H"), [1, 1.0])]),
    ("pad a scalar", "conv", [(("nodes", CONVN, "pad", "x", "H"), 1)]),
    ("fill a string", "conv", [(("nodes", CONVN, "fill"), "-inf")]),
    ("fill a boolean", "conv", [(("nodes", CONVN, "fill"), False)]),
    ("fill null", "conv", [(("nodes", CONVN, "fill"), None)]),
    # data movement
    ("movement missing", "dm", [(("nodes", EMBED, "movement"), DEL)]),
    ("unknown movement", "dm", [(("nodes", EMBED, "movement"), "gather")]),
    ("data movement missing inputs", "dm", [(("nodes", EMBED, "inputs"), DEL)]),
    ("data movement missing output", "dm", [(("nodes", EMBED, "output"), DEL)]),
    ("data movement with map", "dm", [(("nodes", EMBED, "map"), "identity")]),
    ("data movement with reduce", "dm", [(("nodes", EMBED, "reduce"), "none")]),
    ("data movement with outputs", "dm", [(("nodes", EMBED, "outputs"), ["emb"])]),
    ("data movement with reason", "dm", [(("nodes", EMBED, "reason"), "gather")]),
    ("view not a boolean", "dm", [(("nodes", RESHAPE, "view"), "yes")]),
    ("view an integer", "dm", [(("nodes", RESHAPE, "view"), 1)]),
    ("axis not a string", "dm", [(("nodes", CONCAT, "axis"), 2)]),
    ("copy space repeats a rank", "dm", [(("nodes", SLICE, "space"), ["B", "H", "S2", "S2"])]),
    ("copy fill a string", "dm", [(("nodes", PADCOPY, "fill"), "zero")]),
    # opaque
    ("opaque missing reason", "opaque", [(("nodes", SORT, "reason"), DEL)]),
    ("opaque missing outputs", "opaque", [(("nodes", SORT, "outputs"), DEL)]),
    ("opaque missing inputs", "opaque", [(("nodes", SORT, "inputs"), DEL)]),
    ("opaque with output", "opaque", [(("nodes", SORT, "output"), "sorted")]),
    ("opaque with space", "opaque", [(("nodes", SORT, "space"), ["M", "N"])]),
    ("opaque with map", "opaque", [(("nodes", SORT, "map"), "identity")]),
    ("opaque with reduce", "opaque", [(("nodes", SORT, "reduce"), "none")]),
    ("opaque with movement", "opaque", [(("nodes", SORT, "movement"), "copy")]),
    ("opaque with pad", "opaque", [(("nodes", SORT, "pad"), {})]),
    ("opaque with fill", "opaque", [(("nodes", SORT, "fill"), 0.0)]),
    ("opaque with view", "opaque", [(("nodes", SORT, "view"), False)]),
    ("opaque with axis", "opaque", [(("nodes", SORT, "axis"), "N")]),
    ("opaque outputs a string", "opaque", [(("nodes", SORT, "outputs"), "sorted")]),
    ("opaque reason not a string", "opaque", [(("nodes", SORT, "reason"), ["data", "dependent"])]),
    # validation
    ("missing validation", "matmul", [(("validation",), DEL)]),
    ("validation null", "matmul", [(("validation",), None)]),
    ("validation a string", "matmul", [(("validation",), "skipped")]),
    ("validation missing status", "matmul", [(("validation", "status"), DEL)]),
    ("validation missing method", "matmul", [(("validation", "method"), DEL)]),
    ("validation unknown status", "matmul", [(("validation", "status"), "ok")]),
    ("validation unknown field", "matmul", [(("validation", "date"), "today")]),
    ("seed a float", "opaque", [(("validation", "seed"), 1.5)]),
    ("seed an integral float", "opaque", [(("validation", "seed"), 1.0)]),
    ("seed a string", "opaque", [(("validation", "seed"), "42")]),
    ("seed a boolean", "opaque", [(("validation", "seed"), True)]),
    ("rtol negative", "opaque", [(("validation", "rtol"), -1e-5)]),
    ("atol a string", "opaque", [(("validation", "atol"), "1e-6")]),
    ("max_abs_error negative infinity", "opaque", [(("validation", "max_abs_error"), -math.inf)]),
    ("max_rel_error null", "opaque", [(("validation", "max_rel_error"), None)]),
    ("reduced_ranks a list", "opaque", [(("validation", "reduced_ranks"), ["M"])]),
    ("reduced_ranks size zero", "opaque", [(("validation", "reduced_ranks"), {"M": 0})]),
    ("reduced_ranks size a boolean", "opaque", [(("validation", "reduced_ranks"), {"M": True})]),
    ("reduced_ranks size a float", "opaque", [(("validation", "reduced_ranks"), {"M": 8.0})]),
    ("reason not a string", "opaque", [(("validation", "reason"), 404)]),
    ("reference not a string", "opaque", [(("validation", "reference"), ["torch"])]),
    # 1.1 additions: wrong types, wrong kinds, and any of them in a file that says 1.0
    ("scan not a rank name", "matmul", [V1_1, (("nodes", 0, "scan"), "2K")]),
    ("scan a list", "matmul", [V1_1, (("nodes", 0, "scan"), ["K"])]),
    ("init not a tensor name", "matmul", [V1_1, (("nodes", 0, "init"), "A[M, K]")]),
    ("init null", "matmul", [V1_1, (("nodes", 0, "init"), None)]),
    ("scan on a data movement", "dm", [V1_1, (("nodes", SLICE, "scan"), "S2")]),
    ("init on an opaque node", "opaque", [V1_1, (("nodes", SORT, "init"), "x")]),
    ("unknown map op in 1.1", "matmul", [V1_1, (("nodes", 0, "map"), "tanh_approx")]),
    ("attempts zero", "opaque", [V1_1, (("validation", "attempts"), 0)]),
    ("attempts a float", "opaque", [V1_1, (("validation", "attempts"), 2.0)]),
    ("attempts a boolean", "opaque", [V1_1, (("validation", "attempts"), True)]),
    ("model not a string", "opaque", [V1_1, (("validation", "model"), 4)]),
    ("scan in a 1.0 file", "matmul", [(("nodes", 0, "scan"), "K")]),
    ("init in a 1.0 file", "matmul", [(("nodes", 0, "init"), "A")]),
    ("1.1 map op in a 1.0 file", "matmul", [(("nodes", 0, "map"), "atan2")]),
    ("model in a 1.0 file", "opaque", [(("validation", "model"), "claude-sonnet-4-5")]),
    ("attempts in a 1.0 file", "opaque", [(("validation", "attempts"), 3)]),
]


@pytest.mark.parametrize("base, changes", [(b, c) for _, b, c in REJECTED], ids=[i for i, _, _ in REJECTED])
def test_structurally_wrong_documents_are_rejected_by_both(base: str, changes: list):
    doc = mutate(BASES[base], *changes)
    assert not schema_ok(doc), "the schema accepts it"
    assert not decode_ok(doc), "the decoder accepts it"


ACCEPTED = [
    ("as is", "matmul", []),
    ("no name", "matmul", [(("name",), DEL)]),
    ("newer minor version", "matmul", [(("version",), "1.12")]),
    ("all producer fields", "matmul", [(("producer", "frontend_version"), "2.13.0"),
                                       (("producer", "source"), "m.py"), (("producer", "source_sha256"), SHA)]),
    ("no ranks, tensors or nodes (structurally)", "matmul", [(("ranks",), {}), (("tensors",), []),
                                                             (("nodes",), [])]),
    ("integer density", "matmul", [(("tensors", 1, "density"), 1)]),
    ("constant with an infinite value", "matmul", [(("tensors", 1, "role"), "constant"),
                                                   (("tensors", 1, "value"), -math.inf)]),
    ("constant with an integer value", "matmul", [(("tensors", 1, "role"), "constant"),
                                                  (("tensors", 1, "value"), 3)]),
    ("scalar tensor", "matmul", [(("tensors", 1, "ranks"), [])]),
    ("attrs of every scalar type", "matmul", [(("nodes", 0, "attrs"),
                                               {"a": "s", "b": 1, "c": 2.5, "d": True, "e": -math.inf})]),
    ("empty attrs", "matmul", [(("nodes", 0, "attrs"), {})]),
    ("empty pad", "matmul", [(("nodes", 0, "pad"), {})]),
    ("pad of a named tensor", "matmul", [(("nodes", 0, "pad"), {"A": {"M": [0, 2]}})]),
    ("fill nan", "matmul", [(("nodes", 0, "fill"), math.nan)]),
    ("fill integer", "matmul", [(("nodes", 0, "fill"), 0)]),
    ("spaced access", "matmul", [(("nodes", 0, "inputs", 0), "  A [ M , K ]  ")]),
    ("affine access", "matmul", [(("nodes", 0, "inputs", 0), "A[-M + 2*K - 3, K*2 + 1]")]),
    ("indirect access", "matmul", [(("nodes", 0, "inputs", 0), "A[@idx.0, K]")]),
    ("scalar access", "matmul", [(("nodes", 0, "inputs", 0), "A[]")]),
    ("bare access", "matmul", [(("nodes", 0, "inputs", 0), "A")]),
    ("empty inputs", "matmul", [(("nodes", 0, "inputs"), [])]),
    ("validation with every field", "opaque", [(("validation", "reduced_ranks"), {"M": 8, "K": 2})]),
    ("infinite tolerance", "opaque", [(("validation", "rtol"), math.inf)]),
    ("axis on a copy", "dm", [(("nodes", SLICE, "axis"), "S2")]),
    ("reshape with empty space and pad", "dm", [(("nodes", RESHAPE, "space"), []), (("nodes", RESHAPE, "pad"), {})]),
    ("concat with view false", "dm", [(("nodes", CONCAT, "view"), False)]),
    ("opaque with no inputs", "opaque", [(("nodes", SORT, "inputs"), [])]),
    ("1.1 scan", "matmul", [V1_1, (("nodes", 0, "scan"), "M")]),
    ("1.1 init and an indirect output", "matmul", [V1_1, (("nodes", 0, "init"), "A"),
                                                   (("nodes", 0, "output"), "C[@B, N]")]),
    ("1.1 map op", "matmul", [V1_1, (("nodes", 0, "map"), "erfinv")]),
    ("1.1 validation fields", "opaque", [V1_1, (("validation", "model"), "m"), (("validation", "attempts"), 1)]),
    ("1.1 file without 1.1 fields", "dm", [V1_1]),
]


@pytest.mark.parametrize("base, changes", [(b, c) for _, b, c in ACCEPTED], ids=[i for i, _, _ in ACCEPTED])
def test_structurally_right_documents_are_accepted_by_both(base: str, changes: list):
    doc = mutate(BASES[base], *changes)
    YAML_VALIDATOR.validate(doc)
    assert decode_result(doc) == (True, [])


MOVEMENT_RULES = [
    ("concat without axis", [(("nodes", CONCAT, "axis"), DEL)]),
    ("concat as a view", [(("nodes", CONCAT, "view"), True)]),
    ("concat with a space", [(("nodes", CONCAT, "space"), ["B", "H", "Sc", "Dh"])]),
    ("concat with fill", [(("nodes", CONCAT, "fill"), 0.0)]),
    ("reshape with a space", [(("nodes", RESHAPE, "space"), ["B", "S", "D"])]),
    ("reshape with pad", [(("nodes", RESHAPE, "pad"), {"emb": {"S": [1, 1]}})]),
    ("reshape with fill", [(("nodes", RESHAPE, "fill"), 0.0)]),
]


@pytest.mark.parametrize("changes", [c for _, c in MOVEMENT_RULES], ids=[i for i, _ in MOVEMENT_RULES])
def test_movement_field_rules_are_rejected_by_schema_and_by_validation(changes: list):
    """Rules the schema states per movement, which the reader checks as semantics."""
    doc = mutate(DATA_MOVEMENT, *changes)
    assert not schema_ok(doc)
    assert decode_ok(doc)
    assert semantic_errors(doc)


def test_a_newer_minor_may_add_fields_the_reader_ignores():
    from solar_io.format.versioning import CURRENT

    doc = mutate(MATMUL, (("version",), f"1.{CURRENT[1] + 1}"), (("nodes", 0, "cost_hint"), 3))
    ok, warnings = decode_result(doc)
    assert ok and [w.path for w in warnings] == [("nodes", 0, "cost_hint")]
    assert not schema_ok(doc)  # the schema checks the fields of its own version
    assert not decode_ok(mutate(doc, (("version",), "1.0")))


def test_known_gaps_of_json_schema():
    """What a standard JSON Schema validator cannot see in a YAML document (schema/README.md)."""
    integral = mutate(MATMUL, (("ranks", "M"), 1024.0))
    assert STANDARD_VALIDATOR.is_valid(integral) and not schema_ok(integral) and not decode_ok(integral)
    nan = mutate(MATMUL, (("tensors", 1, "density"), math.nan))
    assert STANDARD_VALIDATOR.is_valid(nan) and not decode_ok(nan)
    newline = mutate(MATMUL, (("version",), "1.0\n"))
    assert STANDARD_VALIDATOR.is_valid(newline) and not decode_ok(newline)


# ---------------------------------------------------------------------------- property: random mutations

NAMES = ["x", "M", "K", "N", "_t", "1x", "a b", "", "A[M, K]", "A[M K]", "C[M, N]", "B[K, N]", "@ids"]
ENUM_STRINGS = sorted({*dtypes.DTYPES, *graph.ROLES, *graph.KINDS, *graph.MOVEMENTS, *ops.MAP_OPS,
                       *ops.REDUCE_OPS, *graph.VALIDATION_STATUS, graph.FORMAT_NAME,
                       "1.0", "1.1", "2.0", "0.9", "1", "1.01", "float32", "fp8", "sum", "gather", "ok", SHA})
STRINGS = sorted(set(ENUM_STRINGS + NAMES))
VALUES = [None, True, False, 0, 1, -3, 7, 1.0, 2.5, -0.5, 0.5, math.inf, -math.inf, "", "x", "M", "A[M, K]",
          "bf16", [], ["M"], ["M", "M"], ["A[M, K]"], [1], [0, 2], {}, {"M": 1}, {"x": {"M": [1, 1]}},
          {"k": "v"}]
KEYS = sorted({*codec.TOP_KEYS, *codec.PRODUCER_KEYS, *codec.TENSOR_KEYS, *codec.NODE_KEYS,
               *codec.VALIDATION_KEYS, "extra", "Q", "M"}) + [7]


def _paths(doc: object, path: tuple = ()) -> list[tuple]:
    out = [path]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, path + (i,))
    return out


def _get(doc: object, path: tuple) -> object:
    for step in path:
        doc = doc[step]  # type: ignore[index]
    return doc


@st.composite
def mutated(draw: st.DrawFn, base: dict) -> dict:
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["delete", "add", "replace", "string"]))
        paths = _paths(doc)
        if kind == "add":
            targets = [p for p in paths if isinstance(_get(doc, p), dict)]
        elif kind == "string":
            targets = [p for p in paths if isinstance(_get(doc, p), str)]
        else:
            targets = [p for p in paths if p]
        if not targets:
            continue
        path = draw(st.sampled_from(targets))
        if kind == "add":
            _get(doc, path)[draw(st.sampled_from(KEYS))] = copy.deepcopy(draw(st.sampled_from(VALUES)))
            continue
        parent = _get(doc, path[:-1])
        if kind == "delete":
            del parent[path[-1]]
        elif kind == "replace":
            parent[path[-1]] = copy.deepcopy(draw(st.sampled_from(VALUES)))
        else:
            parent[path[-1]] = draw(st.sampled_from(STRINGS))
    return doc


def _has_movement_rules(doc: object) -> bool:
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    return isinstance(nodes, list) and any(
        isinstance(n, dict) and n.get("kind") == "data_movement" and n.get("movement") in ("reshape", "concat")
        for n in nodes)


def _check_agreement(doc: dict) -> None:
    ok, warnings = decode_result(doc)
    clean = ok and not warnings  # warnings: fields of a newer minor version, which the schema refuses
    if schema_ok(doc):
        assert clean, "the schema accepts a document the decoder rejects"
    elif clean:
        # only the per-movement rules make the schema stricter than decoding; validation agrees with them
        assert _has_movement_rules(doc), "the decoder accepts a document the schema rejects"
        assert semantic_errors(doc), "the schema rejects a document that loads"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(MATMUL))
def test_schema_and_decoder_agree_on_mutations_of_matmul(doc: dict):
    _check_agreement(doc)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["dm", "opaque", "conv"]).flatmap(lambda b: mutated(BASES[b])))
def test_schema_and_decoder_agree_on_mutations_of_every_node_kind(doc: dict):
    _check_agreement(doc)


ACCESS_RE = re.compile(DEFS["access"]["pattern"])


@settings(max_examples=500, deadline=None)
@given(st.one_of(
    st.text(alphabet="AP_x1 2*+-,[]@.", max_size=16),
    st.builds(lambda a, b: a + "[" + b + "]", st.sampled_from(["x", " x ", "1x", "t.0", ""]),
              st.text(alphabet="PR_2 10*+-,@x", max_size=16)),
))
def test_access_pattern_is_the_decoder_grammar(text: str):
    try:
        parse_access(text)
        parsed = True
    except ValueError:
        parsed = False
    assert bool(ACCESS_RE.search(text)) == parsed


def test_schema_forbids_each_field_before_the_version_the_format_table_gives():
    """``$defs/version1_K`` forbids, in a file of 1.K or older, exactly the fields the format table
    (``solar_io.format.kinds``) says were added in 1.(K+1); the allOf applies it to 1.0 .. 1.K."""
    from solar_io.format.kinds import SINCE
    from solar_io.format.versioning import CURRENT

    record_at = {("properties",): "document", ("properties", "producer", "properties"): "producer",
                 ("properties", "tensors", "items", "properties"): "tensor",
                 ("properties", "nodes", "items", "properties"): "node",
                 ("properties", "validation", "properties"): "validation"}

    def forbidden(sub: dict, path: tuple = ()) -> set[tuple[str, str]]:
        out = set()
        for key, val in sub.items():
            if not isinstance(val, dict):
                continue
            if path in record_at and val.get("not") == {}:
                out.add((record_at[path], key))
            out |= forbidden(val, path + (key,))
        return out

    for k in range(CURRENT[1]):
        want = {rf for rf, since in SINCE.items() if since == (1, k + 1)}
        assert forbidden(DEFS[f"version1_{k}"]) == want, k
        versions = [f"1.{j}" for j in range(k + 1)]
        applies = [a for a in SCHEMA["allOf"] if a["then"] == {"$ref": f"#/$defs/version1_{k}"}]
        assert len(applies) == 1
        cond = applies[0]["if"]["properties"]["version"]
        assert cond.get("enum", [cond.get("const")]) == versions
