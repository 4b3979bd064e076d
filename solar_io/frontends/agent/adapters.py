"""Source-language adapters: run the source program on seeded random inputs for golden
outputs, and tell the model the language's conventions.

Golden data (also the ``--golden file.npz`` format): arrays named ``input:NAME`` (the source
program's inputs, weights included) and ``output:NAME`` (its outputs).
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..common.errors import CaptureError

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
The source defines `Model` (an `nn.Module` built with no arguments) or a function
`forward(**inputs)`, and `get_inputs(rng)` returning {name: array or tensor}. The module's
parameters and buffers are inputs too, named by their state_dict key with `.` replaced by `_`
(`fc.weight` -> `fc_weight`); declare them with `role="weight"`. `nn.Linear` computes
`x @ weight.T + bias` (weight is [out, in]); convolutions are NCHW with weight [out, in, kh, kw].
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

    def summary(self) -> str:
        def line(k: str, a: np.ndarray) -> str:
            return f"- {k}: shape {list(a.shape)}, dtype {a.dtype}"

        return ("Inputs:\n" + "\n".join(line(k, v) for k, v in self.inputs.items())
                + "\nOutputs:\n" + "\n".join(line(k, v) for k, v in self.outputs.items()))


def conventions(language: str) -> str:
    return COMMON + "\n" + {"numpy": NUMPY, "torch": TORCH, "jax": JAX}.get(language, GOLDEN)


def detect_language(path: Path, text: str) -> str:
    if path.suffix != ".py":
        return "other"
    if re.search(r"^\s*(from|import)\s+(jax|flax)\b", text, re.M):
        return "jax"
    if re.search(r"^\s*(from|import)\s+torch\b", text, re.M):
        return "torch"
    return "numpy"


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"_solar_io_agent_src_{abs(hash(path))}", path)
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


def golden_torch(path: Path, seed: int) -> Golden:
    try:
        import torch
    except ImportError:
        raise CaptureError(f"{path.name}: the source imports torch, which is not installed") from None
    mod = _load(path)
    torch.manual_seed(seed)
    ins = _call_get_inputs(mod, path, seed)
    args = {k: v if isinstance(v, torch.Tensor) else torch.as_tensor(np.asarray(v)) for k, v in ins.items()}
    weights: dict = {}
    if isinstance(getattr(mod, "Model", None), type):
        m = mod.Model()
        weights = {k.replace(".", "_"): v.detach() for k, v in m.state_dict().items()}
        fn = m
    elif callable(getattr(mod, "forward", None)):
        fn = mod.forward
    else:
        raise CaptureError(f"{path.name}: the PyTorch source defines neither Model nor forward(**inputs)")
    try:
        with torch.no_grad():
            res = fn(**args)
    except Exception as e:
        raise CaptureError(f"{path.name}: running the source raised {type(e).__name__}: {str(e)[:300]}") from None
    outs = _named(res, path)
    to_np = {k: v.detach().cpu().numpy() for k, v in {**args, **weights}.items()}
    return Golden(to_np, {k: v.detach().cpu().numpy() for k, v in outs.items()}, "torch",
                  f"torch {torch.__version__} cpu eager")


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


def capture_golden(path: Path, seed: int, golden: Path | None) -> Golden:
    text = path.read_text(errors="replace")
    lang = detect_language(path, text)
    if golden is not None:
        return golden_file(Path(golden), lang)
    if lang == "torch":
        return golden_torch(path, seed)
    if lang == "numpy":
        return golden_numpy(path, seed)
    if lang == "jax":
        return golden_jax(path, seed)
    raise CaptureError(f"{path.name}: cannot run this source here; give reference outputs with --golden file.npz")
