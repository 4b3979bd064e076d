"""Source-language adapters: run the source program on seeded random inputs for golden
outputs, and tell the model the language's conventions.

Golden data (also the ``--golden file.npz`` format): arrays named ``input:NAME`` (the source
program's inputs, weights included) and ``output:NAME`` (its outputs).
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..common.errors import CaptureError
from ..common.source_file import file_spec

COMMON = """\
## Translating a source program (solar-io agent frontend)

You translate the user's source program into ONE Affine Loop IR program (the specification
above). Reply with the complete program in a single ```python code block; text outside the
block is ignored. The IR program is run on the same inputs as the source and its outputs are
compared numerically with the source's, so:
- `model`'s parameters are named exactly as the source's inputs listed in the request (weights
  included), with the same number of dims, in the same order of axes, and the dtypes given.
- Dim sizes at module level equal the shapes listed in the request.
- `model` returns a dict whose keys are the output names listed in the request.
- Do not define `get_inputs` (the inputs are given). Import only from
  `solar_io.frontends.loopir`, `math` and `numpy`. Do not read files or use the network.
If a previous attempt failed you get a diagnostic; reply with the whole corrected program.
"""

NUMPY = """\
### Source language: NumPy
The source defines `get_inputs(rng)` returning {name: array} and `forward(**inputs)` returning
an array, a tuple of arrays (outputs `y0`, `y1`, ...) or a dict of arrays. NumPy broadcasting,
`@`/`matmul`/`einsum` contractions and reductions (`sum`, `max`, `mean`) become loop nests
with explicit Dims; `mean` is a sum times 1/n.
"""

TORCH = """\
### Source language: PyTorch
The source follows the benchmark convention: `Model(*get_init_inputs())` called as
`model(*get_inputs())` (or a function used as the forward). The tensor inputs are named as the
parameters of `Model.forward` (listed in the request); non-tensor arguments are constants,
listed with their values. The module's parameters and buffers are inputs too, named by their
state_dict key with `.` replaced by `_` (`fc.weight` -> `fc_weight`); declare them with
`role="weight"`. `nn.Linear` computes `x @ weight.T + bias` (weight is [out, in]); convolutions
are NCHW with weight [out, in, kh, kw]. A source written for a GPU (`.cuda()`, `device="cuda"`)
was run on the CPU: translate the computation, not the device placement.
"""

JAX = """\
### Source language: JAX
The source defines `model(*inputs)` (with `get_params()`: `model(params, *inputs)`) and
`get_inputs()` returning the inputs in `model`'s order; they are named as `model`'s parameters.
The leaves of `params` are inputs too, named by their pytree path with `_` between keys
(`params["dense"]["kernel"]` -> `params_dense_kernel`); declare them with `role="weight"`.
`x @ w`, `jnp.dot`, `jnp.einsum` and `lax.dot_general` are contractions; `jax.nn.softmax`
subtracts the row maximum first; a Python function run through `jax.pure_callback` is part of
the computation: translate what it computes.
"""

GOLDEN = """\
### Source language: given as text, with golden data
The source cannot be run here (e.g. a CUDA kernel); the inputs and outputs listed in the request
come from a reference run. Translate the computation the kernel performs, not its thread or
tile scheduling: one IR kernel per logical operation over the full logical dimensions.
"""


@dataclass(frozen=True)
class Golden:
    inputs: dict
    outputs: dict
    language: str
    reference: str  # what produced the outputs
    constants: dict = field(default_factory=dict)  # non-tensor arguments of the source's forward

    def summary(self) -> str:
        def line(k: str, a: np.ndarray) -> str:
            return f"- {k}: shape {list(a.shape)}, dtype {a.dtype}"

        consts = "".join(f"\n- {k} = {v!r}" for k, v in self.constants.items())
        return ("Inputs:\n" + "\n".join(line(k, v) for k, v in self.inputs.items())
                + (f"\nConstant (non-tensor) arguments, fixed:{consts}" if consts else "")
                + "\nOutputs:\n" + "\n".join(line(k, v) for k, v in self.outputs.items()))


def conventions(language: str) -> str:
    return COMMON + "\n" + {"numpy": NUMPY, "torch": TORCH, "jax": JAX}.get(language, GOLDEN)


def detect_language(path: Path, text: str) -> str:
    """The source's language from the imports of its parsed module (``import os, torch`` is torch)."""
    from ..common.imports import imported

    if path.suffix != ".py":
        return "other"
    names = imported(text)
    if names & {"jax", "flax"}:
        return "jax"
    if "torch" in names:
        return "torch"
    return "numpy"


def _load(path: Path):
    spec = file_spec(f"_solar_io_agent_src_{abs(hash(path))}", path)
    if spec is None or spec.loader is None:
        raise CaptureError(f"{path.name}: cannot be loaded as a Python module")
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(mod)
    except Exception as e:
        raise CaptureError(f"{path.name}: loading the source raised {type(e).__name__}: {str(e)[:300]}") from None
    finally:
        sys.path.remove(str(path.parent))
    return mod


def _call_get_inputs(mod, path: Path, seed: int, kind: tuple = (dict,)):
    fn = getattr(mod, "get_inputs", None)
    if not callable(fn):
        raise CaptureError(f"{path.name}: the source defines no get_inputs(rng); give --golden file.npz")
    rng = np.random.default_rng(seed)
    try:
        got = fn(rng) if inspect.signature(fn).parameters else fn()
    except Exception as e:
        raise CaptureError(f"{path.name}: get_inputs raised {type(e).__name__}: {str(e)[:300]}") from None
    if not isinstance(got, kind):
        raise CaptureError(f"{path.name}: get_inputs must return {{name: array}}"
                           + (" or a tuple of arrays" if tuple in kind else ""))
    return got


def _named(res, path: Path) -> dict:
    if isinstance(res, dict):
        return dict(res)
    if isinstance(res, (tuple, list)):
        return {f"y{i}": v for i, v in enumerate(res)}
    return {"y": res}


def golden_numpy(path: Path, seed: int) -> Golden:
    mod = _load(path)
    fn = getattr(mod, "forward", None) or getattr(mod, "model", None)
    if not callable(fn):
        raise CaptureError(f"{path.name}: the NumPy source defines no forward(**inputs)")
    ins = {k: np.asarray(v) for k, v in _call_get_inputs(mod, path, seed).items()}
    try:
        outs = _named(fn(**{k: v.copy() for k, v in ins.items()}), path)
    except Exception as e:
        raise CaptureError(f"{path.name}: forward raised {type(e).__name__}: {str(e)[:300]}") from None
    return Golden(ins, {k: np.asarray(v) for k, v in outs.items()}, "numpy", f"numpy {np.__version__}")


def _default_entry(path: Path) -> str | None:
    """The PyTorch loader's entry for a source: its ``Model`` (None: the loader's default), else a
    top-level function ``forward`` or ``model`` used as the forward (``:forward``)."""
    try:
        tree = ast.parse(path.read_text(errors="replace"))
    except SyntaxError:
        return None  # the loader reports it
    top = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    if "Model" in top:
        return None
    return next((f":{fn}" for fn in ("forward", "model") if fn in top), None)


def _forward_params(m) -> tuple[list[str], bool]:
    """The positional parameter names of a module's forward (of the function a function
    entry wraps), and whether it takes ``*args``."""
    fn = getattr(m, "fn", None) if type(m).__name__ == "_FnModule" else None
    sig = inspect.signature(fn if fn is not None else type(m).forward)
    ps = list(sig.parameters.values())[0 if fn is not None else 1:]
    names = [p.name for p in ps if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return names, any(p.kind == p.VAR_POSITIONAL for p in ps)


def _requires_arg(fn) -> bool:
    try:
        ps = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in ps)


def golden_torch(path: Path, seed: int, *, entry: str | None = None, inputs: list[str] | None = None,
                 inputs_from: str | None = None, dtype: str | None = None, eval_mode: bool = False) -> Golden:
    """Golden outputs of a PyTorch source, loaded by the PyTorch frontend's loader (so every file
    that frontend reads: ``Model(*get_init_inputs())`` on ``get_inputs()``, ``entry``,
    ``inputs_from``, ``--input`` specs ``inputs``, files written for a GPU), run eagerly on the CPU
    after ``torch.manual_seed(seed)``. Also this frontend's own form: ``get_inputs(rng)`` (a numpy
    Generator seeded with ``seed``) returning {name: array or tensor}, and a function
    ``forward(**inputs)``. Tensor inputs are named as the forward's parameters."""
    try:
        import torch

        from ..torch.loader import load_source
    except ImportError:
        raise CaptureError(f"{path.name}: the source imports torch, which is not installed") from None
    sys.path.insert(0, str(path.parent))
    try:
        src = load_source(path, entry=entry or _default_entry(path), inputs=inputs, dtype=dtype, eval_mode=eval_mode,
                          inputs_from=inputs_from)
        torch.manual_seed(seed)
        m = src.model("cpu")
        params, star = _forward_params(m)
        keyed: list[str] = []
        if not inputs and _requires_arg(src.inputs_factory):  # get_inputs(rng) -> {name: array}
            make, rng = src.inputs_factory, np.random.default_rng(seed)

            def by_name() -> list:
                got = make(rng)
                if not isinstance(got, dict):
                    return list(got)
                order = [k for k in params if k in got] if set(got) <= set(params) else list(got)
                keyed.extend(order)
                return [v if isinstance(v, torch.Tensor) else torch.as_tensor(np.asarray(v)) for v in
                        (got[k] for k in order)]

            src = replace(src, inputs_factory=by_name)
        xs = src.inputs("cpu")
    finally:
        sys.path.remove(str(path.parent))
    names = keyed or params[:len(xs)]
    if len(names) < len(xs):
        if not star:
            raise CaptureError(f"{path.name}: get_inputs() gives {len(xs)} inputs but the forward takes "
                               f"{len(params)} ({', '.join(params)})")
        names += [f"x{i}" for i in range(len(names), len(xs))]
    weights = {k.replace(".", "_"): v.detach().clone() for k, v in m.state_dict().items()}
    names = [f"input_{n}" if n in weights else n for n in names]
    try:
        with torch.no_grad():
            res = m(*xs)
    except Exception as e:
        raise CaptureError(f"{path.name}: running the source raised {type(e).__name__}: {str(e)[:300]}") from None
    args = {n: x for n, x in zip(names, xs, strict=True) if isinstance(x, torch.Tensor)}
    consts = {n: x for n, x in zip(names, xs, strict=True) if not isinstance(x, torch.Tensor)}
    outs = {k: v for k, v in _named(res, path).items() if isinstance(v, torch.Tensor)}
    if not outs:
        raise CaptureError(f"{path.name}: the forward returned no tensor")
    odd = sorted(k for k, v in {**args, **weights, **outs}.items() if v.dtype in (torch.bfloat16,) or
                 "float8" in str(v.dtype))
    if odd:
        raise CaptureError(f"{path.name}: {', '.join(odd)[:200]} hold bf16/fp8 values, which the agent's golden "
                           "data (numpy) cannot hold; translate at fp32 (no --dtype bf16) or use --frontend torch")
    to_np = {k: v.detach().cpu().numpy() for k, v in {**args, **weights}.items()}
    where = ", written for a GPU" if src.accelerator else ""
    return Golden(to_np, {k: v.detach().cpu().numpy() for k, v in outs.items()}, "torch",
                  f"torch {torch.__version__} cpu eager{where}", consts)


def golden_jax(path: Path, seed: int) -> Golden:
    """Golden outputs of a JAX source (the JAX frontend's convention: ``get_inputs()``,
    ``model(*inputs)`` or, with ``get_params()``, ``model(params, *inputs)``), run with
    ``jax.jit`` on CPU. Inputs come from the source's ``get_inputs`` (its own seeded keys)."""
    try:
        import jax
    except ImportError:
        raise CaptureError(f"{path.name}: the source imports jax, which is not installed") from None
    mod = _load(path)
    fn = getattr(mod, "model", None)
    if not callable(fn) or not callable(getattr(mod, "get_inputs", None)):
        raise CaptureError(f"{path.name}: the JAX source must define model(*inputs) and get_inputs() "
                           "(a Flax Model: wrap its apply in a model function)")
    got = _call_get_inputs(mod, path, seed, kind=(dict, tuple, list))
    names = list(inspect.signature(fn).parameters)
    params = mod.get_params() if callable(getattr(mod, "get_params", None)) else None
    if params is not None:
        names = names[1:]
    xs = tuple(got.values()) if isinstance(got, dict) else tuple(got)
    if isinstance(got, dict):
        names = list(got)
    if len(names) < len(xs):
        raise CaptureError(f"{path.name}: get_inputs() gives {len(xs)} inputs but model takes {len(names)}")
    ins = {n: np.asarray(x) for n, x in zip(names, xs, strict=False)}
    if params is not None:
        for kp, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
            ins["params" + "".join(f"_{_key(k)}" for k in kp)] = np.asarray(leaf)
    call = (lambda *a: fn(params, *a)) if params is not None else fn
    try:
        res = jax.jit(call)(*xs)
    except Exception as e:
        raise CaptureError(f"{path.name}: running the source raised {type(e).__name__}: {str(e)[:300]}") from None
    outs = _named(res, path)
    return Golden(ins, {k: np.asarray(v) for k, v in outs.items()}, "jax", f"jax {jax.__version__} cpu (jit)")


def _key(k) -> str:
    """One pytree path entry as a name part (dict key, attribute or sequence index)."""
    for attr in ("key", "name", "idx"):
        if hasattr(k, attr):
            return re.sub(r"\W", "_", str(getattr(k, attr)))
    return re.sub(r"\W", "_", str(k))


def golden_file(golden: Path, language: str) -> Golden:
    try:
        with np.load(golden) as z:
            data = {k: z[k] for k in z.files}
    except Exception as e:
        raise CaptureError(f"{golden}: cannot read golden data: {str(e)[:200]}") from None
    ins = {k.split(":", 1)[1]: v for k, v in data.items() if k.startswith("input:")}
    outs = {k.split(":", 1)[1]: v for k, v in data.items() if k.startswith("output:")}
    if not outs:
        raise CaptureError(f"{golden}: no arrays named output:NAME (and input:NAME for the inputs)")
    return Golden(ins, outs, language, f"golden data {golden.name}")


def capture_golden(path: Path, seed: int, golden: Path | None, **torch_options) -> Golden:
    """Golden data of the source at ``path`` (``torch_options``: ``golden_torch``'s keywords)."""
    text = path.read_text(errors="replace")
    lang = detect_language(path, text)
    if golden is not None:
        return golden_file(Path(golden), lang)
    if lang == "torch":
        return golden_torch(path, seed, **torch_options)
    if lang == "numpy":
        return golden_numpy(path, seed)
    if lang == "jax":
        return golden_jax(path, seed)
    raise CaptureError(f"{path.name}: cannot run this source here; give reference outputs with --golden file.npz")
