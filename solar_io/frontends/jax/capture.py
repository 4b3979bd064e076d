"""The capture pipeline: load -> trace to a jaxpr on abstract values -> lower -> build -> validate.

A model file defines ``get_inputs()`` and either ``model(*inputs)`` (a pure function; with
``get_params()`` it is called ``model(params, *inputs)``) or a Flax linen ``Model`` class
built from ``get_init_inputs()``. Parameters are initialised abstractly (``jax.eval_shape``)
so tracing allocates no weight memory. Validation needs concrete parameters: ``get_params()``
when the file defines it (also for a Flax module, e.g. to skip a costly ``init``), else
``Model.init(PRNGKey(0))``. Validation runs ``jax.jit`` of the function on CPU and
the graph on the reference executor with the same (seeded) parameters and inputs.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import jax
import numpy as np

from ... import __version__
from ...dtypes import numpy_dtype
from ...graph import Graph, Producer, Validation
from ...liveness import with_live_work
from ...metrics import with_index_assumptions
from ..common.builder import GraphBuilder
from ..common.errors import CaptureError, InputSpecError, NoRuleError
from ..common.inputs import parse_input_spec, split_entry
from ..common.source_file import file_spec
from ..common.validation import CAP, compare, graph_bytes, reduced_size, skipped
from . import rules  # noqa: F401  (registers every rule)
from .lower import Lowerer, file_dtype
from .masked_math import declare_masked, masked_regions

DEFAULT_BUDGET = 2 << 30


@dataclass
class Program:
    """A function ``fn(params, *inputs)``, how to make concrete params and inputs, and names."""

    name: str
    sha256: str
    fn: Callable[..., Any]
    abstract_params: Any
    abstract_inputs: tuple
    make_params: Callable[[], Any]
    make_inputs: Callable[[], tuple]


@dataclass
class Capture:
    graph: Graph
    lowerer: Lowerer
    outputs: list[str]
    sources: list[tuple[str, str]]  # (tensor name, "param"/"input") in flattened order
    program: Program


def _abstract(x: Any) -> Any:
    return jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype)
                                  if not hasattr(a, "aval") else jax.ShapeDtypeStruct(a.shape, a.dtype), x)


def load_program(path: Path, entry: str | None = None, inputs: list[str] | None = None,
                 inputs_from: str | None = None) -> Program:
    """The Program of a model file (see the module docstring). Runs the file.

    ``entry`` (``file:callable``) names the function or Flax module class to capture instead of
    ``model``/``Model``; ``inputs`` (``--input`` specs) replace ``get_inputs()`` with seeded random
    arrays of those dtypes and shapes; ``inputs_from`` names another callable giving the inputs."""
    name = split_entry(entry)[1] if entry else None
    specs = [parse_input_spec(s) for s in inputs or []]
    try:
        data = path.read_bytes()
    except OSError as e:
        raise CaptureError(f"{path}: cannot read: {e.strerror or e}") from None
    mod_name = f"_solar_io_jax_model_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"
    spec = file_spec(mod_name, path)
    if spec is None or spec.loader is None:
        raise CaptureError(f"{path.name}: not a Python file")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as e:
        raise CaptureError(f"{path.name}: running the file raised {type(e).__name__}: {str(e)[:300]}") from e
    make = inputs_from or "get_inputs"
    if inputs_from and not callable(getattr(mod, inputs_from, None)):
        raise CaptureError(f"{path.name}: --inputs-from names {inputs_from!r}, which is not a callable there")
    if not specs and not hasattr(mod, make):
        raise CaptureError(f"{path.name}: defines no get_inputs() (or give --input NAME=DTYPE[D1,D2,...])")
    if name is not None and not callable(getattr(mod, name, None)):
        raise CaptureError(f"{path.name}: --entry names {name!r}, which the file does not define as a callable")
    sha = hashlib.sha256(data).hexdigest()

    def inputs() -> tuple:
        if specs:
            return _spec_arrays(specs)
        try:
            return tuple(getattr(mod, make)())
        except Exception as e:
            raise CaptureError(f"{path.name}: {make}() raised {type(e).__name__}: {str(e)[:300]}") from e

    abstract_inputs = tuple(jax.eval_shape(lambda: inputs()))
    target = getattr(mod, name) if name is not None else getattr(mod, "Model", None)
    if isinstance(target, type):
        init_args = tuple(mod.get_init_inputs()) if hasattr(mod, "get_init_inputs") else ()
        if _is_nnx(target):
            return _nnx_program(path.name, sha, target, init_args, abstract_inputs, inputs)
        module = target(*init_args)
        if not hasattr(module, "init") or not hasattr(module, "apply"):
            raise CaptureError(f"{path.name}: {target.__name__} is neither a flax.linen nor a flax.nnx Module")
        key = jax.random.PRNGKey(0)
        abstract_params = jax.eval_shape(module.init, key, *abstract_inputs)
        make_params = mod.get_params if hasattr(mod, "get_params") else lambda: _init(module, key, inputs())
        return Program(path.name, sha, lambda params, *xs: module.apply(params, *xs), abstract_params,
                       abstract_inputs, make_params, inputs)
    fn = target if target is not None else getattr(mod, "model", None)
    if fn is None:
        raise CaptureError(f"{path.name}: defines neither model(*inputs) nor a Flax Model (or give --entry "
                           "file:callable)")
    if hasattr(mod, "get_params"):
        abstract_params = jax.eval_shape(mod.get_params)
        return Program(path.name, sha, fn, abstract_params, abstract_inputs, mod.get_params, inputs)
    return Program(path.name, sha, lambda _p, *xs: fn(*xs), None, abstract_inputs, lambda: None, inputs)


def _init(module: Any, key: Any, inputs: tuple) -> Any:  # noqa: ANN401
    """``module.init(key, *inputs)`` compiled once (eager init compiles each initialiser op on its own:
    57 XLA programs, 10 of a ResNet block's 13 s capture); eagerly where the init cannot be traced
    (a Python branch on an input's value), as the module would run it."""
    try:
        return jax.jit(module.init)(key, *inputs)
    except jax.errors.JAXTypeError:
        return module.init(key, *inputs)


def _spec_arrays(specs: list[tuple[str | None, str, list[int]]]) -> tuple:
    """Seeded random arrays for ``--input`` specs (:func:`_random_array`, integers 0 or 1)."""
    rng = np.random.default_rng(0)
    return tuple(_random_array(shape, jax.numpy.bfloat16 if dt == "bf16" else numpy_dtype(dt), rng, 2)
                 for _, dt, shape in specs)


def _random_array(shape: Any, dtype: Any, rng: np.random.Generator, top: int) -> Any:
    """A random array: standard normal floats, random booleans, integers in ``[0, top)``."""
    kind = "f" if dtype == jax.numpy.bfloat16 else np.dtype(dtype).kind
    if kind == "f":
        return jax.numpy.asarray(rng.standard_normal(shape), dtype=dtype)
    if kind == "b":
        return jax.numpy.asarray(rng.random(shape) > 0.5)
    return jax.numpy.asarray(rng.integers(0, top, shape), dtype=dtype)


def _is_nnx(cls: Any) -> bool:
    try:
        from flax import nnx
    except ImportError:
        return False
    return isinstance(cls, type) and issubclass(cls, nnx.Module)


def _nnx_program(name: str, sha: str, cls: Any, init_args: tuple, abstract_inputs: tuple,
                 inputs: Callable[[], tuple]) -> Program:
    """A flax.nnx Module: its state (built abstractly with nnx.eval_shape) is the parameter tree."""
    from flax import nnx

    abstract_model = nnx.eval_shape(lambda: cls(*init_args, rngs=nnx.Rngs(0)))
    graphdef, abstract_state = nnx.split(abstract_model)

    def fn(state: Any, *xs: Any) -> Any:
        return nnx.merge(graphdef, state)(*xs)

    def make_params() -> Any:  # built under one jit, as a linen init (see load_program)
        return jax.jit(lambda: nnx.split(cls(*init_args, rngs=nnx.Rngs(0)))[1])()

    return Program(name, sha, fn, abstract_state, abstract_inputs, make_params, inputs)


def _param_names(params: Any) -> list[str]:
    leaves = jax.tree_util.tree_flatten_with_path(params)[0]
    names = []
    for path, _ in leaves:
        parts = []
        for k in path:
            s = getattr(k, "key", getattr(k, "idx", getattr(k, "name", k)))
            parts.append(str(s))
        if parts and parts[0] == "params":
            parts = parts[1:]
        if len(parts) > 1 and parts[-1] == "value":  # flax.nnx Variable leaves
            parts = parts[:-1]
        names.append(".".join(parts) or "param")
    return names


def capture_program(prog: Program, *, validate: bool = True, strict: bool = False, seed: int = 0,
                    validate_budget: int = DEFAULT_BUDGET) -> Capture:
    try:
        closed = jax.make_jaxpr(prog.fn)(prog.abstract_params, *prog.abstract_inputs)
    except Exception as e:
        raise CaptureError(f"{prog.name}: tracing with jax.make_jaxpr failed: {type(e).__name__}: "
                           f"{str(e).strip().splitlines()[0][:300] if str(e).strip() else ''}") from e
    lw = Lowerer(GraphBuilder(), prog.name)
    b = lw.b
    n_params = len(jax.tree_util.tree_leaves(prog.abstract_params))
    pnames = _param_names(prog.abstract_params) if n_params else []
    sources: list[tuple[str, str]] = []
    args: list[str] = []
    for v in closed.jaxpr.invars:
        try:
            file_dtype(v.aval.dtype)
        except CaptureError as e:
            raise CaptureError(f"{prog.name}: {e}") from None
    for i, v in enumerate(closed.jaxpr.invars):
        shape = tuple(int(s) for s in v.aval.shape)
        if i < n_params:
            name = b.source(pnames[i], shape, file_dtype(v.aval.dtype), "weight")
            sources.append((name, "param"))
        else:
            dt = file_dtype(v.aval.dtype)
            name = b.source(f"x{i - n_params}" if len(closed.jaxpr.invars) - n_params > 1 else "x", shape,
                            dt, "input", hints=input_hints(shape, dt))
            sources.append((name, "input"))
        args.append(name)
    lw.region_finder = masked_regions  # masked attention: priced at the positions kept (masked_math.py)
    try:
        outs = lw.run(closed.jaxpr, closed.consts, args)
    except CaptureError as e:
        raise CaptureError(f"{prog.name}: {e}") from None
    outs = [o if isinstance(o, str) else b.constant("out", float(o), file_dtype(v.aval.dtype))
            for o, v in zip(outs, closed.jaxpr.outvars, strict=True)]
    if strict and lw.opaque:
        node, prim, reason = lw.opaque[0]
        raise NoRuleError(f"{prog.name}: primitive {prim} (node {node}): {reason} (--strict)")
    masked = declare_masked(lw, set(outs))
    producer = Producer("solar-io", __version__, "jax", jax.__version__, prog.name, prog.sha256)
    graph = b.build(outs, name=Path(prog.name).stem, producer=producer)
    if masked is not None:
        graph = replace(graph, assumptions=graph.assumptions + (masked,))
    graph = with_live_work(graph)  # results partly used (sliced, selected): only that part computed
    graph = with_index_assumptions(graph)  # gathers and scatters through index values the file does not hold
    cap = Capture(graph, lw, b.output_names, sources, prog)
    record = validate_capture(cap, seed=seed, budget=validate_budget) if validate else \
        skipped("not requested (--no-validate): the program was not run, so it is not known to run")
    cap.graph = replace(graph, validation=record)
    return cap


#: default rank names of float inputs by rank: JAX images are channels-last (NHWC, NTHWC); a
#: convolution names a still unbound image by its own dimension numbers instead
_INPUT_HINTS = {1: ("D",), 2: ("B", "D"), 3: ("B", "S", "D"), 4: ("N", "H", "W", "C"),
                5: ("N", "T", "H", "W", "C")}
_INT_HINTS = {1: ("B",), 2: ("B", "S"), 3: ("B", "S", "K")}


def input_hints(shape: tuple[int, ...], dtype: str) -> tuple[str, ...]:
    """Rank-name hints of a function input, as the PyTorch frontend names its inputs (``B, S, D``
    for sequences, ``B, S`` for token ids) but with images channels-last."""
    table = _INT_HINTS if dtype.startswith(("int", "uint")) else _INPUT_HINTS
    return table.get(len(shape), ())


def _np(a: Any) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype.name in ("bfloat16", "float16") or a.dtype.name.startswith("float8"):
        a = a.astype(np.float32)
    return a


def validate_capture(cap: Capture, *, seed: int = 0, budget: int = DEFAULT_BUDGET) -> Validation:
    """Execute the graph and ``jax.jit(fn)`` on CPU on the same params and inputs; compare outputs."""
    from ...executor import execute

    g = cap.graph
    need = graph_bytes(g) * 2
    if need > budget:
        return _validate_reduced(cap, seed,
                                 f"needs {need / 2**30:.1f} GiB (--validate-budget {budget / 2**30:.1f} GiB)")
    prog = cap.program
    jax_log = logging.getLogger("jax")
    level = jax_log.level
    try:
        jax_log.setLevel(logging.CRITICAL)  # a failing host callback logs its traceback: the error is one line
        with jax.default_device(jax.devices("cpu")[0]):
            params = prog.make_params()
            inputs = prog.make_inputs()
            want = jax.block_until_ready(jax.jit(prog.fn)(params, *inputs))
    except Exception as e:
        text = _error_line(e)
        if _no_cpu_kernel(e):  # a limit of the validation device, not a failure of the program
            return skipped(f"the program cannot run on the cpu ({type(e).__name__}: {text})")
        raise CaptureError(f"{prog.name}: running the program raised {type(e).__name__}: {text}") from e
    finally:
        jax_log.setLevel(level)
    leaves = jax.tree_util.tree_leaves(params) + list(jax.tree_util.tree_leaves(inputs))
    present = {t.name for t in g.tensors}
    arrays = {name: _np(a) for (name, _), a in zip(cap.sources, leaves, strict=True) if name in present}
    arrays.update({k: v for k, v in cap.lowerer.const_data.items() if k in present})
    want_leaves = jax.tree_util.tree_leaves(want)
    try:
        got = execute(g, arrays, opaque=cap.lowerer.opaque_runners(g))
    except Exception as e:
        return Validation("failed", "reference-executor", f"jax {jax.__version__} cpu jit", seed,
                          reason=f"executor raised {type(e).__name__}: {str(e)[:200]}")
    ref = {}
    for name, w in zip(cap.outputs, want_leaves, strict=True):
        ref[name] = _np(w)
    record, _ = compare(g, got, ref, reference=f"jax {jax.__version__} cpu jit", seed=seed)
    return record


def _error_line(e: Exception) -> str:
    """One line for what running the program raised: the first line of the message, or for an
    error a host callback raised (its traceback inside an XLA status) the callback's own error."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()] or [type(e).__name__]
    if "callback" in lines[0].lower() and len(lines) > 1:
        return f"{lines[0][:120]} ... {lines[-1][:200]}"
    return lines[0][:300]


def _no_cpu_kernel(e: Exception) -> bool:
    """Whether running on the CPU failed for want of a CPU implementation (a primitive lowered only
    for another platform, an XLA UNIMPLEMENTED status) rather than a fault of the program."""
    if isinstance(e, NotImplementedError):
        return True
    return type(e).__name__ in ("XlaRuntimeError", "JaxRuntimeError") and str(e).lstrip().startswith("UNIMPLEMENTED")


def _validate_reduced(cap: Capture, seed: int, why: str) -> Validation:
    """A graph too large to run: trace the same function on inputs whose every size above CAP is
    reduced (``reduced_size``), validate that graph, and accept it for this one when both lower to
    the same nodes (the lowering depends on sizes only through the shapes it reads). A program with
    parameters (their sizes are its own, not its inputs'), one that does not trace at reduced sizes,
    or one that lowers differently there stays unvalidated (skipped, with the reason)."""
    prog = cap.program
    if jax.tree_util.tree_leaves(prog.abstract_params):
        return skipped(f"{why}; a program with parameters is not validated at reduced sizes")
    small = jax.tree_util.tree_map(
        lambda a: jax.ShapeDtypeStruct(tuple(reduced_size(int(d)) for d in a.shape), a.dtype), prog.abstract_inputs)
    dims = [int(d) for a in jax.tree_util.tree_leaves(small) for d in a.shape]
    top = max(1, min(dims, default=1))  # integer inputs stay below every size: valid indexes into any of them

    def make() -> tuple:
        rng = np.random.default_rng(seed)
        return tuple(jax.tree_util.tree_map(lambda a: _random_array(a.shape, a.dtype, rng, top), small))

    try:
        small_cap = capture_program(replace(prog, abstract_inputs=tuple(small), make_inputs=make), seed=seed,
                                    validate_budget=1 << 62)  # every size at most CAP: small by construction
    except Exception as e:
        return skipped(f"{why}; at reduced sizes the program does not trace ({type(e).__name__})")
    if [(n.kind, n.op) for n in small_cap.graph.nodes] != [(n.kind, n.op) for n in cap.graph.nodes]:
        return skipped(f"{why}; at reduced sizes the program lowers to other nodes")
    v = small_cap.graph.validation
    if v.status == "failed":  # the same nodes disagree with the program: a failure, not a skip
        return replace(v, method="reference-executor at reduced sizes", reason=f"{why}; at reduced sizes: {v.reason}")
    if v.status != "passed":
        return skipped(f"{why}; at reduced sizes: {v.status}: {v.reason}")
    ranks = tuple((r, reduced_size(n)) for r, n in cap.graph.ranks if reduced_size(n) < n)
    return Validation("passed", "reference-executor at reduced sizes", v.reference, seed, v.rtol, v.atol,
                      v.max_abs_error, v.max_rel_error, ranks,
                      reason=f"{why}; the same function validated on inputs with every size above {CAP} reduced")


def capture_function(fn: Callable[..., Any], *inputs: Any, params: Any = None, name: str = "function",
                     validate: bool = True, strict: bool = False) -> Capture:
    """Capture a Python function ``fn(*inputs)`` (or ``fn(params, *inputs)``) on concrete arrays."""
    wrapped = (lambda _p, *xs: fn(*xs)) if params is None else fn
    prog = Program(name, hashlib.sha256(name.encode()).hexdigest(), wrapped, _abstract(params),
                   tuple(_abstract(x) for x in inputs), lambda: params, lambda: tuple(inputs))
    return capture_program(prog, validate=validate, strict=strict)


def capture_file(path: Path, *, validate: bool = True, strict: bool = False, seed: int = 0,
                 validate_budget: int = DEFAULT_BUDGET, entry: str | None = None, inputs: list[str] | None = None,
                 dtype: str | None = None, inputs_from: str | None = None, train: Any = None, **_: Any) -> Graph:
    """Capture the model file ``path`` into a validated Graph. Runs the user's code. ``entry`` and
    ``inputs``: see :func:`load_program`; ``--dtype`` is a torch option and is refused here.
    ``train`` (a ``TrainSpec``) captures a training step instead (:mod:`.train`)."""
    if dtype:
        raise InputSpecError("--dtype casts torch models; a JAX program sets its dtypes itself")
    if train is not None:
        from .train import capture_train_file

        return capture_train_file(Path(path), train, validate=validate, strict=strict, seed=seed,
                                  validate_budget=validate_budget, entry=entry, inputs=inputs,
                                  inputs_from=inputs_from)
    prog = load_program(Path(path), entry, inputs, inputs_from)
    return capture_program(prog, validate=validate, strict=strict, seed=seed,
                           validate_budget=validate_budget).graph
