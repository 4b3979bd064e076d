"""Training-step capture (``solar-io capture model.py --train``): forward, loss, backward, optimizer.

The model's output goes through the loss (``sum``: ``out.sum()``; ``mse``: against a target shaped
like the output; ``ce``: cross entropy over the last dim against integer classes). That step is
exported on the meta device and handed to torch's joint tracing (``torch.export``'s
``_decompose_exported_program`` with a loss index: aot_autograd's joint graph), which appends the
backward autograd derives. Ops that have a lowering rule stay whole; the core-ATen table decomposes
the rest, so backward ops we do not lower (layer norm, softmax, embedding, activation backwards)
become ops we do. ``convolution_backward`` and the flash attention backward have rules.

``scaled_dot_product_attention`` without a mask is routed to ``_scaled_dot_product_flash_attention``
while exporting, and with a mask (boolean or additive, broadcast to the scores) to
``_scaled_dot_product_efficient_attention`` (with grouped-query heads, which that kernel lacks, to
``gqa_attention.py``'s op): the joint graph then keeps attention as a fused
forward and a fused backward (recomputing the scores, as flash attention does, the mask read once
by each) instead of the math path's saved ``S x T`` probabilities, which no fused kernel writes (a
bound that charged them could be beaten).

Gradients of the parameters are ``<param>.grad`` tensors, consumed by the optimizer's nodes
(``frontends/common/training.py``) or, with ``--optimizer none``, graph outputs. Inputs get no
gradient that is a cost: the builder drops the gradients the export traces for inputs marked as
requiring one, since nothing reads them. Each node's ``phase`` is set by data flow: ``forward``
for what the model's output depends on, ``loss`` for the rest of what the loss depends on,
``optimizer`` for the update, ``backward`` for everything else. With ``recompute`` (``--recompute``)
the graph is then rewritten for activation checkpointing (``frontends/common/recompute.py``) before
it is validated.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ... import __version__
from ...graph import Graph, Producer, Validation
from ..common.errors import CaptureError, NoRuleError
from ..common.training import (
    Param,
    TrainSpec,
    build_step,
    recomputed_and_unvalidated,
    rename_tensors,
    with_training_assumption,
)
from . import gqa_attention  # noqa: F401  (registers solar_io::masked_attention)
from .capture import DEFAULT_BUDGET, _quiet_torch_logs
from .loader import Source
from .lower import Lowered, lower
from .registry import find_rule
from .rulebook import load_rules

_ATEN = torch.ops.aten


class _Step(nn.Module):
    """The training step exported: ``(loss, output)`` of the model on its inputs (and the target)."""

    def __init__(self, model: nn.Module, loss: str):
        super().__init__()
        self.model, self.loss = model, loss

    def forward(self, *args: Any) -> tuple[torch.Tensor, torch.Tensor]:
        xs, target = (args, None) if self.loss == "sum" else (args[:-1], args[-1])
        out = first_output(self.model(*xs))
        return loss_of(out, target, self.loss), out.detach()


def first_output(value: Any) -> torch.Tensor:
    """The first floating tensor of a model's result (the one the loss is taken of)."""
    leaves, _ = torch.utils._pytree.tree_flatten(value)
    for x in leaves:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            return x
    raise CaptureError("--train: the model returns no floating-point tensor to take a loss of")


def loss_of(out: torch.Tensor, target: torch.Tensor | None, loss: str) -> torch.Tensor:
    """The loss of ``out``: sum, mean squared error, or cross entropy over the last dim."""
    if loss == "sum":
        return out.sum()
    if loss == "mse":
        return F.mse_loss(out, target)
    # cross entropy (mean over the rows) written out: torch's nll_loss has no derivative on meta tensors
    logp = F.log_softmax(out.reshape(-1, out.shape[-1]), -1)
    return -logp.gather(-1, target.reshape(-1, 1)).mean()


def make_target(out: torch.Tensor, loss: str, device: str) -> list[torch.Tensor]:
    """The loss's target for an output like ``out`` ([] for ``sum``)."""
    if loss == "sum":
        return []
    if loss == "mse":
        return [torch.randn(out.shape, dtype=out.dtype, device=device)]
    if out.dim() < 1 or out.shape[-1] < 1:
        raise CaptureError("--loss ce needs an output whose last dim holds the class scores")
    return [torch.randint(0, out.shape[-1], tuple(out.shape[:-1]), device=device)]


class FlashAttention(torch.overrides.TorchFunctionMode):
    """Route 4-d ``scaled_dot_product_attention`` to a fused kernel while exporting: the flash
    kernel without a mask, the memory-efficient kernel with one (boolean or additive), so the joint
    graph keeps attention fused (see the module docstring). Dropout is lowered as inference."""

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = dict(kwargs or {})
        if func is F.scaled_dot_product_attention:
            names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
            a = dict(zip(names, args, strict=False))
            a.update(kwargs)
            q, k, mask = a["query"], a["key"], a.get("attn_mask")
            if q.dim() == 4 and k.dim() == 4 and (q.shape[1] == k.shape[1] or (
                    a.get("enable_gqa") and q.shape[1] % k.shape[1] == 0)):
                if mask is None:
                    return _ATEN._scaled_dot_product_flash_attention(q, k, a["value"], 0.0, bool(a.get("is_causal")),
                                                                     False, scale=a.get("scale"))[0]
                if not a.get("is_causal") and _broadcasts(mask, q, k):
                    if q.shape[1] == k.shape[1]:
                        return _ATEN._scaled_dot_product_efficient_attention(q, k, a["value"], mask, True, 0.0,
                                                                             False, scale=a.get("scale"))[0]
                    # grouped-query heads: PyTorch's efficient kernel has none (gqa_attention.py)
                    scale = a.get("scale") or 1.0 / math.sqrt(q.shape[-1])
                    return torch.ops.solar_io.masked_attention(q, k, a["value"], mask, float(scale))[0]
        return func(*args, **kwargs)


def _broadcasts(mask: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> bool:
    """Whether ``mask`` broadcasts to the [B, H, S, T] scores of ``q`` and ``k`` (as sdpa requires)."""
    try:
        return tuple(torch.broadcast_shapes(mask.shape, (*q.shape[:3], k.shape[2]))) == (*q.shape[:3], k.shape[2])
    except RuntimeError:
        return False


def export_step(source: Source, spec: TrainSpec, also: frozenset = frozenset()) -> tuple[Any, int]:
    """The joint (forward + backward) ExportedProgram of the step and how many user inputs it has."""
    model = source.model("meta")
    args = source.inputs("meta")
    try:
        with warnings.catch_warnings(), _quiet_torch_logs():
            warnings.simplefilter("ignore")
            with torch.device("meta"), torch.no_grad():
                out = first_output(model(*args))
            args = args + make_target(out, spec.loss, "meta")
            with torch.device("meta"), FlashAttention():
                ep = torch.export.export(_Step(model, spec.loss), tuple(args), strict=False)
    except CaptureError:
        raise
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise CaptureError(f"{source.name}: --train: torch.export failed: {type(e).__name__}: {first[:300]}") from e
    if not any(p.requires_grad for p in model.parameters()):
        raise CaptureError(f"{source.name}: --train: the model has no parameters to train")
    return _joint(ep, also, source.name), len(args)


def _joint(ep: Any, also: frozenset, name: str) -> Any:
    from torch._decomp import core_aten_decompositions
    from torch.export.experimental import _copy_graph_module_and_signature, _remove_detach_pass
    from torch.export.exported_program import _decompose_exported_program

    load_rules()
    # torch's own _export_forward_backward setup: the core-ATen table, no composite overrides (the
    # default table's composite decompositions lose the gradient of some ops on meta tensors)
    table = core_aten_decompositions()
    for op in list(table):
        if find_rule(op) is not None and op not in also and not _composite(op):
            table.pop(op)
    try:
        with warnings.catch_warnings(), _quiet_torch_logs():
            warnings.simplefilter("ignore")
            joint = _decompose_exported_program(ep, cia_to_decomp={}, python_decomp_table=table, joint_loss_index=0,
                                                decompose_custom_triton_ops=False)
            gm, sig = _copy_graph_module_and_signature(joint)
            _remove_detach_pass(gm, sig)
            return joint._update(gm, sig)
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise CaptureError(f"{name}: --train: tracing the backward failed: {type(e).__name__}: {first[:300]}") from e


def _composite(op: Any) -> bool:
    """Whether ``op`` is CompositeImplicitAutograd (autograd differentiates its decomposition)."""
    try:
        return torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd")
    except Exception:
        return False


def capture_train(source: Source, spec: TrainSpec, *, validate: bool = True, strict: bool = False, seed: int = 0,
                  validate_budget: int = DEFAULT_BUDGET) -> Graph:
    """The training step of ``source`` as one graph (see the module docstring), validated when it fits."""
    ep, n_args = export_step(source, spec)
    lowered = lower(ep, source.name)
    retry = frozenset(t for t in lowered.opaque_targets if t in torch._decomp.core_aten_decompositions())
    if retry:  # a rule declined these ops (NoLowering): lower their decompositions instead
        ep, _ = export_step(source, spec, retry)
        lowered = lower(ep, source.name)
    if strict and lowered.opaque:
        node, op, reason = lowered.opaque[0]
        raise NoRuleError(f"{source.name}: op {op} (node {node}): {reason} (--strict)")
    g, params = _build(ep, lowered, source, spec)
    g, check = recomputed_and_unvalidated(g, spec, validate, validate_budget)
    if not check:
        return g
    from .train_check import validate_step

    return replace(g, validation=validate_step(g, lowered, source, spec, params, n_args, seed))


def _build(ep: Any, lowered: Lowered, source: Source, spec: TrainSpec
           ) -> tuple[Graph, list[tuple[Param, dict[str, str]]]]:
    b = lowered.builder
    fx = lowered.fx_tensors
    outs = {s.kind.name: s for s in ep.graph_signature.output_specs}
    loss_t = fx[outs["LOSS_OUTPUT"].arg.name]
    model_out = [fx[s.arg.name] for s in ep.graph_signature.output_specs if s.kind.name == "USER_OUTPUT"]
    weights = {str(s.target): fx[s.arg.name] for s in ep.graph_signature.input_specs
               if s.kind.name == "PARAMETER" and s.arg.name in fx}
    params = []
    for s in ep.graph_signature.output_specs:
        if s.kind.name == "GRADIENT_TO_PARAMETER" and s.target in weights and s.arg.name in fx:
            params.append(Param(weights[s.target], fx[s.arg.name], _label(str(s.target))))
    if not params:
        raise CaptureError(f"{source.name}: --train: no parameter gets a gradient from the loss")
    producer = Producer("solar-io", __version__, "torch", torch.__version__, source.name, source.sha256)
    g, opt_tensors = build_step(b, params, spec, loss_t, set(model_out), producer,
                                Path(source.name).stem + ".train")
    names = {t.name for t in g.tensors}
    mapping: dict[str, str] = {}
    for p in params:
        for old, new in ((p.tensor, p.label), (p.grad, f"{p.label}.grad")):
            if old in names and old != new and new not in names and new not in mapping.values():
                mapping[old] = new
    if spec.optimizer == "none":  # a gradient output may be a copy the builder made (``<t>.out``)
        for p, o in zip(params, b.output_names[1:], strict=True):
            if o != p.grad and o in names and f"{p.label}.grad" not in mapping.values():
                mapping[o] = f"{p.label}.grad"
    g = with_training_assumption(rename_tensors(g, mapping), b, params, spec)
    params = [Param(mapping.get(p.tensor, p.tensor), mapping.get(p.grad, p.grad), p.label) for p in params]
    return g, list(zip(params, opt_tensors, strict=True))


def _label(target: str) -> str:
    """A parameter's name in the model (the step wraps the model as ``model``)."""
    return target[len("model."):] if target.startswith("model.") else target


def capture_train_file(path: Path, spec: TrainSpec, *, validate: bool = True, strict: bool = False,
                       entry: str | None = None, inputs: list[str] | None = None, dtype: str | None = None,
                       seed: int = 0, validate_budget: int = DEFAULT_BUDGET, eval_mode: bool = False,
                       inputs_from: str | None = None) -> Graph:
    """:func:`capture_train` of a model file (the loader's conventions)."""
    from .loader import load_source

    source = load_source(Path(path), entry=entry, inputs=inputs, dtype=dtype, eval_mode=eval_mode,
                         inputs_from=inputs_from)
    return capture_train(source, spec, validate=validate, strict=strict, seed=seed, validate_budget=validate_budget)


__all__ = ["FlashAttention", "capture_train", "capture_train_file", "export_step", "first_output", "loss_of",
           "make_target", "Validation"]
