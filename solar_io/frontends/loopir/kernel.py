"""``@kernel``: a checked loop-nest function that executes (numba / Python) or traces."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ...dtypes import numpy_dtype
from .codegen import compile_kernel, loop_dims, scalar_params, tensor_params
from .ir import LoopIRError, Value, is_float
from .kir import bind_params
from .parse import KernelIR, parse_kernel, reads_of
from .state import call_site, mode

_IDENTITY = {"none": 0.0, "add": 0.0, "mul": 1.0, "max": -np.inf, "min": np.inf}


@dataclass
class Binding:
    """One call: argument values, scalar values, dim sizes, and the border each padded read needs."""

    values: dict[str, Value]
    scalars: dict[str, float]
    sizes: dict[str, int]
    pads: dict[tuple[str, int], tuple[int, int]]
    site: str


def array_dtype(a: np.ndarray) -> str:
    """The file dtype of a numpy array passed where a declaration gives none."""
    k = a.dtype.kind
    if k == "b":
        return "bool"
    if k in "iu":
        return "int64" if a.dtype.itemsize == 8 else "int32"
    return "fp64" if a.dtype == np.float64 else "fp32"


class Kernel:
    """A function of loop nests checked by ``parse_kernel``; call it from ``model``."""

    def __init__(self, fn):
        self.fn = fn
        self.ir: KernelIR = parse_kernel(fn)
        self.name = self.ir.name
        self.__doc__ = fn.__doc__
        self._inputs = [p for p in self.ir.params if p.kind in ("in", "scalar")]
        self._reads = [r for n in self.ir.nests for s in n.stores for r in reads_of(s.expr)]
        self._reduce = {s.param: s.reduce for n in self.ir.nests for s in n.stores}
        self._dim_objs = {d.name: d for n in self.ir.nests for d in n.dim_objs}

    @cached_property
    def loop_dims(self) -> tuple[str, ...]:
        return loop_dims(self.ir)

    def __repr__(self) -> str:
        return f"<loopir kernel {self.name} ({self.ir.file}:{self.ir.line})>"

    def __call__(self, *args, **kwargs):
        b = self.bind(args, kwargs, call_site())
        m = mode()
        if m.tracer is not None:
            return m.tracer.kernel_call(self, b)
        return self.execute(b, m.jit)

    # ------------------------------------------------------------------ binding
    def bind(self, args: tuple, kwargs: dict, site: str) -> Binding:
        where = f"{site}: kernel {self.name}"
        if len(args) > len(self._inputs):
            raise LoopIRError(f"{where}: takes {len(self._inputs)} arguments, got {len(args)}")
        given = {p.name: a for p, a in zip(self._inputs, args, strict=False)}
        dims_kw: dict[str, int] = {}
        for key, v in kwargs.items():
            if any(p.name == key for p in self._inputs):
                if key in given:
                    raise LoopIRError(f"{where}: argument {key} given twice")
                given[key] = v
            elif isinstance(v, int) and not isinstance(v, bool) and v > 0:
                dims_kw[key] = v
            else:
                raise LoopIRError(f"{where}: unknown argument {key}={v!r} (keywords are parameters or Dim sizes)")
        tracing = mode().tracer is not None
        values: dict[str, Value] = {}
        scalars: dict[str, float] = {}
        sizes: dict[str, int] = dict(dims_kw)
        origin: dict[str, str] = {d: "keyword" for d in dims_kw}
        for p in self._inputs:
            if p.name not in given:
                raise LoopIRError(f"{where}: missing argument {p.name}")
            v = given[p.name]
            if p.kind == "scalar":
                if isinstance(v, Value) or not isinstance(v, (int, float)):
                    raise LoopIRError(f"{where}: {p.name} is a scalar parameter, got {type(v).__name__}")
                if p.name in self.ir.index_params:
                    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                        raise LoopIRError(f"{where}: {p.name} is an int parameter used as an index, got {v!r}")
                    scalars[p.name] = int(v)
                else:
                    scalars[p.name] = float(v)
                continue
            if isinstance(v, np.ndarray) and not tracing:
                v = Value(p.spec.dims, v.shape, p.spec.dtype or array_dtype(v), data=v)
            if not isinstance(v, Value):
                raise LoopIRError(f"{where}: {p.name} must be a tensor (a model input or a kernel result), got "
                                  f"{type(v).__name__}")
            if len(v.shape) != len(p.spec.dims):
                raise LoopIRError(f"{where}: {p.name} is declared {','.join(p.spec.dims) or '(scalar)'} "
                                  f"({len(p.spec.dims)} dims), got shape {list(v.shape)}")
            for d, n in zip(p.spec.dims, v.shape, strict=True):
                if d in sizes and sizes[d] != n:
                    raise LoopIRError(f"{where}: dim {d} is {sizes[d]} from {origin[d]} but {n} from {p.name} "
                                      f"(shape {list(v.shape)})")
                sizes[d] = n
                origin[d] = p.name
            values[p.name] = v
        overrides = mode().sizes
        for d in self.loop_dims:
            if d not in sizes:
                size = overrides.get(d, self._dim_objs[d].size)
                if size is None:
                    raise LoopIRError(f"{where}: the size of dim {d} is not known; pass {d}=... or declare "
                                      f"Dim('{d}', size)")
                sizes[d] = size
        return Binding(values, scalars, sizes, self._pads(sizes, values, scalars, where), site)

    def _pads(self, sizes: dict[str, int], values: dict[str, Value], scalars: dict, where: str) -> dict:
        pads: dict[tuple[str, int], tuple[int, int]] = {}
        for r in self._reads:
            p = self.ir.param(r.param)
            shape = values[r.param].shape if r.param in values else tuple(sizes[d] for d in p.spec.dims)
            for d, (e, n) in enumerate(zip(r.index, shape, strict=True)):
                e = bind_params(e, scalars)
                lo, hi = e.bounds(sizes)
                if lo >= 0 and hi <= n - 1:
                    continue
                if p.spec.fill is None:
                    raise LoopIRError(f"{where}: {self.ir.file}:{r.line}: index {e} of {r.param} dim {d} "
                                      f"({p.spec.dims[d]}={n}) spans [{lo}, {hi}], outside [0, {n - 1}]; declare "
                                      f"fill=... on {r.param} to read a border (padding)")
                plo, phi = pads.get((r.param, d), (0, 0))
                pads[(r.param, d)] = (max(plo, -lo), max(phi, hi - (n - 1)))
        return pads

    # ------------------------------------------------------------------ results
    def out_dtype(self, name: str, b: Binding) -> str:
        spec = self.ir.param(name).spec
        if spec.dtype is not None:
            return spec.dtype
        ins = [v.dtype for v in b.values.values()]
        return next((d for d in ins if is_float(d)), ins[0] if ins else "fp32")

    def execute(self, b: Binding, jit: bool):
        """Run the kernel on the bound arrays; the outputs as Values."""
        fn = compile_kernel(self.ir, jit)
        arrays = []
        outs = []
        for name in tensor_params(self.ir):
            p = self.ir.param(name)
            if p.kind == "in":
                v = b.values[name]
                arrays.append(np.ascontiguousarray(v.numpy(), dtype=numpy_dtype(v.dtype)))
                continue
            dt = self.out_dtype(name, b)
            npdt = np.dtype(numpy_dtype(dt))
            fill = _IDENTITY[self._reduce[name]]
            if npdt.kind in "iub" and not np.isfinite(fill):
                info = np.iinfo(npdt) if npdt.kind in "iu" else None
                fill = (info.min if fill < 0 else info.max) if info else (fill > 0)
            arr = np.full(tuple(b.sizes[d] for d in p.spec.dims), fill, dtype=npdt)
            arrays.append(arr)
            if p.kind == "out":
                outs.append(Value(p.spec.dims, arr.shape, dt, data=arr, density=p.spec.density))
        try:
            fn(*arrays, *(b.scalars[s] for s in scalar_params(self.ir)), *(b.sizes[d] for d in self.loop_dims))
        except LoopIRError:
            raise
        except Exception as e:
            raise LoopIRError(f"{b.site}: kernel {self.name} failed: {type(e).__name__}: "
                              f"{' '.join(str(e).split())[:300]}") from e
        return outs[0] if len(outs) == 1 else tuple(outs)


def kernel(fn) -> Kernel:
    """Decorator: check ``fn`` against the IR's restrictions (LoopIRError naming the line)."""
    return Kernel(fn)
