"""Validating a training-step graph against PyTorch: eager autograd and ``torch.optim``.

A fresh CPU model with seeded weights runs the step eagerly (the loss from ``torch.nn.functional``:
``cross_entropy``, ``mse_loss`` or ``sum``; gradients from ``torch.autograd.grad``), and the
optimizer step is ``torch.optim.AdamW`` / ``SGD`` on copies of the parameters (the master copies in
their dtype) whose state is preloaded with seeded moments (``exp_avg`` normal, ``exp_avg_sq``
uniform in [0, 1)) at ``step - 1``. The graph runs on the reference executor with the same
weights, inputs, target and state; the loss and every updated tensor (or every gradient, without
an optimizer) are compared with the dtype tolerances of ``common/validation.py`` (updates computed
from a lower-precision gradient at the gradient's).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ...executor import execute
from ...graph import Graph, Validation
from ..common.training import Param, TrainSpec
from ..common.validation import compare, skipped
from .check import no_dropout, to_numpy
from .loader import Source
from .lower import Lowered


def _reference_loss(out: torch.Tensor, target: torch.Tensor | None, loss: str) -> torch.Tensor:
    if loss == "sum":
        return out.sum()
    if loss == "mse":
        return F.mse_loss(out, target)
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))


def validate_step(g: Graph, lowered: Lowered, source: Source, spec: TrainSpec,
                  params: list[tuple[Param, dict[str, str]]], n_args: int, seed: int) -> Validation:
    """The validation record of the training graph ``g`` (see the module docstring)."""
    from .train import first_output, make_target

    opt = {"adamw": "torch.optim.AdamW", "sgd": "torch.optim.SGD"}.get(spec.optimizer, "no optimizer")
    reference = f"torch {torch.__version__} cpu eager autograd, {opt}"
    torch.manual_seed(seed)
    model = source.model("cpu")
    torch.manual_seed(seed + 1)
    inputs = source.inputs("cpu")
    named = dict(model.named_parameters())
    state = {k: v.detach().clone() for k, v in list(named.items()) + list(model.named_buffers())}
    try:
        with no_dropout():
            out = first_output(model(*inputs))
            torch.manual_seed(seed + 2)
            target = make_target(out, spec.loss, "cpu")
            loss = _reference_loss(out, target[0] if target else None, spec.loss)
            grads = torch.autograd.grad(loss, [named[p.label] for p, _ in params], allow_unused=True)
    except Exception as e:
        return skipped(f"the eager training step raised {type(e).__name__}: {str(e)[:200]}")
    args = list(inputs) + target
    arrays: dict[str, np.ndarray] = {}
    want: dict[str, np.ndarray] = {}
    phase = {a.tensor: n.phase for n in g.nodes for a in n.outputs}
    loss_name = next(t.name for t in g.tensors if t.role == "output" and phase.get(t.name) == "loss")
    want[loss_name] = to_numpy(loss)
    torch.manual_seed(seed + 3)
    for (p, names), grad in zip(params, grads, strict=True):
        if grad is None:
            return skipped(f"parameter {p.label} gets no gradient eagerly")
        if spec.optimizer == "none":
            want[p.grad] = to_numpy(grad)
            continue
        _optimizer_reference(spec, state[p.label], grad, names, arrays, want)
    by_tensor = {p.tensor: p.label for p, _ in params}
    produced = {a.tensor for n in g.nodes for a in n.outputs}
    for t in g.tensors:
        if t.name in produced or t.value is not None or t.name in arrays:
            continue
        if t.name in lowered.const_data:
            arrays[t.name] = lowered.const_data[t.name]
        elif t.name in by_tensor:
            arrays[t.name] = to_numpy(state[by_tensor[t.name]])
        else:
            kind, where = lowered.sources.get(t.name, ("?", ""))
            key = where[len("model."):] if where.startswith("model.") else where
            if kind == "input" and int(where) < n_args:
                arrays[t.name] = to_numpy(args[int(where)])
            elif key in state:
                arrays[t.name] = to_numpy(state[key])
            else:
                return skipped(f"no value for {kind} {where or t.name} of the training graph")
    try:
        with np.errstate(all="ignore"):
            got = execute(g, arrays, opaque=lowered.opaque_fns)
    except Exception as e:
        return Validation("failed", "reference-executor", reference, seed,
                          reason=f"executing the graph raised {type(e).__name__}: {str(e)[:300]}")
    # an update computed from a lower-precision gradient (bf16 grads, fp32 state) is compared at the
    # gradient dtype's tolerance: the eager and graph gradients differ by that dtype's rounding
    loose = {names[k]: g.tensor_map[p.grad].dtype for p, names in params
             for k in ("exp_avg_new", "exp_avg_sq_new", "updated") if k in names}
    view = replace(g, tensors=tuple(replace(t, dtype=loose[t.name]) if t.name in loose else t for t in g.tensors))
    record, _ = compare(view, got, want, reference=reference, seed=seed)
    return record


def _optimizer_reference(spec: TrainSpec, weight: torch.Tensor, grad: torch.Tensor, names: dict[str, str],
                         arrays: dict[str, np.ndarray], want: dict[str, Any]) -> None:
    """One ``torch.optim`` step of one parameter from seeded state; fills the graph's state
    inputs in ``arrays`` and the updated tensors in ``want``."""
    sdt = torch.float32 if spec.master_dtype == "fp32" else weight.dtype
    w = torch.nn.Parameter(weight.detach().to(sdt).clone())
    w.grad = grad.detach().to(sdt)
    if "master" in names:
        arrays[names["master"]] = to_numpy(w)
    if spec.optimizer == "sgd":
        opt: torch.optim.Optimizer = torch.optim.SGD([w], lr=spec.lr)
    else:
        opt = torch.optim.AdamW([w], lr=spec.lr, betas=spec.betas, eps=spec.eps, weight_decay=spec.weight_decay)
        m = (torch.randn(w.shape) * 0.1).to(sdt)
        v = torch.rand(w.shape).to(sdt)
        arrays[names["exp_avg"]], arrays[names["exp_avg_sq"]] = to_numpy(m), to_numpy(v)
        opt.state[w] = {"step": torch.tensor(float(spec.step - 1)), "exp_avg": m.clone(), "exp_avg_sq": v.clone()}
    opt.step()
    want[names["updated"]] = to_numpy(w)
    if spec.optimizer == "adamw":
        want[names["exp_avg_new"]] = to_numpy(opt.state[w]["exp_avg"])
        want[names["exp_avg_sq_new"]] = to_numpy(opt.state[w]["exp_avg_sq"])
    if "param_new" in names:
        want[names["param_new"]] = to_numpy(w.detach().to(weight.dtype))
