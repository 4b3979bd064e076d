"""Reading a FlashInfer-Trace / SOL-ExecBench ``definition.json``.

A definition names its axes (``const`` with a value, ``var`` set by each workload, ``expr``
computed from other axes), optional ``constraints`` over them, its input and output tensors
(a shape of axis names, ``[]`` for a 0-d tensor, ``null`` for a Python scalar, and a dtype),
the PyTorch ``reference`` source (a global ``run``) and optionally the name of a function in it
that makes ``custom`` inputs (``custom_inputs_entrypoint``). Every problem is reported as one line
``FILE: field.path: problem``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...dtypes import FRAMEWORK_TO_FILE
from ...format.yamltext import YamlError, max_bytes, read_limited
from ..common.errors import CaptureError
from .axes import AXIS_KINDS, Axis, ExprError, evaluate, names_in

#: dtype names the format uses -> (torch attribute, einsum-graph dtype or None where it has none).
#: ``float4_e2m1fn_x2`` packs two fp4 values in one byte (its last dimension counts bytes).
DEFINITION_DTYPES: dict[str, tuple[str, str | None]] = {
    **{name: (name, file) for name, file in FRAMEWORK_TO_FILE.items()},
    "float4_e2m1": ("float4_e2m1fn_x2", "fp4_e2m1"), "float4_e2m1fn_x2": ("float4_e2m1fn_x2", "fp4_e2m1"),
}
TOP_FIELDS = ("name", "op_type", "description", "tags", "hf_id", "axes", "constraints", "inputs", "outputs",
              "reference", "custom_inputs_entrypoint")


@dataclass(frozen=True, slots=True)
class TensorSpec:
    """An input or output: its axis-name shape (``()`` 0-d, None a Python scalar) and dtype."""

    name: str
    shape: tuple[str | int, ...] | None
    dtype: str

    @property
    def scalar(self) -> bool:
        """A Python scalar (``"shape": null``), passed to ``run`` directly."""
        return self.shape is None


@dataclass(frozen=True)
class Definition:
    """One parsed definition; ``path`` is where it was read (``file`` is the name used in messages)."""

    name: str
    file: str
    sha256: str
    axes: dict[str, Axis]
    inputs: dict[str, TensorSpec]
    outputs: dict[str, TensorSpec]
    reference: str
    constraints: tuple[str, ...] = ()
    custom_entry: str | None = None
    op_type: str | None = None
    path: Path | None = field(default=None, compare=False)
    #: constraints over tensor *values* (``"num_kv_indices == kv_indptr[-1].item()"``): never evaluated
    #: (no code from a definition is run outside the reference), kept to be reported as not checked
    #: here; the reference, which FlashInfer's harness also runs, asserts them on the real values.
    value_constraints: tuple[str, ...] = ()

    @property
    def scalars(self) -> tuple[str, ...]:
        """Names of the scalar inputs (their values come from the workload)."""
        return tuple(n for n, s in self.inputs.items() if s.scalar)


def _fail(file: str, where: str, msg: str) -> CaptureError:
    return CaptureError(f"{file}: {where}: {msg}" if where else f"{file}: {msg}")


def read_definition(path: Path) -> Definition:
    """Parse ``definition.json`` (or any definition file); CaptureError names the field on any problem.

    ``reference`` may be absent when a ``reference.py`` lies beside the file (the problem-folder layout).
    """
    path = Path(path)
    file = str(path)
    try:
        data = read_limited(path, max_bytes())  # at most the limit + 1 bytes (a definition.json of /dev/zero)
    except YamlError as e:
        raise _fail(file, "", str(e)) from None
    except OSError as e:
        raise _fail(file, "", f"cannot read: {e.strerror or e}") from None
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise _fail(file, "", f"not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise _fail(file, "", f"a definition is a JSON object, got {type(doc).__name__}")
    if "reference" not in doc and (path.parent / "reference.py").is_file():
        doc = dict(doc, reference=(path.parent / "reference.py").read_text(encoding="utf-8", errors="replace"))
    return parse_definition(doc, file, hashlib.sha256(data).hexdigest(), path)


def parse_definition(doc: dict[str, Any], file: str, sha256: str, path: Path | None = None) -> Definition:
    """A Definition from its JSON object (``file`` names it in messages)."""
    for key in ("name", "axes", "inputs", "outputs", "reference"):
        if key not in doc:
            raise _fail(file, key, "missing (a definition needs name, axes, inputs, outputs and reference)")
    name = doc["name"]
    if not isinstance(name, str) or not name or "/" in name:
        raise _fail(file, "name", f"must be a non-empty string without '/', got {name!r}")
    axes = _axes(doc["axes"], file)
    inputs = _tensors(doc["inputs"], "inputs", axes, file)
    outputs = _tensors(doc["outputs"], "outputs", axes, file)
    for n in outputs:
        if n in inputs:
            raise _fail(file, f"outputs.{n}", "is also an input name")
    constraints = doc.get("constraints") or []
    if not isinstance(constraints, list) or not all(isinstance(c, str) for c in constraints):
        raise _fail(file, "constraints", "must be a list of strings such as \"H_qo == H_kv * H_r\"")
    known = set(axes) | {n for n, s in inputs.items() if s.scalar}
    on_values = []
    for i, c in enumerate(constraints):
        try:
            tensors = names_in(c) & {n for n, s in inputs.items() if not s.scalar}
        except ExprError as e:
            raise _fail(file, f"constraints[{i}]", str(e)) from None
        if tensors:  # a constraint on tensor values: parsed, never evaluated
            on_values.append(c)
            continue
        _check_expression(c, known, file, f"constraints[{i}]", logical=True)
    constraints = [c for c in constraints if c not in on_values]
    ref = doc["reference"]
    if not isinstance(ref, str) or not ref.strip():
        raise _fail(file, "reference", "must be the Python source of the reference (a string defining run)")
    entry = doc.get("custom_inputs_entrypoint")
    if entry is not None and (not isinstance(entry, str) or not entry.isidentifier()):
        raise _fail(file, "custom_inputs_entrypoint", f"must name a function of the reference, got {entry!r}")
    op_type = doc.get("op_type")
    return Definition(name, file, sha256, axes, inputs, outputs, ref, tuple(constraints), entry,
                      op_type if isinstance(op_type, str) else None, path, tuple(on_values))


def _axes(v: Any, file: str) -> dict[str, Axis]:
    if not isinstance(v, dict) or not v:
        raise _fail(file, "axes", "must be a non-empty object {name: {type: const|var|expr, ...}}")
    out: dict[str, Axis] = {}
    for name, spec in v.items():
        where = f"axes.{name}"
        if not name.isidentifier():
            raise _fail(file, where, "an axis name must be an identifier")
        if not isinstance(spec, dict):
            raise _fail(file, where, f"must be an object with a type, got {type(spec).__name__}")
        kind = spec.get("type")
        if kind not in AXIS_KINDS:
            raise _fail(file, f"{where}.type", f"must be one of {', '.join(AXIS_KINDS)}, got {kind!r}")
        if kind == "const":
            value = spec.get("value")
            if type(value) is not int or value < 0:
                raise _fail(file, f"{where}.value", f"a const axis needs a non-negative integer value, got {value!r}")
            out[name] = Axis(name, kind, value=value)
        elif kind == "expr":
            expr = spec.get("expression")
            if not isinstance(expr, str) or not expr.strip():
                raise _fail(file, f"{where}.expression", "an expr axis needs an expression string")
            out[name] = Axis(name, kind, expression=expr)
        else:
            out[name] = Axis(name, kind)
    for name, ax in out.items():
        if ax.kind == "expr":
            _check_expression(ax.expression or "", set(out) - {name}, file, f"axes.{name}.expression")
    _no_cycles(out, file)
    return out


def _check_expression(expr: str, known: set[str], file: str, where: str, *, logical: bool = False) -> None:
    """The expression parses, uses only allowed syntax, and names only ``known`` names."""
    try:
        unknown = names_in(expr) - known
        if unknown:
            raise ExprError(f"{expr!r} names {', '.join(sorted(unknown))}, not an axis"
                            f"{' or scalar input' if logical else ''} of the definition")
        evaluate(expr, {n: 7 for n in known}, logical=logical)  # syntax check on sample values
    except ExprError as e:
        if "divides by zero" in str(e) or "exponent" in str(e):
            return  # the sample values hit a singularity: the syntax itself is fine
        raise _fail(file, where, str(e)) from None


def names_in_or_none(text: str) -> set[str] | None:
    """The names of an arithmetic shape entry, or None when it does not parse as an expression."""
    try:
        return names_in(text) or None
    except ExprError:
        return None


def _no_cycles(axes: dict[str, Axis], file: str) -> None:
    deps = {n: names_in(a.expression or "") for n, a in axes.items() if a.kind == "expr"}
    state: dict[str, int] = {}

    def visit(n: str, trail: list[str]) -> None:
        if state.get(n) == 2 or n not in deps:
            return
        if state.get(n) == 1:
            cycle = trail[trail.index(n):] + [n]
            raise _fail(file, f"axes.{n}.expression", f"expr axes refer to each other in a cycle: {' -> '.join(cycle)}")
        state[n] = 1
        for d in sorted(deps[n]):
            visit(d, trail + [n])
        state[n] = 2

    for n in deps:
        visit(n, [])


def _tensors(v: Any, key: str, axes: dict[str, Axis], file: str) -> dict[str, TensorSpec]:
    if not isinstance(v, dict):
        raise _fail(file, key, f"must be an object {{name: {{shape, dtype}}}}, got {type(v).__name__}")
    out: dict[str, TensorSpec] = {}
    for name, spec in v.items():
        where = f"{key}.{name}"
        if not name.isidentifier():
            raise _fail(file, where, "a tensor name must be an identifier (it is a parameter of run)")
        if not isinstance(spec, dict):
            raise _fail(file, where, f"must be an object with shape and dtype, got {type(spec).__name__}")
        if "shape" not in spec:
            raise _fail(file, f"{where}.shape", "missing (a list of axis names, [] for 0-d, null for a scalar)")
        dt = spec.get("dtype")
        if not isinstance(dt, str) or dt not in DEFINITION_DTYPES:  # a list or object is no dtype name either
            raise _fail(file, f"{where}.dtype", f"unknown dtype {dt!r}; known: {', '.join(DEFINITION_DTYPES)}")
        shape = spec["shape"]
        if shape is None:
            out[name] = TensorSpec(name, None, dt)
            continue
        if not isinstance(shape, list):
            raise _fail(file, f"{where}.shape", f"must be a list of axis names or null, got {shape!r}")
        for i, s in enumerate(shape):
            if isinstance(s, str):  # an axis name, a literal size ("2"), or arithmetic over axes
                if s not in axes and not s.strip().isdigit():
                    if s.isidentifier() or not names_in_or_none(s):
                        raise _fail(file, f"{where}.shape[{i}]", f"{s!r} is not an axis (axes: {', '.join(axes)})")
                    _check_expression(s, set(axes), file, f"{where}.shape[{i}]")
            elif type(s) is not int or s < 0:
                raise _fail(file, f"{where}.shape[{i}]", f"must be an axis name, got {s!r}")
        out[name] = TensorSpec(name, tuple(shape), dt)
    return out
