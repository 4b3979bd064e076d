"""``capture_file``: load an IR program, trace and lift it, validate it, return the Graph.

Program convention (see SPEC.md): the file defines ``model(...)``, whose parameters are
annotated with ``Tensor(...)`` declarations (names, dims, dtype, role, density) and
which returns a tensor, a tuple of tensors or a dict {name: tensor}; Dim sizes come from
``Dim("B", 4)`` declarations at module level; an optional ``get_inputs(rng)`` returns
{parameter name: numpy array} for inputs that random values would not fit (token ids,
masks); the other inputs are random (seeded).
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import os
import sys
import traceback
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np

from ...dtypes import dtype as lookup_dtype
from ...dtypes import numpy_dtype
from ...errors import GraphError
from ...format.validate import validate as validate_graph
from ...graph import Graph, Producer, Validation
from ..common.source_file import file_spec
from .ir import Dim, LoopIRError, Tensor, Value
from .state import using
from .trace import Tracer
from .verify import compare_outputs

DEFAULT_BUDGET = 2 << 30


def _line(e: BaseException) -> str:
    """An exception's message on one line, at most 300 characters."""
    return " ".join(str(e).split())[:300]


def _where(exc: BaseException, path: Path) -> str:
    """``prog.py:LINE`` of the deepest frame of ``exc`` inside the program file."""
    line = None
    for fr in traceback.extract_tb(exc.__traceback__):
        if fr.filename and os.path.abspath(fr.filename) == os.path.abspath(path):
            line = fr.lineno
    return f"{path.name}:{line}" if line else path.name


def load_program(path: Path, sizes: dict[str, int] | None = None):
    """Import the program file as a fresh module; LoopIRError on any failure.

    The module body runs under the Dim size overrides ``sizes``, so that constants the
    program computes at module level with ``size(D)`` (a scale ``1/sqrt(size(E))``, a
    causal density) follow them."""
    if not path.is_file():
        raise LoopIRError(f"{path}: no such file")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    name = f"_solar_io_loopir_prog_{digest[:16]}"
    spec = file_spec(name, path)
    if spec is None or spec.loader is None:
        raise LoopIRError(f"{path.name}: cannot be loaded as a Python module")
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        with using(sizes=dict(sizes or {})):
            spec.loader.exec_module(mod)
    except LoopIRError as e:
        if str(e).startswith(path.name + ":"):
            raise
        raise LoopIRError(f"{_where(e, path)}: {e}") from None
    except SyntaxError as e:
        raise LoopIRError(f"{path.name}:{e.lineno}: syntax error: {e.msg}") from None
    except Exception as e:
        raise LoopIRError(f"{_where(e, path)}: loading the program raised {type(e).__name__}: {_line(e)}") from None
    finally:
        sys.path.remove(str(path.parent))
    if not callable(getattr(mod, "model", None)):
        raise LoopIRError(f"{path.name}: the program defines no model(...) function")
    return mod


def model_params(mod, path: Path) -> dict[str, Tensor]:
    """{parameter name: Tensor declaration} of ``model``."""
    try:
        ann = inspect.get_annotations(mod.model, eval_str=True)
    except Exception as e:
        raise LoopIRError(f"{path.name}: model's annotations do not evaluate: {_line(e)}") from None
    out = {}
    for p in inspect.signature(mod.model).parameters.values():
        spec = ann.get(p.name)
        if not isinstance(spec, Tensor):
            raise LoopIRError(f"{path.name}: model parameter {p.name} needs a Tensor('dims', ...) annotation")
        if spec.role not in ("input", "weight", "constant"):
            raise LoopIRError(f"{path.name}: model parameter {p.name} has role {spec.role}; use input, weight "
                              "or constant")
        out[p.name] = spec
    return out


def make_inputs(mod, params: dict[str, Tensor], sizes: dict[str, int], seed: int, path: Path,
                values: bool = True) -> dict:
    """{name: numpy array}: ``get_inputs(rng)`` values, random values for the rest (with
    ``values=False``, zero-strided placeholders: only the shapes are needed for tracing)."""
    rng = np.random.default_rng(seed)
    given: dict = {}
    if callable(getattr(mod, "get_inputs", None)):
        fn = mod.get_inputs
        try:
            given = fn(rng) if inspect.signature(fn).parameters else fn()
        except LoopIRError:
            raise
        except Exception as e:
            raise LoopIRError(f"{_where(e, path)}: get_inputs raised {type(e).__name__}: {_line(e)}") from None
        if not isinstance(given, dict) or any(k not in params for k in given):
            extra = [k for k in given if k not in params] if isinstance(given, dict) else []
            raise LoopIRError(f"{path.name}: get_inputs must return {{model parameter: array}}"
                              + (f"; unknown names {extra}" if extra else ""))
    out = {}
    for name, spec in params.items():
        dt = spec.dtype or "fp32"
        if name in given and spec.value is not None:
            raise LoopIRError(f"{path.name}: {name} is a constant with value {spec.value}; get_inputs must not "
                              "give it")
        if name in given:
            arr = np.asarray(given[name])
            if arr.ndim != len(spec.dims):
                raise LoopIRError(f"{path.name}: get_inputs()[{name!r}] has shape {list(arr.shape)}, declared "
                                  f"dims {','.join(spec.dims)}")
            out[name] = arr.astype(numpy_dtype(dt), copy=False)
            continue
        shape = []
        for d in spec.dims:
            if d not in sizes:
                raise LoopIRError(f"{path.name}: dim {d} of model parameter {name} has no size; declare "
                                  f"Dim('{d}', size) or return {name} from get_inputs()")
            shape.append(sizes[d])
        fam = lookup_dtype(dt).family
        if spec.value is not None:
            out[name] = np.full(shape, spec.value, dtype=numpy_dtype(dt))
        elif not values:
            out[name] = np.broadcast_to(np.zeros((), dtype=numpy_dtype(dt)), shape)
        elif fam == "float":
            a = rng.standard_normal(shape)
            if spec.role != "input" and shape:
                a = a / np.sqrt(max(shape))
            out[name] = a.astype(numpy_dtype(dt))
        elif fam == "bool":
            out[name] = rng.random(shape) < (spec.density or 0.5)
        else:
            out[name] = rng.integers(0, 2, size=shape).astype(np.int64)
    return out


def _outputs(res, path: Path) -> dict[str, Value]:
    if isinstance(res, Value):
        return {res.name or "y": res}
    if isinstance(res, (tuple, list)) and res and all(isinstance(v, Value) for v in res):
        return {v.name or f"y{i}": v for i, v in enumerate(res)}
    if isinstance(res, dict) and res and all(isinstance(v, Value) for v in res.values()):
        return dict(res)
    raise LoopIRError(f"{path.name}: model must return a tensor, a tuple of tensors or a dict of tensors, "
                      f"got {type(res).__name__}")


def run_model(mod, params: dict[str, Tensor], arrays: dict, path: Path, *, tracer: Tracer | None, jit: bool,
              sizes: dict[str, int]) -> dict[str, Value]:
    """Run ``model`` (executing, or tracing into ``tracer``); its outputs by name."""
    with using(tracer=tracer, jit=jit, sizes=sizes):
        if tracer is not None:
            args = {n: tracer.input(n, s.dims, arrays[n].shape, s.dtype or "fp32", s.role, s.density, s.value,
                                   s.generated)
                    for n, s in params.items()}
        else:
            args = {n: Value(s.dims, arrays[n].shape, s.dtype or "fp32", data=arrays[n], density=s.density)
                    for n, s in params.items()}
        try:
            res = mod.model(**args)
        except LoopIRError as e:
            if str(e).startswith(path.name + ":"):
                raise
            raise LoopIRError(f"{_where(e, path)}: {e}") from None
        except Exception as e:
            what = "tracing" if tracer is not None else "running"
            raise LoopIRError(f"{_where(e, path)}: {what} model raised {type(e).__name__}: {_line(e)}") from None
    return _outputs(res, path)


def trace_program(mod, params: dict[str, Tensor], dims: dict[str, int], seed: int, path: Path,
                  producer: Producer, name: str, values: bool) -> tuple[Graph, dict, dict[str, Value], dict]:
    """(graph, input arrays, traced outputs, opaque implementations) of the program at Dim
    sizes ``dims``."""
    with using(sizes=dims):
        arrays = make_inputs(mod, params, dims, seed, path, values=values)
    tracer = Tracer()
    outs = run_model(mod, params, arrays, path, tracer=tracer, jit=False, sizes=dims)
    try:
        g = tracer.finish(outs, name, producer)
    except LoopIRError as e:
        raise LoopIRError(f"{path.name}: {e}") from None
    issues = [i for i in validate_graph(g) if i.severity == "error"]
    if issues:
        raise LoopIRError(f"{path.name}: the lifted graph is invalid: {GraphError(issues).args[0]}")
    return g, arrays, outs, tracer.opaque


def program_sizes(mod, sizes: dict[str, int] | None = None, path: Path | None = None,
                  what: str = "sizes") -> dict[str, int]:
    """{dim name: size}: the module's ``Dim`` declarations with a size, overridden by ``sizes``
    (LoopIRError for a name the program declares no Dim of: a typo would be ignored)."""
    declared = {v.name: v.size for v in vars(mod).values() if isinstance(v, Dim)}
    unknown = sorted(set(sizes or {}) - set(declared))
    if unknown:
        where = f"{path.name}: " if path else ""
        raise LoopIRError(f"{where}{what} name dim {unknown[0]}, which the program does not declare (its Dims: "
                          f"{', '.join(sorted(declared))})")
    dims = {k: n for k, n in declared.items() if n is not None}
    dims.update(sizes or {})
    return dims


def resolve_jit(jit: bool | None) -> bool:
    """``jit`` as asked; None: numba unless SOLAR_IO_LOOPIR_NO_JIT=1 or numba is missing
    (then plain Python, with a warning)."""
    if jit is not None:
        return jit
    if os.environ.get("SOLAR_IO_LOOPIR_NO_JIT", "") not in ("", "0"):
        return False
    if importlib.util.find_spec("numba") is None:
        warnings.warn("numba is not installed: loop-IR kernels run in plain Python (slow); "
                      "pip install numba", stacklevel=3)
        return False
    return True


def capture_file(path: Path | str, *, validate: bool = True, strict: bool = False, jit: bool | None = None,
                 seed: int = 0, sizes: dict[str, int] | None = None, validate_sizes: dict[str, int] | None = None,
                 validate_budget: int = DEFAULT_BUDGET, name: str | None = None, **options) -> Graph:
    """Trace and lift the IR program at ``path`` into a validated einsum Graph.

    ``validate``: run the program (numba when ``jit``, else plain Python; None: numba when
    installed and SOLAR_IO_LOOPIR_NO_JIT is not set) and the lifted
    graph (reference executor) on the same seeded inputs and record the comparison;
    ``strict``: raise when they differ; ``sizes``: Dim sizes overriding the program's;
    ``validate_sizes``: smaller Dim sizes to validate at (the graph keeps its own; the file
    records them as ``reduced_ranks``); ``validate_budget``: bytes the validation may hold,
    else it is skipped with the reason; ``name``: the graph name (default: the file's
    stem). Other options (those of other frontends) are ignored.
    """
    path = Path(path)
    jit = resolve_jit(jit) if validate else False
    data = path.read_bytes() if path.is_file() else b""
    mod = load_program(path, sizes)
    params = model_params(mod, path)
    dims = program_sizes(mod, sizes, path)
    program_sizes(mod, validate_sizes, path, "validate_sizes")
    from ... import __version__

    producer = Producer(tool_version=__version__, frontend="loopir", source=path.name,
                        source_sha256=hashlib.sha256(data).hexdigest())
    name = name or path.stem
    reduced = bool(validate and validate_sizes)
    g, arrays, outs, impls = trace_program(mod, params, dims, seed, path, producer, name,
                                           values=validate and not reduced)
    if not validate:
        return replace(g, validation=skipped("validation not requested"))
    vg, vdims, reduced_ranks = g, dims, ()
    if reduced:
        vdims = {**dims, **validate_sizes}
        mod = load_program(path, vdims)  # module-level size(D) constants at the validation sizes
        params = model_params(mod, path)
        vg, arrays, outs, impls = trace_program(mod, params, vdims, seed, path, producer, name, values=False)
        try:
            reduced_ranks = reduced_map(g, vg)
        except LoopIRError as e:
            return replace(g, validation=skipped(f"cannot validate at validate_sizes: {e}"))
    need = budget_bytes(vg)
    if need > validate_budget:
        return replace(g, validation=skipped(
            f"validation would hold about {need / 2**30:.1f} GiB, over the budget of {validate_budget / 2**30:.1f} "
            "GiB; give smaller validate_sizes"))
    if reduced:
        with using(sizes=vdims):
            arrays = make_inputs(mod, params, vdims, seed, path)
    ran = run_model(mod, params, arrays, path, tracer=None, jit=jit, sizes=vdims)
    v = compare_outputs(vg, arrays, dict(zip(outs, ran.values(), strict=True)), seed, jit, impls)
    v = replace(v, reduced_ranks=reduced_ranks)
    if strict and v.status != "passed":
        raise LoopIRError(f"{path.name}: validation failed: {v.reason}")
    return replace(g, validation=v)


def skipped(reason: str) -> Validation:
    return Validation(status="skipped", method="none", reason=reason)


def budget_bytes(g: Graph) -> int:
    """Bytes the validation holds at most: every tensor at its executing width, twice
    (program and reference executor)."""
    total = 0
    for t in g.tensors:
        n = 1
        for d in g.shape(t.name):
            n *= d
        total += n * np.dtype(numpy_dtype(t.dtype)).itemsize
    return 2 * total


def reduced_map(full: Graph, small: Graph) -> tuple[tuple[str, int], ...]:
    """{rank of ``full``: its size in ``small``} for the ranks that shrank; the two traces
    must have the same structure (same tensors and nodes)."""
    def names(g: Graph) -> list[str]:
        return [t.name for t in g.tensors if t.value is None]  # immediates may depend on sizes (1/D)

    if names(full) != names(small) or [
            (n.name, n.kind, n.map, n.reduce) for n in full.nodes] != [
            (n.name, n.kind, n.map, n.reduce) for n in small.nodes]:
        raise LoopIRError("the program builds a different graph at those sizes")
    size: dict[str, int] = {}
    pairs = [(full.tensor_map[t.name].ranks, small.shape(t.name)) for t in small.tensors if t.value is None]
    pairs += [(a.space, tuple(small.rank_sizes[r] for r in b.space)) for a, b in zip(full.nodes, small.nodes,
                                                                                       strict=True)]
    for ranks, shape in pairs:
        for r, n in zip(ranks, shape, strict=True):
            if size.setdefault(r, n) != n:
                raise LoopIRError(f"rank {r} takes two sizes ({size[r]}, {n})")
    full_sizes = full.rank_sizes
    bigger = [r for r, n in size.items() if n > full_sizes[r]]
    if bigger:
        raise LoopIRError(f"validate_sizes make rank {bigger[0]} larger than the graph's")
    return tuple((r, size[r]) for r, _ in full.ranks if r in size and size[r] != full_sizes[r])
