"""Kernel execution: ``KernelIR`` -> Python source -> a numba ``njit`` or plain function.

The generated function takes every tensor parameter (inputs, outputs, temps: numpy
arrays, outputs pre-filled with the identity of their reduction), then the scalar
parameters, then one size per loop dimension, and runs the loop nests as written. The
outermost loop of a nest runs with ``prange`` when its Dim is ``parallel`` and every
store of the nest indexes it (no reduction across iterations). Reads of a tensor
declared with ``fill`` are guarded (every dim): outside the tensor they give the fill value.

Compiled functions are shared by source text: kernels reloaded from the same program
compile once per process; with numba the source is also written to a cache directory
so that numba's on-disk cache serves later processes.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from ...affine import AffineExpr
from .ir import LoopIRError
from .kir import PARAM
from .parse import Const, KernelIR, Op, Read, ScalarArg
from .scalars import PURE_MATH, code_of

_COMPILED: dict[tuple[str, bool], Callable] = {}


def _idx(e: AffineExpr) -> str:
    var = {d: (f"s_{d[len(PARAM):]}" if d.startswith(PARAM) else f"i_{d}") for d, _ in e.terms}
    parts = [(var[d] if c == 1 else f"{c} * {var[d]}") for d, c in e.terms]
    if e.const or not parts:
        parts.append(str(e.const))
    return " + ".join(parts).replace("+ -", "- ")


def _float(v: float) -> str:
    if math.isinf(v):
        return "math.inf" if v > 0 else "(-math.inf)"
    if math.isnan(v):
        return "math.nan"
    return repr(float(v))


def _expr(k: KernelIR, e) -> str:
    if isinstance(e, Const):
        return _float(e.value)
    if isinstance(e, ScalarArg):
        return f"s_{e.param}"
    if isinstance(e, Read):
        idx = [_idx(x) for x in e.index]
        ref = f"t_{e.param}[{', '.join(idx)}]" if idx else f"t_{e.param}[()]"
        spec = k.param(e.param).spec
        if spec.fill is None:
            return ref
        conds = [f"0 <= {s} < t_{e.param}.shape[{d}]" for d, s in enumerate(idx)]
        return f"({ref} if ({' and '.join(conds)}) else {_float(spec.fill)})" if conds else ref
    assert isinstance(e, Op)
    return code_of(e.op, [_expr(k, a) for a in e.args])


def loop_dims(k: KernelIR) -> tuple[str, ...]:
    """Every loop dimension of the kernel, in first-use order."""
    return tuple(dict.fromkeys(d for n in k.nests for d in n.dims))


def tensor_params(k: KernelIR) -> tuple[str, ...]:
    return tuple(p.name for p in k.params if p.kind != "scalar")


def scalar_params(k: KernelIR) -> tuple[str, ...]:
    return tuple(p.name for p in k.params if p.kind == "scalar")


def generate(k: KernelIR) -> tuple[str, bool]:
    """The source of ``def kernel_fn(...)`` and whether it uses prange."""
    args = [f"t_{p}" for p in tensor_params(k)] + [f"s_{p}" for p in scalar_params(k)] + [
        f"n_{d}" for d in loop_dims(k)]
    lines = [f"def kernel_fn({', '.join(args)}):"]
    par_any = False
    for nest in k.nests:
        ind = "    "
        for depth, (d, obj) in enumerate(zip(nest.dims, nest.dim_objs, strict=True)):
            par = depth == 0 and obj.parallel and all(d in s.dims for s in nest.stores)
            par_any = par_any or par
            lines.append(f"{ind}for i_{d} in {'prange' if par else 'range'}(n_{d}):")
            ind += "    "
        for st in nest.stores:
            tgt = f"t_{st.param}[{', '.join(f'i_{d}' for d in st.dims)}]" if st.dims else f"t_{st.param}[()]"
            val = _expr(k, st.expr)
            if st.reduce == "none":
                lines.append(f"{ind}{tgt} = {val}")
            elif st.reduce == "add":
                lines.append(f"{ind}{tgt} += {val}")
            elif st.reduce == "mul":
                lines.append(f"{ind}{tgt} *= {val}")
            else:
                lines.append(f"{ind}{tgt} = {st.reduce}({tgt}, {val})")
    return "\n".join(lines) + "\n", par_any


def _cache_dir() -> Path | None:
    base = os.environ.get("SOLAR_IO_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "solar-io")
    path = Path(base) / "loopir"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return path if os.access(path, os.W_OK) else None


def _from_file(src: str, digest: str) -> Callable | None:
    """``kernel_fn`` imported from a cached module file (so numba can cache to disk), or None."""
    d = _cache_dir()
    if d is None:
        return None
    path = d / f"k_{digest}.py"
    text = "import math\n\nimport numpy as np\nfrom numba import prange\n\n\n" + src
    try:
        if not path.exists() or path.read_text() != text:
            fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.replace(tmp, path)
        spec = importlib.util.spec_from_file_location(f"_solar_io_loopir_k_{digest}", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod  # numba's cache re-imports the module by name
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
        return mod.kernel_fn
    except (OSError, SyntaxError):
        return None


def compile_kernel(k: KernelIR, jit: bool) -> Callable:
    """The executable function of ``k``: numba-compiled (``jit``) or plain Python."""
    src, par = generate(k)
    digest = hashlib.sha256(src.encode()).hexdigest()[:24]
    key = (digest, jit)
    fn = _COMPILED.get(key)
    if fn is not None:
        return fn
    if jit:
        try:
            import numba
        except ImportError:
            raise LoopIRError("executing kernels with jit needs numba (pip install numba); or run without jit "
                              "(--no-jit / jit=False)") from None
        py = _from_file(src, digest)
        cache = py is not None
        if py is None:
            ns: dict = {"math": math, "prange": numba.prange}
            exec(compile(src, f"<loopir kernel {k.name}>", "exec"), ns)
            py = ns["kernel_fn"]
        fn = numba.njit(parallel=par, error_model="numpy", cache=cache, fastmath=False)(py)
    else:
        ns = {"math": PURE_MATH, "prange": range}
        exec(compile(src, f"<loopir kernel {k.name}>", "exec"), ns)
        fn = ns["kernel_fn"]
    _COMPILED[key] = fn
    return fn
