"""Reading ``workload.jsonl``: one workload per line, plain or FlashInfer Trace-shaped.

A plain line is a workload object ``{uuid, axes, inputs, tolerance}``; a Trace-shaped line wraps
it as ``{definition, workload, solution, evaluation}`` (its ``definition`` must name the one being
captured). Inputs are ``random``, ``scalar`` (``value``), ``safetensors`` (``path`` and
``tensor_key``) or ``custom`` (made by the definition's ``custom_inputs_entrypoint``). A line's
``axes`` may also give the value of a *scalar input* of the definition (SOL-ExecBench's L2/032 sets
``is_joint_block`` there; the harness hands ``axes`` to the custom generator as ``axes_and_scalars``):
that value is the scalar's, for the generator, the constraints and ``run``. A bad line is reported as
``FILE:LINE: field: problem`` and never stops the other lines.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...format.yamltext import YamlError, max_bytes, read_limited
from ..common.errors import CaptureError
from .axes import check_constraints, resolve
from .definition import Definition

INPUT_KINDS = ("random", "scalar", "safetensors", "custom")
TOLERANCE_FIELDS = ("max_atol", "max_rtol", "required_matched_ratio", "max_error_cap", "allow_negative_inf")


@dataclass(frozen=True, slots=True)
class InputSource:
    """Where one input's data comes from."""

    kind: str
    value: int | float | bool | None = None
    path: Path | None = None
    key: str | None = None


@dataclass(frozen=True)
class Workload:
    """One workload line, checked against its definition: all axis sizes resolved."""

    index: int
    line: int
    where: str  # "FILE:LINE", the prefix of every message about it
    uuid: str | None
    sizes: dict[str, int]
    inputs: dict[str, InputSource]
    tolerance: tuple[tuple[str, float | bool | None], ...] = ()
    axis_scalars: dict[str, int | float | bool] = field(default_factory=dict)  # scalar inputs set in ``axes``

    @property
    def key(self) -> str:
        """The name part of the graph file: the uuid, or the line's index when there is none."""
        return self.uuid if self.uuid else str(self.index)

    def scalars(self) -> dict[str, int | float | bool]:
        """{scalar input: value} given by the workload (in ``inputs`` or in ``axes``)."""
        given = {n: s.value for n, s in self.inputs.items() if s.kind == "scalar" and s.value is not None}
        return {**self.axis_scalars, **given}


@dataclass(frozen=True)
class BadLine:
    """A workload line that could not be read (``message`` is the whole one-line error)."""

    index: int
    line: int
    message: str


def read_workloads(path: Path, defn: Definition) -> list[Workload | BadLine]:
    """Every non-blank line of ``path`` as a Workload, or a BadLine saying what is wrong with it."""
    path = Path(path)
    try:
        text = read_limited(path, max_bytes()).decode("utf-8")  # at most the limit + 1 bytes
    except YamlError as e:
        raise CaptureError(f"{path}: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise CaptureError(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    out: list[Workload | BadLine] = []
    index = 0
    for lineno, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            out.append(parse_workload_line(raw, defn, path, lineno, index))
        except CaptureError as e:
            out.append(BadLine(index, lineno, str(e)))
        index += 1
    return out


def parse_workload_line(raw: str, defn: Definition, path: Path, lineno: int, index: int) -> Workload:
    """One line (JSON text) as a Workload of ``defn``; CaptureError names the file, line and field."""
    where = f"{path}:{lineno}"
    try:
        doc = json.loads(raw)
    except ValueError as e:
        raise CaptureError(f"{where}: not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise CaptureError(f"{where}: a workload line is a JSON object, got {type(doc).__name__}")
    prefix = ""
    if "workload" in doc and "definition" in doc:  # a Trace: {definition, workload, solution, evaluation}
        if doc["definition"] != defn.name:
            raise CaptureError(f"{where}: definition: names {doc['definition']!r}, not this definition "
                               f"{defn.name!r}")
        doc, prefix = doc["workload"], "workload."
        if not isinstance(doc, dict):
            raise CaptureError(f"{where}: workload: must be an object {{uuid, axes, inputs}}")
    return _workload(doc, defn, path, where, prefix, lineno, index)


def _workload(doc: dict, defn: Definition, path: Path, where: str, prefix: str, lineno: int,
              index: int) -> Workload:
    uuid = doc.get("uuid")
    if uuid is not None and (not isinstance(uuid, str) or not uuid or "/" in uuid):
        raise CaptureError(f"{where}: {prefix}uuid: must be a non-empty string without '/', got {uuid!r}")
    axes = doc.get("axes", {})
    if not isinstance(axes, dict):
        raise CaptureError(f"{where}: {prefix}axes: must be an object {{axis: value}}, got {type(axes).__name__}")
    scalars = {n: v for n, v in axes.items() if n not in defn.axes and n in defn.inputs and defn.inputs[n].scalar}
    for n, v in scalars.items():
        if type(v) not in (int, float, bool):
            raise CaptureError(f"{where}: {prefix}axes.{n}: the scalar input's value must be an int, float or bool, "
                               f"got {v!r}")
    sizes = resolve(defn.axes, {n: v for n, v in axes.items() if n not in scalars}, where, prefix)
    inputs = _inputs(doc.get("inputs", {}), defn, path, where, prefix, scalars)
    env: dict[str, Any] = dict(sizes)
    env.update({n: s.value for n, s in inputs.items() if s.kind == "scalar"})
    check_constraints(defn.constraints, env, f"{where}: {defn.file}")
    return Workload(index, lineno, where, uuid, sizes, inputs, _tolerance(doc.get("tolerance"), where, prefix),
                    scalars)


def _inputs(v: Any, defn: Definition, path: Path, where: str, prefix: str,
            axis_scalars: dict[str, Any]) -> dict[str, InputSource]:
    if not isinstance(v, dict):
        raise CaptureError(f"{where}: {prefix}inputs: must be an object {{input: {{type: ...}}}}")
    out: dict[str, InputSource] = {}
    for name, d in v.items():
        at = f"{where}: {prefix}inputs.{name}"
        if name not in defn.inputs:
            raise CaptureError(f"{at}: not an input of {defn.name} (its inputs: {', '.join(defn.inputs)})")
        if not isinstance(d, dict) or d.get("type") not in INPUT_KINDS:
            got = d.get("type") if isinstance(d, dict) else d
            raise CaptureError(f"{at}.type: must be one of {', '.join(INPUT_KINDS)}, got {got!r}")
        spec = defn.inputs[name]
        kind = d["type"]
        if kind == "scalar":
            value = d.get("value")
            if type(value) not in (int, float, bool):
                raise CaptureError(f"{at}.value: a scalar input needs an int, float or bool value, got {value!r}")
            if spec.shape not in (None, ()):
                raise CaptureError(f"{at}: a scalar value for a tensor of shape {list(spec.shape)}")
            out[name] = InputSource(kind, value=value)
        elif kind == "safetensors":
            out[name] = InputSource(kind, path=_blob(d.get("path"), path, f"{at}.path"), key=_key(d, at))
        elif kind == "custom":
            if defn.custom_entry is None:
                raise CaptureError(f"{at}: a custom input, but the definition has no custom_inputs_entrypoint")
            out[name] = InputSource(kind)
        else:
            if spec.scalar:
                raise CaptureError(f"{at}: a scalar input (shape null) needs type scalar with a value")
            out[name] = InputSource(kind)
    for name, spec in defn.inputs.items():
        if name not in out and name in axis_scalars:
            out[name] = InputSource("scalar", value=axis_scalars[name])
        elif name not in out:
            if spec.scalar:
                raise CaptureError(f"{where}: {prefix}inputs.{name}: missing (a scalar input needs a value)")
            out[name] = InputSource("random")
    return out


def _key(d: dict, at: str) -> str:
    key = d.get("tensor_key")
    if not isinstance(key, str) or not key:
        raise CaptureError(f"{at}.tensor_key: a safetensors input needs the key of its tensor")
    return key


def _blob(p: Any, jsonl: Path, at: str) -> Path:
    """A safetensors path: relative to the workload file's folder or one of the three above it (the
    trace-set root of FlashInfer's layout, ``blob/...``)."""
    if not isinstance(p, str) or not p:
        raise CaptureError(f"{at}: a safetensors input needs the file's path")
    cand = Path(p)
    tried = [cand] if cand.is_absolute() else [d / cand for d in [jsonl.parent, *list(jsonl.parent.parents)[:3]]]
    for c in tried:
        if c.is_file():
            return c
    raise CaptureError(f"{at}: {p!r} is absent (looked beside {jsonl.name} and in the 3 folders above it)")


def _tolerance(v: Any, where: str, prefix: str) -> tuple[tuple[str, float | bool | None], ...]:
    if v is None:
        return ()
    if not isinstance(v, dict):
        raise CaptureError(f"{where}: {prefix}tolerance: must be an object, got {type(v).__name__}")
    out = []
    for k in TOLERANCE_FIELDS:
        if k in v:
            x = v[k]
            if x is not None and type(x) not in (int, float, bool):
                raise CaptureError(f"{where}: {prefix}tolerance.{k}: must be a number, got {x!r}")
            if type(x) in (int, float) and not (abs(x) < 2**1023 and x == x):  # 2**1100, NaN
                raise CaptureError(f"{where}: {prefix}tolerance.{k}: must be a number a float holds, not NaN, "
                                   f"got {str(x)[:40]}")
            out.append((k, float(x) if type(x) is int else x))
    return tuple(out)
