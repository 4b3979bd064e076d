"""The lowering context: what a rule sees (``LowerCtx``) and tensor values (``T``).

``LowerCtx`` offers the patterns most rules are made of: broadcasting elementwise maps,
reductions, permutes, reshapes, copies and casts, each emitting nodes through the graph
builder with tensors named after the fx node being lowered.

Its parts live beside it, and their names are re-exported here: torch dtypes as file dtypes
(:mod:`.dtype_map`), bound arguments (``Args``) and source locations (:mod:`.fxnode`), and the
canonical rank names of reshapes and graph inputs (:mod:`.rank_names`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..common.builder import GraphBuilder, access
from .dtype_map import TORCH_COMPLEX as TORCH_COMPLEX
from .dtype_map import TORCH_TO_FILE as TORCH_TO_FILE
from .dtype_map import complex_part as complex_part
from .dtype_map import file_dtype
from .dtype_map import graph_shape as graph_shape
from .dtype_map import touches_complex as touches_complex
from .fxnode import Args as Args
from .fxnode import bind_args as bind_args
from .fxnode import location
from .rank_names import _INPUT_HINTS as _INPUT_HINTS
from .rank_names import _INT_HINTS as _INT_HINTS
from .rank_names import _resolve_shape, reshape_ranks
from .rank_names import align_dims as align_dims


@dataclass(frozen=True, slots=True)
class T:
    """A tensor of the graph being built (by name), as a value of the fx graph."""

    name: str


#: Ops that eager PyTorch runs as views of their input whatever its strides (they raise otherwise).
ALWAYS_VIEWS = frozenset({"aten.view", "aten._unsafe_view", "aten.squeeze", "aten.unsqueeze", "aten.view_as",
                          "aten.unflatten", "aten.alias"})


class LazyArrays(dict):
    """Constant name -> its array, or a function giving it, called when the array is first read: the
    validation reads them, so a capture that skips it never builds a 4096 x 4096 causal mask (0.13 s of
    a Llama-3-70B capture on 2 cores).

    >>> d = LazyArrays(a=lambda: np.ones(2))
    >>> d["a"].tolist(), d.get("b")
    ([1.0, 1.0], None)
    """

    def __getitem__(self, name: str) -> np.ndarray:
        v = super().__getitem__(name)
        if callable(v):
            v = v()
            super().__setitem__(name, v)
        return v

    def get(self, name: str, default: Any = None) -> Any:  # noqa: ANN401
        return self[name] if name in self else default

    def items(self):  # noqa: ANN201 - every array built first
        for name in self:
            self[name]  # noqa: B018
        return super().items()

    def values(self):  # noqa: ANN201
        self.items()
        return super().values()


@dataclass
class LowerCtx:
    """What a rule sees: the builder, the fx node being lowered and node-emitting helpers."""

    b: GraphBuilder
    source_name: str | None = None
    node: Any = None  # the torch.fx.Node being lowered
    op: str = ""
    noncontig: set[str] = field(default_factory=set)
    const_data: dict[str, np.ndarray] = field(default_factory=LazyArrays)
    data_cache: dict[Any, T] = field(default_factory=dict)
    lowered_ops: set[str] = field(default_factory=set)
    opaque_targets: set[Any] = field(default_factory=set)
    #: specialised choice tensors whose values validation takes from the eager run: (tensor, op, result)
    selections: list[tuple[str, str, int]] = field(default_factory=list)
    #: assumptions a rule made that change a number (graph ``assumptions``, format 1.3)
    assumptions: list[Any] = field(default_factory=list)
    #: rules may emit repeated steps as instances of a template (repeat blocks, format 1.4)
    repeat: bool = True

    # ------------------------------------------------------------------ facts
    @property
    def name(self) -> str:
        return self.node.name

    @property
    def location(self) -> str | None:
        return location(self.node, self.source_name)

    def ranks(self, x: T) -> tuple[str, ...]:
        return self.b.ranks(x.name)

    def shape(self, x: T) -> tuple[int, ...]:
        return self.b.shape(x.name)

    def dtype(self, x: T) -> str:
        return self.b.dtype(x.name)

    def out_dtype(self, i: int | None = None) -> str:
        """The dtype torch gives the current node's output (``i``-th of a tuple)."""
        val = self.node.meta.get("val")
        if i is not None:
            val = val[i]
        return file_dtype(val.dtype)

    def out_shape(self, i: int | None = None) -> tuple[int, ...]:
        val = self.node.meta.get("val")
        if i is not None:
            val = val[i]
        return tuple(int(s) for s in val.shape)

    def tensor(self, ranks: Sequence[str], dtype: str, suffix: str | None = None) -> T:
        """A new intermediate named after the current node."""
        return T(self.b.tensor(self.name if suffix is None else f"{self.name}.{suffix}", ranks, dtype))

    def scalar(self, v: float | bool, dtype: str) -> T:
        return T(self.b.constant(f"{self.name}.c", float(v), dtype))

    def index_table(self, arr: np.ndarray | Callable[[], np.ndarray], ranks: Sequence[str], dtype: str,
                    suffix: str = "const", key: Any = None) -> T:
        """A constant whose contents ``arr`` are a function of its indices that the program computes
        where it uses them (a causal mask, an arange, a resampling table): ``generated``, so it moves
        no bytes; ``arr`` feeds the validation. One tensor per ``key``; ``arr`` may be a function
        giving the array, called only when the key has no tensor yet (a 4096 x 4096 causal mask is
        then built once per capture, not once per layer). Program data that lives in memory
        (buffers, lifted constants) is never made here."""
        full_key = (key, tuple(ranks), dtype) if key is not None else None
        if full_key is not None and full_key in self.data_cache:
            return self.data_cache[full_key]
        t = T(self.b.tensor(f"{self.name}.{suffix}", ranks, dtype, "constant", generated=True))
        self.const_data[t.name] = arr  # a function is called when the array is first read (LazyArrays)
        if full_key is not None:
            self.data_cache[full_key] = t
        return t

    # ------------------------------------------------------------------ patterns
    def ew(self, map: str, *xs: T | float | bool, dtype: str | None = None, suffix: str | None = None,
           attrs: dict | None = None) -> T:
        """A broadcasting elementwise einsum (reduce none); scalars become immediate constants."""
        tensors = [x for x in xs if isinstance(x, T)]
        shapes = [self.shape(x) for x in tensors]
        out_shape = _broadcast(shapes)
        nd = len(out_shape)
        if dtype is None:
            data = [x for x in (xs[1:] if map == "where" else xs) if isinstance(x, T)]
            dts = [self.dtype(x) for x in data]
            floats = [d for d in dts if not d.startswith(("int", "uint", "bool"))]
            dtype = floats[0] if floats else dts[0] if dts else "fp32"
            if map in ("eq", "ne", "lt", "le", "gt", "ge", "and", "or", "not"):
                dtype = "bool"
        picked: list[str] = []
        for j in range(nd):
            r = None
            for x, s in zip(tensors, shapes, strict=True):
                k = j - (nd - len(s))
                if k >= 0 and s[k] == out_shape[j]:
                    r = self.ranks(x)[k]
                    break
            picked.append(r if r is not None else self.b.rank("A", out_shape[j]))
        out_ranks = self.b.distinct(picked)
        inputs = []
        for x in xs:
            if not isinstance(x, T):
                x = self.scalar(x, _const_dtype(x, [self.dtype(t) for t in tensors]))
                inputs.append(access(x.name, []))
                continue
            s = self.shape(x)
            off = nd - len(s)
            inputs.append(access(x.name, [out_ranks[off + k] if s[k] == out_shape[off + k] else 0
                                          for k in range(len(s))]))
        out = self.tensor(out_ranks, dtype, suffix)
        self.b.einsum(out.name, self.op, out_ranks, inputs, access(out.name, out_ranks), map, "none",
                      attrs=attrs, location=self.location)
        return out

    def reduce(self, x: T, dims: Sequence[int] | None, keepdim: bool, reduce: str, map: str = "identity",
               dtype: str | None = None, suffix: str | None = None) -> T:
        """Reduce ``x`` over ``dims`` (None: all) with ``reduce``; keepdim keeps size-1 dims."""
        xr = self.ranks(x)
        nd = len(xr)
        dset = set(range(nd)) if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0) \
            else {d % nd for d in ([dims] if isinstance(dims, int) else dims)} if nd else set()
        out_ranks: list[str] = []
        extra: list[str] = []
        for i, r in enumerate(xr):
            if i not in dset:
                out_ranks.append(r)
            elif keepdim:
                u = self.b.rank("U", 1, set(xr) | set(extra))
                extra.append(u)
                out_ranks.append(u)
        out = self.tensor(out_ranks, dtype or self.dtype(x), suffix)
        self.b.einsum(out.name, self.op, list(xr) + extra, [access(x.name, xr)], access(out.name, out_ranks),
                      map, reduce, location=self.location)
        return out

    def permute(self, x: T, perm: Sequence[int], suffix: str | None = None) -> T:
        """A lazy (view) permute of ``x``."""
        xr = self.ranks(x)
        out_ranks = [xr[p % len(xr)] for p in perm]
        out = self.tensor(out_ranks, self.dtype(x), suffix)
        self.b.copy(out.name, self.op, out_ranks, [access(x.name, xr)], access(out.name, out_ranks), view=True,
                    location=self.location)
        moved = [p % len(xr) for p in perm if self.shape(x)[p % len(xr)] != 1]
        if moved != sorted(moved) or x.name in self.noncontig:
            self.noncontig.add(out.name)
        return out

    def reshape(self, x: T, shape: Sequence[int], suffix: str | None = None) -> T:
        """A row-major reshape; a view unless ``x`` is a non-contiguous view (then a copy)."""
        shape = _resolve_shape(shape, self.b.numel(x.name))
        xs, xr = self.shape(x), self.ranks(x)
        if tuple(shape) == xs:
            return x
        out_ranks = reshape_ranks(self.b, xr, xs, shape)
        out = self.tensor(out_ranks, self.dtype(x), suffix)
        view = self._reshape_views(x, tuple(shape), suffix)
        self.b.reshape(out.name, self.op, x.name, out.name, view=view, location=self.location)
        if view and x.name in self.noncontig and not self._out_contiguous(suffix):
            self.noncontig.add(out.name)
        return out

    def _traced_input(self, x: T, suffix: str | None) -> Any:
        """The traced tensor of ``x`` when it is the current node's first argument (else None)."""
        arg = self.node.args[0] if suffix is None and self.node is not None and self.node.args else None
        val = getattr(arg, "meta", {}).get("val") if arg is not None else None
        if val is None or not hasattr(val, "stride") or tuple(int(s) for s in val.shape) != self.shape(x):
            return None
        return val

    def _reshape_views(self, x: T, shape: tuple[int, ...], suffix: str | None) -> bool:
        """Whether eager PyTorch reshapes ``x`` to ``shape`` without copying.

        ``aten.view`` and its kin never copy (they raise instead); a ``reshape`` copies exactly when
        the strides of the traced input admit no view, which ``Tensor.view`` on the traced (fake)
        tensor tells. Without a traced input, a reshape of a non-contiguous view is a copy.
        """
        if x.name not in self.noncontig:
            return True
        if self.op in ALWAYS_VIEWS and suffix is None:
            return True
        val = self._traced_input(x, suffix)
        if val is None:
            return False
        try:
            val.view(shape)
        except (RuntimeError, ValueError):  # fake tensors raise ValueError, real ones RuntimeError
            return False
        return True

    def _out_contiguous(self, suffix: str | None) -> bool:
        """Whether the current node's traced output is contiguous (False when unknown)."""
        val = self.node.meta.get("val") if suffix is None and self.node is not None else None
        return bool(val is not None and hasattr(val, "is_contiguous") and val.is_contiguous())

    def copy(self, x: T, suffix: str | None = None) -> T:
        """A materialised copy of ``x`` (clone, contiguous)."""
        xr = self.ranks(x)
        out = self.tensor(xr, self.dtype(x), suffix)
        self.b.copy(out.name, self.op, xr, [access(x.name, xr)], access(out.name, xr), location=self.location)
        return out

    def cast(self, x: T, dtype: str, suffix: str | None = None) -> T:
        """``x`` converted to ``dtype`` (an identity einsum), or ``x`` itself if it has it."""
        if self.dtype(x) == dtype:
            return x
        return self.ew("identity", x, dtype=dtype, suffix=suffix)


def _const_dtype(x: float | bool, dtypes: list[str]) -> str:
    """The dtype of an immediate scalar next to tensors of ``dtypes``."""
    if isinstance(x, bool):
        return "bool"
    floats = [d for d in dtypes if not d.startswith(("int", "uint", "bool"))]
    if floats:
        return floats[0]
    if isinstance(x, int) and dtypes and dtypes[0] != "bool":
        return dtypes[0]
    return "fp32" if isinstance(x, float) else "int64"


def _broadcast(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """The broadcast of integer ``shapes`` (``torch.broadcast_shapes``'s result, without its cost per call).

    >>> _broadcast([(4, 1, 3), (5, 1)])
    (4, 5, 3)
    """
    nd = max((len(x) for x in shapes), default=0)
    out = [1] * nd
    for x in shapes:
        for i, d in enumerate(x, nd - len(x)):
            if d != 1:
                if out[i] not in (1, d):
                    raise RuntimeError(f"shapes {list(map(list, shapes))} do not broadcast")
                out[i] = d
    return tuple(out)
