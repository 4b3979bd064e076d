"""Training-step capture of a JAX program (``solar-io capture model.py --train``): forward, loss,
``jax.value_and_grad`` backward and the optimizer update in one graph.

The program ``fn(params, *inputs)`` (a function with ``get_params()``, or a Flax module) is wrapped
in the step ``value_and_grad(lambda p: loss(first_output(fn(p, *xs)), target), has_aux=True)``
(the loss as in the torch frontend: ``sum``, ``mse`` against a target shaped like the output, or
``ce``: mean cross entropy over the last dim against integer classes) and traced with
``jax.make_jaxpr`` on abstract values: JAX's autodiff (linearize and transpose) writes the
backward into the same jaxpr, which the usual rules lower. The gradient of each parameter leaf is
``<leaf>.grad`` (of a Flax model, the ``params`` collection's leaves: ``batch_stats`` are read,
not trained); the optimizer's nodes, the phases and the ``training`` assumption come from
``frontends/common/training.py`` (phases by data flow: ``forward`` for what the model's output
depends on, ``loss`` for the rest of what the loss needs, ``backward`` for the rest), and
``--recompute`` from ``frontends/common/recompute.py``, exactly as for torch. Attention on the math
path is first rewritten to a fused forward and a fused backward that recomputes the scores
(``attention.py``; recorded as the assumption ``training``/``attention``), as the torch frontend
routes ``scaled_dot_product_attention`` to flash attention.

Validation runs the user's own step (the math path) with ``jax.jit`` on the CPU (loss and gradients), the update with
``optax`` (``adamw`` / ``sgd`` on the same seeded moments, at ``step - 1`` counts; optax's AdamW is
PyTorch's: ``p - lr * (m_hat / (sqrt(v_hat) + eps) + wd * p)``), and compares the graph's outputs on
the reference executor.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ... import __version__
from ...graph import Graph, Producer, Validation
from ..common.builder import GraphBuilder
from ..common.errors import CaptureError, NoRuleError
from ..common.training import (
    Param,
    TrainSpec,
    build_step,
    recomputed_and_unvalidated,
    rename_tensors,
    with_training_assumption,
)
from ..common.validation import NARROW_FLOATS, compare, skipped, widened_graph
from .attention import forward_calls_in, fuse_attention, fused_assumption
from .capture import DEFAULT_BUDGET, Program, _np, _param_names, input_hints, load_program
from .lower import Lowerer, file_dtype


def first_output(value: Any) -> Any:
    """The first floating leaf of a program's result (the one the loss is taken of)."""
    for x in jax.tree_util.tree_leaves(value):
        if jnp.issubdtype(x.dtype, jnp.floating):
            return x
    raise CaptureError("--train: the program returns no floating-point array to take a loss of")


def loss_of(out: Any, target: Any, loss: str) -> Any:
    """The loss of ``out``: sum, mean squared error, or mean cross entropy over the last dim."""
    if loss == "sum":
        return out.sum()
    if loss == "mse":
        return jnp.mean((out - target) ** 2)
    logp = jax.nn.log_softmax(out.reshape(-1, out.shape[-1]), axis=-1)
    return -jnp.mean(logp[jnp.arange(logp.shape[0]), target.reshape(-1)])  # a gather by (row, class)


def _target(out: Any, loss: str) -> list[Any]:
    """The abstract target of the loss for an output like ``out`` ([] for ``sum``)."""
    if loss == "sum":
        return []
    if loss == "mse":
        return [jax.ShapeDtypeStruct(out.shape, out.dtype)]
    if not out.shape or out.shape[-1] < 1:
        raise CaptureError("--loss ce needs an output whose last dim holds the class scores")
    return [jax.ShapeDtypeStruct(out.shape[:-1], jnp.int32)]


def step_function(prog: Program, loss: str) -> Any:
    """``step(params, *inputs[, target]) -> (loss, output, grads)`` of ``prog``."""

    def step(params: Any, *args: Any) -> Any:
        xs, target = (args, None) if loss == "sum" else (args[:-1], args[-1])

        def objective(trained: Any) -> Any:
            out = first_output(prog.fn({**params, "params": trained} if _collections(params) else trained, *xs))
            return loss_of(out, target, loss), out

        trained = params["params"] if _collections(params) else params
        (value, out), grads = jax.value_and_grad(objective, has_aux=True)(trained)
        return value, out, grads

    return step


def _collections(params: Any) -> bool:
    """Whether ``params`` are Flax variables with collections beside ``params`` (``batch_stats``):
    only the ``params`` collection is trained."""
    return isinstance(params, dict) and "params" in params and len(params) > 1


def _trained(params: Any) -> list[int]:
    """Indices of the trained leaves among all of ``params``'s leaves (in flattening order)."""
    paths = jax.tree_util.tree_flatten_with_path(params)[0]
    if not _collections(params):
        return list(range(len(paths)))
    return [i for i, (path, _) in enumerate(paths) if getattr(path[0], "key", None) == "params"]


def capture_train_program(prog: Program, spec: TrainSpec, *, validate: bool = True, strict: bool = False,
                          seed: int = 0, validate_budget: int = DEFAULT_BUDGET) -> Graph:
    """The training step of ``prog`` as one graph (see the module docstring), validated when it fits."""
    n_params = len(jax.tree_util.tree_leaves(prog.abstract_params))
    if not n_params:
        raise CaptureError(f"{prog.name}: --train: the program has no parameters to train (give get_params() "
                           "and model(params, *inputs), or a Flax Model)")
    try:
        out = first_output(jax.eval_shape(prog.fn, prog.abstract_params, *prog.abstract_inputs))
        targets = _target(out, spec.loss)
        step = step_function(prog, spec.loss)
        fused_fn, n_fused = fuse_attention(prog.fn, (prog.abstract_params, *prog.abstract_inputs))
        closed = jax.make_jaxpr(step_function(replace(prog, fn=fused_fn), spec.loss))(
            prog.abstract_params, *prog.abstract_inputs, *targets)
    except CaptureError:
        raise
    except Exception as e:
        first = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
        raise CaptureError(f"{prog.name}: --train: tracing value_and_grad failed: {type(e).__name__}: {first}") from e
    lw = Lowerer(GraphBuilder(), prog.name)
    b = lw.b
    labels = _param_names(prog.abstract_params)
    args: list[str] = []
    for i, v in enumerate(closed.jaxpr.invars):
        shape, dt = tuple(int(s) for s in v.aval.shape), file_dtype(v.aval.dtype)
        if i < n_params:
            args.append(b.source(labels[i], shape, dt, "weight"))
        else:
            j = i - n_params
            name = "target" if targets and j == len(closed.jaxpr.invars) - n_params - 1 else f"x{j}"
            args.append(b.source(name, shape, dt, "input", hints=input_hints(shape, dt)))
    try:
        outs = lw.run(closed.jaxpr, closed.consts, args)
    except CaptureError as e:
        raise CaptureError(f"{prog.name}: {e}") from None
    if strict and lw.opaque:
        node, prim, reason = lw.opaque[0]
        raise NoRuleError(f"{prog.name}: primitive {prim} (node {node}): {reason} (--strict)")
    loss_t, model_out, grads = outs[0], outs[1], outs[2:]
    params = []
    trained = _trained(prog.abstract_params)
    for label, w, gr in zip([labels[i] for i in trained], [args[i] for i in trained], grads, strict=True):
        if not isinstance(gr, str):
            raise CaptureError(f"{prog.name}: --train: parameter {label} gets no gradient from the loss")
        params.append(Param(w, gr, label))
    producer = Producer("solar-io", __version__, "jax", jax.__version__, prog.name, prog.sha256)
    g, opt_tensors = build_step(b, params, spec, loss_t, {model_out}, producer, Path(prog.name).stem + ".train")
    names = {t.name for t in g.tensors}
    final = b.output_names[1:] if spec.optimizer == "none" else [p.grad for p in params]
    mapping = {o: f"{p.label}.grad" for p, o in zip(params, final, strict=True)
               if o in names and f"{p.label}.grad" not in names}
    g = with_training_assumption(rename_tensors(g, mapping), b, params, spec)
    lw.opaque_outs = {k: [mapping.get(t, t) for t in v] for k, v in lw.opaque_outs.items()}  # as renamed
    if n_fused:  # the calls lowered as fused kernels; those in an opaque node (a scan too long to unroll) apart
        uncharged = [n for n in lw.uncharged if n in g.node_map]  # (nodes the step kept)
        inside = sum(forward_calls_in(lw.opaque_eqns[n.name]) for n in g.nodes
                     if n.kind == "opaque" and n.phase == "forward" and n.name in lw.opaque_eqns)
        g = replace(g, assumptions=g.assumptions + (fused_assumption(n_fused - inside, lw.masked, uncharged,
                                                                     inside),))
    g, check = recomputed_and_unvalidated(g, spec, validate, validate_budget)
    if not check:
        return g
    grad_names = [mapping.get(o, o) for o in final] if spec.optimizer == "none" else []
    return replace(g, validation=_validate(g, lw, prog, spec, step, params, opt_tensors, args, grad_names,
                                           g.tensor_map, seed))


def _validate(g: Graph, lw: Lowerer, prog: Program, spec: TrainSpec, step: Any, params: list[Param],
              opt_tensors: list[dict[str, str]], args: list[str], grad_names: list[str], tmap: dict,
              seed: int) -> Validation:
    """Run the step with jax.jit and optax, the graph on the executor, and compare (module docstring).

    When the outputs differ, both are rerun in float64 (:func:`_compare_step` with ``wide``): a deep
    network turns rounding into large gradient differences at its ReLU kinks (a pre-activation within
    float32's rounding of zero, ``-2.3e-5`` of values up to 128 in the corpus ResNet-50, which XLA's
    float32 order rounds to ``+3.8e-6``: the cotangent passes on one side only). The float64 run holds
    float32's tolerances: rounding no longer differs, a wrong lowering still does."""
    first = _compare_step(g, lw, prog, spec, step, params, opt_tensors, args, grad_names, tmap, seed, False)
    floats = {t.dtype for t in g.tensors if t.dtype.startswith(("fp", "bf"))}
    if first.status != "failed" or lw.opaque or not floats or not floats <= set(NARROW_FLOATS):
        return first
    again = _compare_step(g, lw, prog, spec, step, params, opt_tensors, args, grad_names, tmap, seed, True)
    if again.status != "passed":
        return first
    shown = "/".join(sorted(floats))
    return replace(again, reason=f"{shown} outputs differ ({first.reason}); the float64 rerun of the step (jax x64) "
                                 f"and of the graph agrees within float32's tolerances, so the difference is {shown} "
                                 "rounding the model amplifies")


def _compare_step(g: Graph, lw: Lowerer, prog: Program, spec: TrainSpec, step: Any, params: list[Param],
                  opt_tensors: list[dict[str, str]], args: list[str], grad_names: list[str], tmap: dict,
                  seed: int, wide: bool) -> Validation:
    """One comparison of the step (jax.jit, optax) with the graph on the executor; ``wide``: both in
    float64 (jax x64, the graph's narrow floats read as fp64), held to float32's tolerances."""
    from ...executor import execute

    ref_name = f"jax {jax.__version__} cpu jit value_and_grad" + (
        "" if spec.optimizer == "none" else f", optax {spec.optimizer}") + (", float64 rerun" if wide else "")
    rng = np.random.default_rng(seed)

    def widen(a: Any) -> Any:  # noqa: ANN401
        return jnp.asarray(a, jnp.float64) if wide and jnp.issubdtype(a.dtype, jnp.floating) else a

    try:
        with jax.default_device(jax.devices("cpu")[0]), jax.enable_x64(wide):
            p = jax.tree_util.tree_map(widen, prog.make_params())
            xs = [widen(x) for x in prog.make_inputs()]
            out = first_output(jax.eval_shape(prog.fn, p, *xs))
            if spec.loss == "mse":
                xs.append(jnp.asarray(rng.standard_normal(out.shape), out.dtype))
            elif spec.loss == "ce":
                xs.append(jnp.asarray(rng.integers(0, out.shape[-1], out.shape[:-1]), jnp.int32))
            value, _, grads = jax.jit(step)(p, *xs)
            leaves = jax.tree_util.tree_leaves(p)
            grad_leaves = jax.tree_util.tree_leaves(grads)
            arrays = {name: _np(a) for name, a in zip(args, leaves + xs, strict=True) if name in tmap}
            leaves = [leaves[i] for i in _trained(p)]
            arrays.update({k: v for k, v in lw.const_data.items() if k in tmap})
            loss_name = next(t.name for t in g.tensors if t.role == "output" and any(
                n.phase == "loss" for n in g.nodes if any(a.tensor == t.name for a in n.outputs)))
            want: dict[str, np.ndarray] = {loss_name: _np(value)}
            if spec.optimizer == "none":
                want.update({n: _np(gr) for n, gr in zip(grad_names, grad_leaves, strict=True)})
            else:
                _optax_reference(spec, leaves, grad_leaves, opt_tensors, arrays, want, rng, wide)
    except Exception as e:
        return skipped(f"the eager training step raised {type(e).__name__}: {str(e)[:200]}")
    run = widened_graph(g) if wide else g
    try:
        with np.errstate(all="ignore"):
            got = execute(run, arrays, opaque=lw.opaque_runners(run))
    except Exception as e:
        return Validation("failed", "reference-executor", ref_name, seed,
                          reason=f"executing the graph raised {type(e).__name__}: {str(e)[:300]}")
    # an update computed from a lower-precision gradient (bf16 grads, fp32 state) is compared at the
    # gradient dtype's tolerance: the graph's and jax's gradients differ by that dtype's rounding
    loose = {names[k]: tmap[p.grad if p.grad in tmap else f"{p.label}.grad"].dtype
             for p, names in zip(params, opt_tensors, strict=True)
             for k in ("exp_avg_new", "exp_avg_sq_new", "updated") if k in names}
    held = {t.name: "fp32" for t in g.tensors if t.dtype in NARROW_FLOATS} if wide else loose
    view = replace(g, tensors=tuple(replace(t, dtype=held.get(t.name, t.dtype)) for t in g.tensors))
    record, _ = compare(view, got, want, reference=ref_name, seed=seed)
    return record


def _optax_reference(spec: TrainSpec, weights: list[Any], grads: list[Any], tensors: list[dict[str, str]],
                     arrays: dict[str, np.ndarray], want: dict[str, np.ndarray], rng: np.random.Generator,
                     wide: bool = False) -> None:
    """One optax step per parameter from seeded moments; fills the state inputs and the expected updates
    (``wide``: the state in float64, the step's float64 rerun)."""
    import optax

    for w, gr, names in zip(weights, grads, tensors, strict=True):
        sdt = jnp.float64 if wide else jnp.float32 if spec.master_dtype == "fp32" else w.dtype
        ws, gs = w.astype(sdt), gr.astype(sdt)
        if "master" in names:
            arrays[names["master"]] = _np(ws)
        if spec.optimizer == "sgd":
            upd, _ = optax.sgd(spec.lr).update(gs, optax.sgd(spec.lr).init(ws), ws)
        else:
            opt = optax.adamw(spec.lr, b1=spec.betas[0], b2=spec.betas[1], eps=spec.eps,
                              weight_decay=spec.weight_decay)
            m = jnp.asarray(rng.standard_normal(w.shape) * 0.1, sdt)
            v = jnp.asarray(rng.random(w.shape), sdt)
            arrays[names["exp_avg"]], arrays[names["exp_avg_sq"]] = _np(m), _np(v)
            adam = optax.ScaleByAdamState(count=jnp.asarray(spec.step - 1, jnp.int32), mu=m, nu=v)
            state = opt.init(ws)
            state = (adam,) + tuple(state[1:])
            upd, new = opt.update(gs, state, ws)
            want[names["exp_avg_new"]], want[names["exp_avg_sq_new"]] = _np(new[0].mu), _np(new[0].nu)
        updated = optax.apply_updates(ws, upd)
        want[names["updated"]] = _np(updated)
        if "param_new" in names:
            want[names["param_new"]] = _np(updated.astype(w.dtype))


def capture_train_file(path: Path, spec: TrainSpec, *, validate: bool = True, strict: bool = False, seed: int = 0,
                       validate_budget: int = DEFAULT_BUDGET, entry: str | None = None,
                       inputs: list[str] | None = None, inputs_from: str | None = None) -> Graph:
    """:func:`capture_train_program` of a model file (``capture.load_program``'s conventions)."""
    prog = load_program(Path(path), entry, inputs, inputs_from)
    return capture_train_program(prog, spec, validate=validate, strict=strict, seed=seed,
                                 validate_budget=validate_budget)


__all__ = ["capture_train_file", "capture_train_program", "first_output", "loss_of", "step_function"]
