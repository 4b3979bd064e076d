"""Which peak each kind of a node's work runs at: compute dtypes, units, fallbacks.

A node's work comes in three kinds (``solar_io.metrics``): matrix FLOPs (contractions), vector
FLOPs (elementwise maps, reduction combines) and transcendental operations. Each kind is *routed*
to one execution unit of the chip at one of the spec's dense peaks (a :class:`Route`). The rules,
all chosen so that the time ``work / peak`` can never exceed what a real run needs (every choice
between applicable peaks takes the largest):

Compute dtype of a node
    The widest (most storage bits) dtype among the tensors it reads; float tensors take precedence
    over integer ones (indices, masks), integers over bool. A node that reads nothing uses the
    tensors it writes. Mixed inputs: ``bf16 x fp8_e4m3 -> bf16``. Several classes of the same
    width (``fp16`` and ``bf16``) are all tried and the fastest applicable peak wins.

Graph dtype -> spec dtype class
    ``fp8_e4m3/fp8_e5m2/mxfp8 -> fp8``; ``fp4_e2m1/mxfp4/nvfp4 -> fp4``; ``fp6_* -> fp6``;
    ``int8/uint8 -> int8``; ``int4 -> int4``; ``fp64, fp32, tf32, bf16, fp16`` map to themselves.
    ``int16/int32/int64/bool`` have no class in the specs: they form the pseudo-class ``int``.

Matrix work
    The matrix unit's peak for the class. ``fp32`` uses the larger of the ``fp32`` and ``tf32``
    matrix peaks (the precision policy's fp32->tf32 rule, :mod:`.precision`; ``allow_tf32=False``,
    i.e. ``--strict-fp32``, keeps it to the ``fp32`` peak). ``fp6``
    falls back to the ``fp8`` matrix peak when the chip lists no ``fp6`` (a note says so). With no
    matrix peak for the class the work runs on the vector unit, as vector work of that class
    (e.g. an ``fp32`` matmul on a chip without fp32 tensor cores runs at the fp32 vector peak); it
    then shares the vector unit with the node's vector work, so their times add.

Vector work
    The largest vector peak among the classes that hold every value of the node's class exactly
    (:data:`HOLDS`): ``bf16`` elementwise work may run at the ``bf16`` or the ``fp32`` vector peak,
    whichever the chip lists faster; ``fp8`` elementwise at the ``fp16``, ``bf16`` or ``fp32`` one.
    The ``int`` pseudo-class (integer and boolean work, whose rates no spec publishes) uses the
    fastest vector peak the chip lists for any dtype. Vector FLOPs count one per add or multiply,
    while a vector peak counts an FMA as two FLOPs: optimistic by up to 2x, so still a lower bound.

Transcendental work
    The special-function unit's peak (results/s) for an applicable class (:data:`HOLDS`; specs list
    ``fp32``). When the chip lists no applicable special peak (no SFU, or ``fp64`` work) each
    transcendental is counted as one vector FLOP at the vector route's peak: a lower bound, since a
    software evaluation costs many FLOPs.

Missing dtypes and units
    A class the chip lists on no unit at all (``fp8`` on an A100, ``bf16`` on a CPU without
    AVX512-BF16) is an error naming the node, unless a ``compute_dtype`` override maps it to one the
    chip has (:func:`parse_compute_dtype`). A chip whose spec publishes no peak at all for the unit
    that work needs (a TPU v5e spec has no vector unit) leaves that work *unpriced*: the bound
    counts it as zero time and the report lists it, like the compute of opaque nodes.

The model assumes each kind of work runs on its own unit, units concurrently; splitting one
kind across two units at once (a matmul on tensor and CUDA cores together) is not modelled.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from solar_io.dtypes import ALIASES, DTYPES
from solar_io.errors import BoundError
from solar_io.hardware import HardwareSpec

#: Graph dtype -> spec dtype class (``int``: no published rate).
CLASS_OF: dict[str, str] = {
    "fp64": "fp64", "fp32": "fp32", "tf32": "tf32", "bf16": "bf16", "fp16": "fp16",
    "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "mxfp8": "fp8", "fp6_e2m3": "fp6", "fp6_e3m2": "fp6",
    "fp4_e2m1": "fp4", "mxfp4": "fp4", "nvfp4": "fp4", "int8": "int8", "uint8": "int8", "int4": "int4",
    "int16": "int", "int32": "int", "int64": "int", "bool": "int",
}

#: Spec classes whose values hold every value of a class exactly: where its vector and
#: transcendental work may run (the class itself first).
HOLDS: dict[str, tuple[str, ...]] = {
    "fp64": ("fp64",),
    "fp32": ("fp32", "fp64"),
    "tf32": ("tf32", "fp32", "fp64"),
    "bf16": ("bf16", "fp32", "fp64"),
    "fp16": ("fp16", "fp32", "fp64"),
    "fp8": ("fp8", "fp16", "bf16", "fp32", "fp64"),
    "fp6": ("fp6", "fp8", "fp16", "bf16", "fp32", "fp64"),
    "fp4": ("fp4", "fp6", "fp8", "fp16", "bf16", "fp32", "fp64"),
    "int8": ("int8", "fp16", "bf16", "fp32", "fp64"),
    "int4": ("int4", "int8", "fp16", "bf16", "fp32", "fp64"),
}

CLASSES: tuple[str, ...] = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8", "int4")
_FAMILY_RANK = {"float": 0, "int": 1, "uint": 1, "bool": 2}

MATRIX, VECTOR, SPECIAL = 0, 1, 2  # indices of work kinds in Plan.routes
WORK_KINDS = ("matrix", "vector", "transcendental")


@dataclass(frozen=True, slots=True)
class Route:
    """One peak of the chip: ``unit`` ('matrix', 'vector', 'special') at dtype ``dtype``."""

    unit: str
    dtype: str
    peak: float

    @property
    def key(self) -> str:
        """The resource name, e.g. ``matrix/bf16``."""
        return f"{self.unit}/{self.dtype}"


@dataclass(frozen=True, slots=True)
class Plan:
    """Where each kind of work of one compute dtype runs.

    ``routes[k]`` for k in MATRIX, VECTOR, SPECIAL (transcendental work) is a :class:`Route`, a
    string (why it cannot run: an error if the node has such work) or None (the chip publishes no
    peak for that unit: the work is unpriced). ``notes`` are (work kind, remark) pairs about
    fallbacks, reported when the node has work of that kind.
    """

    compute_dtype: str
    routes: tuple[Route | str | None, Route | str | None, Route | str | None]
    notes: tuple[tuple[int, str], ...] = ()


def compute_class(dtypes: Iterable[str]) -> tuple[str, ...]:
    """The spec classes of the widest dtypes among ``dtypes`` (floats before ints before bool)."""
    ds = [DTYPES[d] for d in dtypes]
    if not ds:
        return ()
    best = min(_FAMILY_RANK[d.family] for d in ds)
    ds = [d for d in ds if _FAMILY_RANK[d.family] == best]
    width = max(d.bits for d in ds)
    return tuple(sorted({CLASS_OF[d.name] for d in ds if d.bits == width}))


def _class_name(text: str, what: str) -> str:
    t = text.strip().lower()
    if t in CLASSES:
        return t
    name = ALIASES.get(t, t)
    if name in CLASS_OF and CLASS_OF[name] != "int":
        return CLASS_OF[name]
    raise BoundError(f"--compute-dtype: unknown {what} {text!r}; use one of {', '.join(CLASSES)} "
                     f"(or a graph dtype such as fp8_e4m3)")


def parse_compute_dtype(text: str | Mapping[str, str] | None) -> dict[str, str]:
    """``'bf16'`` -> every node computes at bf16 peaks; ``'fp8=fp16,fp32=tf32'`` -> per class.

    Returns {class or '*': class}. Names are spec classes or graph dtypes (mapped to classes).
    """
    if text is None:
        return {}
    if isinstance(text, Mapping):
        return {("*" if k == "*" else _class_name(k, "dtype")): _class_name(v, "dtype") for k, v in text.items()}
    out: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if "=" in part:
            src, _, dst = part.partition("=")
            out[_class_name(src, "dtype")] = _class_name(dst, "dtype")
        else:
            out["*"] = _class_name(part, "dtype")
    if not out:
        raise BoundError(f"--compute-dtype: nothing given in {text!r}; use e.g. bf16 or fp8=fp16")
    return out


class PeakModel:
    """Routes the work of a compute dtype to the peaks of one chip (see the module docstring)."""

    def __init__(self, spec: HardwareSpec, allow_tf32: bool = True,
                 compute_dtype: Mapping[str, str] | None = None, half_fp32: bool = False) -> None:
        self.spec = spec
        self.allow_tf32 = allow_tf32
        self.half_fp32 = half_fp32 and allow_tf32  # fp32 matrix work at bf16/fp16 peaks too (precision.fp32_at_half)
        self.override = dict(compute_dtype or {})
        self._listed = {dt for peaks in spec.units.values() for dt in peaks}
        self._plans: dict[tuple[str, ...], Plan] = {}

    def plan(self, dtypes: tuple[str, ...]) -> Plan:
        """The plan for a node reading tensors of ``dtypes`` (graph dtype names), cached."""
        plan = self._plans.get(dtypes)
        if plan is None:
            classes = compute_class(dtypes)
            if self.override:
                classes = tuple(sorted({self.override.get(c, self.override.get("*", c)) for c in classes}))
            plan = self._plan_for_classes(classes)
            self._plans[dtypes] = plan
        return plan

    # ------------------------------------------------------------------ routing

    def _best(self, unit: str, dtypes: Iterable[str]) -> Route | None:
        peaks = self.spec.units.get(unit, {})
        best: Route | None = None
        for dt in dtypes:
            p = peaks.get(dt)
            if p is not None and (best is None or p.value > best.peak):
                best = Route(unit, dt, p.value)
        return best

    def _plan_for_classes(self, classes: tuple[str, ...]) -> Plan:
        if not classes:
            return Plan("none", ("the node reads and writes no tensor",) * 3)  # type: ignore[arg-type]
        plans = [self._plan_for_class(c) for c in classes]
        if len(plans) == 1:
            return plans[0]
        routes = []
        for k in (MATRIX, VECTOR, SPECIAL):
            found = [p.routes[k] for p in plans]
            good = [r for r in found if isinstance(r, Route)]
            if good:
                routes.append(max(good, key=lambda r: r.peak))
            elif any(r is None for r in found):
                routes.append(None)
            else:
                routes.append(found[0])
        notes = tuple(dict.fromkeys(n for p in plans for n in p.notes))
        return Plan("/".join(classes), tuple(routes), notes)  # type: ignore[arg-type]

    def _plan_for_class(self, c: str) -> Plan:
        spec = self.spec
        notes: list[tuple[int, str]] = []
        if c == "int":
            vector = self._best("vector", spec.units.get("vector", {}))
            if vector is not None:
                notes.append((VECTOR, f"integer/bool work runs at the fastest vector peak listed ({vector.key}): "
                                      "no integer rate is published"))
            special = self._best("special", spec.units.get("special", {}))
            return Plan(c, (vector, vector, special or vector), tuple(notes))
        if c == "fp6" and "fp6" not in self._listed and "fp8" in self._listed:
            notes.append((-1, "fp6 work uses the fp8 peaks: the chip lists no fp6 peak"))
            c_eff = "fp8"
        else:
            c_eff = c
        if c_eff not in self._listed:
            lacking = (f"chip {spec.name} lists no {c} peak on any unit; map it to a dtype the chip has "
                       f"with --compute-dtype (e.g. --compute-dtype {self._suggest(c)})")
            return Plan(c, (lacking, lacking, lacking))
        has_vector = bool(spec.units.get("vector"))
        vector = self._best("vector", HOLDS[c_eff])
        vector_or: Route | str | None = vector
        if vector is None and has_vector:
            vector_or = f"chip {spec.name} lists no vector peak that holds {c} values"
        elif vector is not None and vector.dtype != c_eff:
            notes.append((VECTOR, f"{c} vector work runs at the {vector.key} peak (the fastest listed that holds "
                                  f"{c} values)"))
        matrix_dtypes = [c_eff] + (["tf32"] if c_eff == "fp32" and self.allow_tf32 else []) + \
            (["bf16", "fp16"] if c_eff == "fp32" and self.half_fp32 else [])
        matrix_or: Route | str | None = self._best("matrix", matrix_dtypes)
        if matrix_or is None:
            matrix_or = vector_or
            if vector is not None:
                notes.append((MATRIX, f"{c} matrix work runs on the vector unit ({vector.key}): the chip lists "
                                      f"no {c} matrix peak"))
        elif c_eff == "fp32" and matrix_or.dtype == "tf32":
            notes.append((MATRIX, "fp32 matrix work runs at the tf32 matrix peak (precision policy fp32->tf32; "
                                  "--strict-fp32 prices it at fp32 peaks)"))
        elif c_eff == "fp32" and matrix_or.dtype in ("bf16", "fp16"):
            notes.append((MATRIX, f"fp32 matrix work runs at the {matrix_or.dtype} matrix peak (the file's precision "
                                  "assumption: 16-bit tensor cores; --strict-fp32 prices it at fp32 peaks)"))
        special: Route | str | None = self._best("special", HOLDS[c_eff])
        if special is None:
            special = vector_or
            if vector is not None:
                notes.append((SPECIAL, f"{c} transcendentals are counted as one vector FLOP each ({vector.key}): "
                                       "the chip lists no applicable special-function peak"))
        return Plan(c, (matrix_or, vector_or, special), tuple(notes))

    def _suggest(self, c: str) -> str:
        for alt in HOLDS.get(c, ())[1:] + ("bf16", "fp16", "fp32"):
            if alt in self._listed:
                return f"{c}={alt}"
        return f"{c}=bf16"
