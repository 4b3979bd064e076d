"""Validation per node at reduced sizes, for captures too large to execute whole.

When a graph needs more memory than ``--validate-budget`` to run on the reference executor,
each *distinct* ATen call of the exported program (same op, argument shapes, dtypes and
non-tensor arguments) is checked on its own, the way tests/frontends/torch/test_torch_rules.py checks a rule:
the call alone becomes a one-op program (``loader._FnModule``) that goes through the same
pipeline (export on meta, lowering by the same rule, whole-graph validation against eager
PyTorch on seeded random inputs). Calls whose programs at reduced sizes are one program (the same
op and arguments, shapes that reduce alike: a per-expert loop's calls at the token counts its experts
got) share one check, which is the same program on the same seeded inputs. The pipeline is handed in
(``capture.capture_source``, through
``check.validate_capture``), so this module does not import the capture that calls it.

Sizes are reduced by one map on sizes, ``reduced_size``: a size above ``CAP`` becomes its
largest divisor up to ``CAP`` (or ``CAP`` when it has no divisor of at least ``CAP // 4``), smaller
sizes stay. Equal sizes stay equal, so the shapes of one call still agree (a contraction's
shared dim, a broadcast); divisibility is kept where it can be (heads, groups). Integer
arguments go through the same map first (``expand`` or ``view`` targets), and unchanged if that
does not run. A reshape that splits or merges dims keeps its structure at reduced sizes
(``reshape_reduced``). A call that runs at no reduced shape (a ``view`` whose target mixes sizes) is
checked at its own sizes when that fits the budget and ``FULL_ELEMENTS``, and is reported
unchecked otherwise, with what it raised (random inputs at reduced sizes may be invalid for it, so
an exception here is not a failure of the program). Opaque nodes run the original op during
validation and need no check, nor do calls with no result (export's assertions); ops that
allocate without initialising (``uninit``) have arbitrary values and are not compared.
Integer tensor arguments get values below every size of the call's tensors (valid indexes into
any of them). The shape argument of ``solar_io::specialised_index`` is that of its stored values
(``STORED_SHAPES``) and is not reduced. In-place ops are checked through their out-of-place overload.
"""

from __future__ import annotations

import copy
import operator
import warnings
from collections.abc import Callable
from math import prod
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ...graph import Validation
from ..common.validation import CAP as CAP  # re-exported: the size above which sizes are reduced
from ..common.validation import reduced_size, skipped
from .cpu_kernels import first_line
from .ctx import align_dims
from .loader import Source, _FnModule
from .lower import program_calls
from .nvfp4 import CpuNvfp4
from .uninit import is_uninitialised

if TYPE_CHECKING:
    from .capture import Capture

#: The capture pipeline a one-op program goes through: ``capture.capture_source``'s signature.
Pipeline = Callable[..., "Capture"]

#: A call checked at its own sizes may have at most this many elements in its tensor arguments
#: (a bound on the time of running it: memory alone would admit a vocabulary-sized matmul).
FULL_ELEMENTS = 1 << 25


#: Ops whose integer arguments are the shape (and key) of values stored at capture, not sizes of the
#: call's tensors: mapped to reduced sizes, the one-op program would declare another shape than the
#: stored values have. Their tensor arguments are still reduced.
STORED_SHAPES = frozenset({"solar_io.specialised_index.default"})

#: Ops whose integer argument at this position bounds the values of their integer tensors: the length of
#: ``solar_io::bincount`` (ids at or past it are outside the count, which the graph refuses).
VALUE_BOUNDS = {"solar_io.bincount.default": 2}


def _map_ints(v: Any) -> Any:
    if isinstance(v, bool) or not isinstance(v, int):
        return [_map_ints(x) for x in v] if isinstance(v, (list, tuple)) else v
    return reduced_size(v) if v > 0 else v


class _Call:
    """One ATen call of the program with its tensor arguments replaced by positions."""

    def __init__(self, node: Any):
        self.node = node
        self.tensors: list[Any] = []  # meta values of the tensor arguments, in order

        def strip(v: Any) -> Any:
            if isinstance(v, torch.fx.Node):
                val = v.meta.get("val")
                if not isinstance(val, torch.Tensor):
                    raise ValueError(f"argument {v.name} is not a tensor")
                self.tensors.append(val)
                return _Slot(len(self.tensors) - 1)
            if isinstance(v, (list, tuple)):
                return type(v)(strip(x) for x in v)
            if isinstance(v, torch.device) and v.type == "meta":  # the capture traced on meta
                return torch.device("cpu")
            return v

        self.target = _functional(node.target)
        self.args = strip(tuple(node.args))
        self.kwargs = {k: strip(v) for k, v in node.kwargs.items()}

    def key(self, shapes: list[tuple[int, ...]] | None = None, map_ints: bool = False) -> str:
        """What tells distinct calls apart: the op, its tensors' shapes (its own, or ``shapes``) and dtypes,
        and its other arguments (as the check at ``shapes`` passes them, with ``map_ints``). Two calls with
        one key at their reduced shapes are checked by one program: experts 1 and 17 of 32 selected from a
        weight that reduces to 16 are both ``select(w, 0, 1)`` there."""
        got = [(tuple(t.shape) if shapes is None else shapes[i], str(t.dtype)) for i, t in enumerate(self.tensors)]
        args, kwargs = self._arguments(shapes, map_ints) if shapes is not None else (self.args, self.kwargs)
        return f"{self.node.target}|{got}|{args!r}|{sorted(kwargs.items())!r}"

    def _arguments(self, shapes: list[tuple[int, ...]], map_ints: bool) -> tuple[tuple, dict]:
        """The non-tensor arguments the call is checked with at ``shapes``."""
        if not map_ints:
            return self.args, self.kwargs
        args = _range_ints(self.target, self.args) or _select_ints(self.target, self.args, shapes) \
            or _map_ints(self.args)
        return args, {k: _map_ints(v) for k, v in self.kwargs.items()}

    def program(self, shapes: list[tuple[int, ...]], map_ints: bool) -> tuple[Callable, list[Callable]]:
        """The call as a function of its tensors, and makers of random tensors of ``shapes``."""
        target = self.target
        args, kwargs = self._arguments(shapes, map_ints)

        def fn(*ts: torch.Tensor) -> Any:
            def fill(v: Any) -> Any:
                if isinstance(v, _Slot):
                    return ts[v.i]
                if isinstance(v, (list, tuple)):
                    return type(v)(fill(x) for x in v)
                return v

            return target(*fill(args), **{k: fill(v) for k, v in kwargs.items()})

        dims = [s for shape in shapes for s in shape if s > 0]
        top = max(1, min(dims) if dims else 1)
        at = VALUE_BOUNDS.get(str(self.node.target))
        if at is not None and len(args) > at and isinstance(args[at], int):
            top = max(1, min(top, args[at]))
        makers = [_maker(shape, t.dtype, top) for shape, t in zip(shapes, self.tensors, strict=True)]
        return fn, makers


_ARANGES = ("aten::arange.default", "aten::arange.start", "aten::arange.start_step")


def _range_ints(target: Any, args: tuple) -> tuple | None:
    """An ``arange``'s arguments at the reduced size of its length, or None for other calls.

    Start and step are values, not sizes: they stay; the end moves to give ``reduced_size(n)``
    elements (mapping start and end one by one gives another length, often none).

    >>> _range_ints(torch.ops.aten.arange.start, (8192, 8256)), _range_ints(torch.ops.aten.arange.default, (4096,))
    ((8192, 8208), (16,))
    >>> _range_ints(torch.ops.aten.arange.start_step, (0, 8192, 64))
    (0, 1024, 64)
    """
    name = getattr(getattr(target, "_schema", None), "name", "")
    overload = getattr(target, "_overloadname", "")
    if f"{name}.{overload}" not in _ARANGES:
        return None
    nums = list(args[:3] if overload == "start_step" else args[:2] if overload == "start" else args[:1])
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in nums):
        return None
    start, end, step = (0, nums[0], 1) if overload == "default" else (*nums, 1)[:3]
    n = len(range(start, end, step))
    end = start + reduced_size(n) * step
    kept = (end,) if overload == "default" else (start, end) if overload == "start" else (start, end, step)
    return kept + tuple(args[len(nums):])


def _select_ints(target: Any, args: tuple, shapes: list[tuple[int, ...]]) -> tuple | None:
    """A ``select``'s arguments with its index taken modulo the reduced size of its dim, or None for
    other calls. The index is a position, not a size: mapped as a size it falls outside the reduced dim
    (expert 101 of 128 in 16), and the call was left unchecked.

    >>> _select_ints(torch.ops.aten.select.int, (_Slot(0), 0, 101), [(16, 8)]), \\
    ...     _select_ints(torch.ops.aten.select.int, (_Slot(0), 1, -1), [(16, 8)])
    ((T0, 0, 5), (T0, 1, -1))
    """
    if target is not torch.ops.aten.select.int or len(args) != 3 or not isinstance(args[0], _Slot):
        return None
    dim, index = args[1], args[2]
    shape = shapes[args[0].i]
    if not isinstance(index, int) or not isinstance(dim, int) or not shape:
        return None
    n = shape[dim]
    if n <= 0:
        return None
    return (args[0], dim, index % n if index >= 0 else -((-index - 1) % n) - 1)


#: Ops whose second argument is a target shape of the same elements (a split or merge of dims).
RESHAPES = frozenset({"aten.view.default", "aten._unsafe_view.default", "aten.reshape.default"})


def reshape_reduced(call: _Call) -> tuple[_Call, list[tuple[int, ...]]] | None:
    """A reshape (``RESHAPES``) at reduced sizes that keep its structure, or None.

    Mapping input and target sizes alike breaks a reshape that splits or merges dims (a
    ``(1, 4096, 4096)`` viewed as ``(1, 4096, 32, 128)`` becomes ``(1, 16, 16)`` to ``(1, 16, 16, 16)``).
    Here the dims are grouped into runs of equal product (``ctx.align_dims``); a dim kept whole is
    reduced on both sides, the dims a group splits into (or merges from) are reduced and the
    single dim on the other side is their product: the same split or merge, at small sizes.

    >>> g = torch.fx.Graph(); x = g.placeholder("x"); x.meta["val"] = torch.empty(1, 4096, 4096, device="meta")
    >>> call, shapes = reshape_reduced(_Call(g.call_function(torch.ops.aten.view.default, (x, [1, 4096, 32, 128]))))
    >>> shapes, call.args[1]
    ([(1, 16, 256)], [1, 16, 16, 16])
    """
    if str(call.node.target) not in RESHAPES or len(call.tensors) != 1 or len(call.args) != 2 or call.kwargs:
        return None
    xs = [int(s) for s in call.tensors[0].shape]
    target = call.args[1]
    if not isinstance(target, (list, tuple)) or not all(isinstance(s, int) and not isinstance(s, bool)
                                                        for s in target):
        return None
    ys = list(target)
    if ys.count(-1) == 1:
        known = prod(s for s in ys if s != -1)
        ys[ys.index(-1)] = prod(xs) // known if known else 0
    if prod(xs) != prod(ys) or 0 in xs or any(s < 0 for s in ys):
        return None
    small_x, small_y = list(xs), list(ys)
    for (i0, i1), (j0, j1) in align_dims(xs, ys):
        if i1 - i0 > 1 and j1 - j0 > 1:  # many dims to many: no single side to take the product
            return None
        if i1 - i0 == 1 and j1 - j0 == 1:
            small_x[i0] = small_y[j0] = reduced_size(xs[i0])
        elif i1 - i0 == 1:
            small_y[j0:j1] = [reduced_size(s) for s in ys[j0:j1]]
            small_x[i0] = prod(small_y[j0:j1])
        elif j1 - j0 == 1:
            small_x[i0:i1] = [reduced_size(s) for s in xs[i0:i1]]
            small_y[j0] = prod(small_x[i0:i1])
    if small_x == xs:
        return None
    aligned = copy.copy(call)
    aligned.args = (call.args[0], type(target)(small_y))
    return aligned, [tuple(small_x)]


def _functional(target: Any) -> Any:
    """The out-of-place overload of an in-place op (``add_.Tensor`` -> ``add.Tensor``): checked on its
    own, an in-place op would change its input before the graph reads it."""
    schema = getattr(target, "_schema", None)
    if schema is None or not schema.is_mutable:
        return target
    packet = getattr(torch.ops.aten, schema.name.split("::")[-1].rstrip("_"), None)
    functional = getattr(packet, target._overloadname, None) if packet is not None else None
    if functional is None or functional._schema.is_mutable:
        raise ValueError(f"{target} mutates its arguments")
    return functional


class _Slot:
    """The position of a tensor argument."""

    def __init__(self, i: int):
        self.i = i

    def __repr__(self) -> str:
        return f"T{self.i}"


#: Packed dtypes with no arithmetic (not even a fill): random bytes, viewed as the dtype.
PACKED = tuple(d for d in (getattr(torch, "float4_e2m1fn_x2", None),) if d is not None)


def _maker(shape: tuple[int, ...], dtype: torch.dtype, top: int) -> Callable[[], torch.Tensor]:
    if dtype in PACKED:  # two fp4 codes a byte: every byte is a valid pair
        return lambda: torch.randint(0, 256, shape, dtype=torch.uint8).view(dtype)
    if dtype == torch.bool:
        return lambda: torch.rand(shape) > 0.5
    if dtype.is_complex:  # normal real and imaginary parts (an FFT's spectrum, a complex product)
        return lambda: torch.randn(shape, dtype=dtype)
    if not dtype.is_floating_point:
        return lambda: torch.randint(0, top, shape, dtype=dtype)
    return lambda: torch.randn(shape).to(dtype)


def _check(call: _Call, shapes: list[tuple[int, ...]], map_ints: bool, seed: int,
           pipeline: Pipeline) -> Validation | Exception:
    """The validation record of the call at ``shapes``; what it raised when it does not run there."""

    fn, makers = call.program(shapes, map_ints)
    try:
        torch.manual_seed(seed)
        with torch.no_grad(), CpuNvfp4():  # as validation runs it (NVFP4 _scaled_mm has no CPU kernel)
            fn(*(m() for m in makers))  # does the call run at these shapes at all?
    except Exception as e:
        return e
    name = f"{call.node.name}.py"
    src = Source(Path(name), name, "0" * 64, lambda: _FnModule(fn), lambda: [m() for m in makers])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return pipeline(src, validate=True, seed=seed).graph.validation
    except Exception as e:  # the one-op program does not capture: this call is not checked
        return Validation("skipped", "none", reason=f"{type(e).__name__}: {str(e)[:120]}")


def _returns_nothing(target: Any) -> bool:
    """An op whose schema returns nothing (``_assert_async``, ``_assert_tensor_metadata``): no result to
    compare; run on random inputs at reduced sizes its check may even raise, and it was listed unchecked."""
    schema = getattr(target, "_schema", None)
    return schema is not None and not schema.returns


def validate_per_node(cap: Capture, *, seed: int, budget: int, why: str, pipeline: Pipeline) -> Validation:
    """The validation record of ``cap`` from per-node checks at reduced sizes (module docstring);
    ``pipeline`` captures each one-op program (``capture.capture_source``)."""
    opaque = {name for name, _, _ in cap.lowered.opaque}
    calls: dict[str, _Call] = {}
    counts: dict[str, int] = {}
    unchecked: list[str] = []
    arbitrary: set[str] = set()
    empty: set[str] = set()  # calls on tensors with no elements: no value to compare
    for node in program_calls(cap.program.graph_module):  # no_grad bodies by their nodes
        if node.target is operator.getitem or node.name in opaque \
                or node.meta.get("val", 0) is None or _returns_nothing(node.target):  # export's assertions
            continue
        if is_uninitialised(node.target):  # its values are whatever the memory held: nothing to compare
            arbitrary.add(str(node.target))
            continue
        try:
            call = _Call(node)
        except ValueError:
            unchecked.append(str(node.target))
            continue
        outs = node.meta.get("val")
        outs = outs if isinstance(outs, (list, tuple)) else [outs]
        if any(0 in tuple(t.shape) for t in call.tensors) or \
                any(isinstance(v, torch.Tensor) and v.numel() == 0 for v in outs):  # an index that selects nothing
            empty.add(str(node.target))
            continue
        k = call.key()
        calls.setdefault(k, call)
        counts[k] = counts.get(k, 0) + 1
    reduced = full = 0
    worst = 0.0
    shared: dict[str, Validation] = {}  # reduced key -> the record of the check run at those reduced sizes
    for call in calls.values():
        small = [tuple(reduced_size(int(s)) for s in t.shape) for t in call.tensors]
        mapped = str(call.node.target) not in STORED_SHAPES
        same = call.key(small, mapped)  # calls whose reduced programs are one program (MoE experts' sizes, indexes)
        record = shared.get(same)
        if record is None:
            record = _check(call, small, mapped, seed, pipeline)
            if isinstance(record, Validation) and record.status != "skipped":
                shared[same] = record
        if isinstance(record, Exception):
            record = _check(call, small, False, seed, pipeline)
        if isinstance(record, Exception) and (aligned := reshape_reduced(call)) is not None:
            record = _check(aligned[0], aligned[1], False, seed, pipeline)
        if isinstance(record, Validation) and record.status != "skipped":
            reduced += 1
        else:
            own = [tuple(int(s) for s in t.shape) for t in call.tensors]
            elements = sum(prod(s) for s in own)
            fits = elements <= FULL_ELEMENTS and 3 * 8 * elements <= budget
            if fits:
                record = _check(call, own, False, seed, pipeline)
            if isinstance(record, Exception):  # on random inputs: not a failure of the program
                unchecked.append(f"{call.node.target} (raised {type(record).__name__}: {first_line(record, 80)})")
                continue
            if record.status == "skipped":
                unchecked.append(str(call.node.target))
                continue
            full += 1
        if record.status == "failed":
            return Validation("failed", "reference-executor per node", record.reference, seed,
                              reason=f"{why}; per-node check of {call.node.target} (node {call.node.name}) "
                                     f"failed: {record.reason}")
        worst = max(worst, record.max_abs_error or 0.0)
    checked = reduced + full
    summary = (f"validated per node at reduced sizes: {checked} of {len(calls)} distinct nodes "
               f"({sum(counts.values())} calls; {reduced} at reduced sizes, {full} at their own)")
    if unchecked:
        summary += f"; unchecked: {', '.join(sorted(set(unchecked)))}"
    if arbitrary:
        summary += f"; not compared (uninitialised memory): {', '.join(sorted(arbitrary))}"
    if empty:
        summary += f"; not compared (empty tensors, no values): {', '.join(sorted(empty))}"
    if not checked:
        return skipped(f"{why}; {summary}")
    ranks = tuple((r, reduced_size(s)) for r, s in cap.graph.ranks if reduced_size(s) < s)
    return Validation("passed", "reference-executor per node", f"torch {torch.__version__} cpu eager", seed,
                      max_abs_error=worst, reduced_ranks=ranks, reason=f"{why}; {summary}")
