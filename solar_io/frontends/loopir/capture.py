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
from pathlib import Path

import numpy as np

from ...dtypes import dtype as lookup_dtype, numpy_dtype
from ...errors import GraphError
from ...graph import Graph, Producer
from ...validate import validate as validate_graph
from .ir import Dim, LoopIRError, Tensor, Value
from .state import using
from .trace import Tracer
from .verify import compare_outputs


def _where(exc: BaseException, path: Path) -> str:
    """``prog.py:LINE`` of the deepest frame of ``exc`` inside the program file."""
    line = None
    for fr in traceback.extract_tb(exc.__traceback__):
        if fr.filename and os.path.abspath(fr.filename) == os.path.abspath(path):
            line = fr.lineno
    return f"{path.name}:{line}" if line else path.name


def load_program(path: Path):
    """Import the program file as a fresh module; LoopIRError on any failure."""
    if not path.is_file():
        raise LoopIRError(f"{path}: no such file")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    name = f"_solar_io_loopir_prog_{digest[:16]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise LoopIRError(f"{path.name}: cannot be loaded as a Python module")
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(mod)
    except LoopIRError:
        raise
    except SyntaxError as e:
        raise LoopIRError(f"{path.name}:{e.lineno}: syntax error: {e.msg}") from None
    except Exception as e:
        raise LoopIRError(f"{_where(e, path)}: loading the program raised {type(e).__name__}: {e}") from None
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
        raise LoopIRError(f"{path.name}: model's annotations do not evaluate: {e}") from None
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


def make_inputs(mod, params: dict[str, Tensor], sizes: dict[str, int], seed: int, path: Path) -> dict:
    """{name: numpy array}: ``get_inputs(rng)`` values, random values for the rest."""
    rng = np.random.default_rng(seed)
    given: dict = {}
    if callable(getattr(mod, "get_inputs", None)):
        fn = mod.get_inputs
        try:
            given = fn(rng) if inspect.signature(fn).parameters else fn()
        except LoopIRError:
            raise
        except Exception as e:
            raise LoopIRError(f"{_where(e, path)}: get_inputs raised {type(e).__name__}: {e}") from None
        if not isinstance(given, dict) or any(k not in params for k in given):
            extra = [k for k in given if k not in params] if isinstance(given, dict) else []
            raise LoopIRError(f"{path.name}: get_inputs must return {{model parameter: array}}"
                              + (f"; unknown names {extra}" if extra else ""))
    out = {}
    for name, spec in params.items():
        dt = spec.dtype or "fp32"
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
        if fam == "float":
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
            args = {n: tracer.input(n, s.dims, arrays[n].shape, s.dtype or "fp32", s.role, s.density)
                    for n, s in params.items()}
        else:
            args = {n: Value(s.dims, arrays[n].shape, s.dtype or "fp32", data=arrays[n], density=s.density)
                    for n, s in params.items()}
        try:
            res = mod.model(**args)
        except LoopIRError:
            raise
        except Exception as e:
            what = "tracing" if tracer is not None else "running"
            raise LoopIRError(f"{_where(e, path)}: {what} model raised {type(e).__name__}: "
                              f"{' '.join(str(e).split())[:300]}") from None
    return _outputs(res, path)


def capture_file(path: Path | str, *, validate: bool = True, strict: bool = False, jit: bool = True,
                 seed: int = 0, sizes: dict[str, int] | None = None, name: str | None = None,
                 **options) -> Graph:
    """Trace and lift the IR program at ``path`` into a validated einsum Graph.

    ``validate``: run the program (numba when ``jit``, else plain Python) and the lifted
    graph (reference executor) on the same seeded inputs and record the comparison;
    ``strict``: raise when they differ; ``sizes``: Dim sizes overriding the program's;
    ``name``: the graph name (default: the file's stem). Other options are ignored.
    """
    path = Path(path)
    data = path.read_bytes() if path.is_file() else b""
    mod = load_program(path)
    params = model_params(mod, path)
    dims = {v.name: v.size for v in vars(mod).values() if isinstance(v, Dim) and v.size is not None}
    dims.update(sizes or {})
    arrays = make_inputs(mod, params, dims, seed, path)
    tracer = Tracer()
    outs = run_model(mod, params, arrays, path, tracer=tracer, jit=jit, sizes=dict(sizes or {}))
    from ... import __version__

    producer = Producer(tool_version=__version__, frontend="loopir", source=path.name,
                        source_sha256=hashlib.sha256(data).hexdigest())
    g = tracer.finish(outs, name or path.stem, producer)
    issues = [i for i in validate_graph(g) if i.severity == "error"]
    if issues:
        raise LoopIRError(f"{path.name}: the lifted graph is invalid: {GraphError(issues).args[0]}")
    if not validate:
        from ...graph import Validation

        return _with(g, Validation(status="skipped", method="none", reason="validation not requested"))
    ran = run_model(mod, params, arrays, path, tracer=None, jit=jit, sizes=dict(sizes or {}))
    v = compare_outputs(g, arrays, {k: ran[k] for k in outs}, seed, jit)
    if strict and v.status != "passed":
        raise LoopIRError(f"{path.name}: validation failed: {v.reason}")
    return _with(g, v)


def _with(g: Graph, v) -> Graph:
    from dataclasses import replace

    return replace(g, validation=v)
