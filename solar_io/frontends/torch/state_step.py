"""Steps of Hugging Face models whose cache keeps recurrent states (``--phase`` with Mamba, Jamba,
Qwen3-Next, Bamba, Falcon-H1, LFM2 ...: transformers >= 5's ``LinearAttentionLayer`` cache layers).

Such a layer keeps, per sequence, a convolution window (the last ``kernel`` inputs of its causal
convolution) and a recurrent state (an SSM's or a linear attention's), of fixed sizes whatever the
number of tokens seen; the model's attention layers, if any, keep keys and values as usual. A step
takes all of them as inputs (``conv_state_<layer>``, ``ssm_state_<layer>``, ``k_cache_<layer>``,
``v_cache_<layer>``; a second state of one layer gets ``_<k>`` appended), builds the ``DynamicCache`` the
model's forward expects, marked as having seen ``kv_len`` tokens, and returns the logits, the grown keys
and values (``dynamic`` cache) and the updated states (the model writes them in place: read once and
written once per step).

The states' shapes are the model's own: a one-token forward of the model on the ``meta`` device, with
a fresh cache, fills every layer's states (:func:`state_slots`). Data-dependent values of that forward
(the experts a router picked) are made up there (:class:`_ShapesOnly`): only the shapes are kept, and
they do not depend on them.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from ..common.errors import CaptureError

#: what a slot holds, in input order within a layer -> (input name prefix, attribute of the cache layer).
SLOTS = {"keys": ("k_cache", "keys"), "values": ("v_cache", "values"), "conv": ("conv_state", "conv_states"),
         "recurrent": ("ssm_state", "recurrent_states")}
#: the input names of the recurrent states (they hold no positions: ``phases.record_step``).
STATE_INPUTS = tuple(f"{SLOTS[k][0]}_" for k in ("conv", "recurrent"))


@dataclass(frozen=True)
class StateSlot:
    """One cache tensor of a step: the layer, what it holds (a key of :data:`SLOTS`), the state's index within the
    layer (0 but for a layer with several states), and its shape and dtype.

    >>> f32 = torch.float32
    >>> StateSlot(3, "conv", 0, (2, 128, 4), f32).name, StateSlot(3, "recurrent", 1, (2, 8), f32).name
    ('conv_state_3', 'ssm_state_3_1')
    """

    layer: int
    kind: str
    index: int
    shape: tuple[int, ...]
    dtype: torch.dtype

    @property
    def name(self) -> str:
        return f"{SLOTS[self.kind][0]}_{self.layer}" + (f"_{self.index}" if self.index else "")

    def of(self, cache: Any) -> torch.Tensor:
        """This slot's tensor in ``cache`` (a transformers ``DynamicCache``)."""
        got = getattr(cache.layers[self.layer], SLOTS[self.kind][1])
        return got[self.index] if self.kind in ("conv", "recurrent") else got


class _ShapesOnly(TorchDispatchMode):
    """Made-up answers for the data-dependent ops of a forward on ``meta`` tensors (``item()`` is 0,
    ``nonzero`` finds nothing): a router's choices then route no token, and every shape that does not
    depend on values comes out as in a real run."""

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        name = func._schema.name.split("::")[-1]
        if name == "_local_scalar_dense":
            return 0
        if name == "nonzero":
            return torch.empty((0, args[0].dim()), dtype=torch.long, device=args[0].device)
        return func(*args, **(kwargs or {}))


@contextmanager
def _eager_experts(m: nn.Module) -> Iterator[None]:
    """transformers' loop over experts for the probe (``config._experts_implementation = "eager"``): its
    grouped-matmul implementation has no ``meta`` kernel for float32 in every torch; the loop's routing is
    :class:`_ShapesOnly`'s (no token routed). The configs are restored after."""
    configs = {id(c): c for c in (getattr(sub, "config", None) for sub in m.modules())
               if c is not None and hasattr(c, "_experts_implementation")}
    saved = {k: c._experts_implementation for k, c in configs.items()}
    try:
        for c in configs.values():
            c._experts_implementation = "eager"
        yield
    finally:
        for k, c in configs.items():
            c._experts_implementation = saved[k]


def is_recurrent(layer: Any) -> bool:
    """Whether a layer of a transformers cache keeps recurrent states (a ``LinearAttentionLayer``)."""
    return hasattr(layer, "conv_states") or hasattr(layer, "recurrent_states")


def has_recurrent_layers(m: nn.Module) -> bool:
    """Whether a Hugging Face model's ``DynamicCache`` has a recurrent layer (False where transformers is
    absent or cannot build a cache from the model's config)."""
    try:
        from transformers import DynamicCache

        return any(is_recurrent(layer) for layer in DynamicCache(config=m.config).layers)
    except Exception:  # ImportError, or a config DynamicCache cannot read: the key/value layout from the config
        return False


def cache_keyword(lm: nn.Module) -> str:
    """The name the model's forward takes its cache under (``cache`` in transformers' newer signatures,
    ``past_key_values`` before)."""
    params = inspect.signature(lm.forward).parameters
    return "cache" if "cache" in params and "past_key_values" not in params else "past_key_values"


def state_slots(lm: nn.Module, batch: int, positions: int | Sequence[int], name: str) -> list[StateSlot]:
    """Every cache tensor of a step of ``lm`` (built on ``meta``) for ``batch`` sequences, the attention
    layers' holding ``positions`` positions (one number, or one per layer). CaptureError naming ``name``
    when a recurrent layer keeps no state in the cache (the model keeps it elsewhere)."""
    from transformers import DynamicCache

    cache = DynamicCache(config=lm.config)
    ids = torch.zeros(batch, 1, dtype=torch.long, device="meta")
    try:
        with torch.no_grad(), _ShapesOnly(), _eager_experts(lm):
            lm(input_ids=ids, **{cache_keyword(lm): cache}, use_cache=True)
    except Exception as e:
        raise CaptureError(f"{name}: --phase: the one-token forward on meta that finds the shapes of the model's "
                           f"recurrent states raised {type(e).__name__}: {str(e).splitlines()[0][:200]}") from e
    lengths = [positions] * len(cache.layers) if isinstance(positions, int) else list(positions)
    slots: list[StateSlot] = []
    for i, layer in enumerate(cache.layers):
        keys = getattr(layer, "keys", None)
        if isinstance(keys, torch.Tensor) and keys.dim() == 4:
            for kind, t in (("keys", keys), ("values", layer.values)):
                b, h, _, d = t.shape
                slots.append(StateSlot(i, kind, 0, (b, h, lengths[i], d), t.dtype))
        if is_recurrent(layer):
            states = [(kind, k, t) for kind in ("conv", "recurrent")
                      for k, t in sorted(getattr(layer, SLOTS[kind][1], {}).items()) if isinstance(t, torch.Tensor)]
            if not states:
                raise CaptureError(f"{name}: --phase: cache layer {i} ({type(layer).__name__}) is recurrent but the "
                                   "model keeps its state outside the cache: a step over it is not supported")
            slots += [StateSlot(i, kind, k, tuple(t.shape), t.dtype) for kind, k, t in states]
    return slots


def state_tensors(slots: Sequence[StateSlot]) -> list[torch.Tensor]:
    """One tensor per slot on the default device: random values from torch's global generator (which
    validation seeds), empty on ``meta``."""
    if torch.get_default_device().type == "meta":
        return [torch.empty(s.shape, dtype=s.dtype) for s in slots]
    return [torch.randn(s.shape, dtype=torch.float32).to(s.dtype) for s in slots]


class HFStateStep(nn.Module):
    """A Hugging Face model with recurrent cache layers as one step: ``forward(ids, *tensors)``, one tensor
    per :class:`StateSlot`, returns the logits, every layer's keys and values after the step (the grown
    ``DynamicCache``) and every updated state."""

    def __init__(self, lm: nn.Module, step: Any, slots: Sequence[StateSlot]):
        super().__init__()
        self.lm, self.step, self.slots = lm, step, tuple(slots)

    def forward(self, ids: torch.Tensor, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        from transformers import DynamicCache

        from .phases import _fixed_shape_masks

        past = self.step.kv_len
        cache = DynamicCache(config=self.lm.config)
        given = {(s.layer, s.kind, s.index): t for s, t in zip(self.slots, tensors, strict=True)}
        for (i, kind, k), t in given.items():
            layer = cache.layers[i]
            if kind == "keys":
                layer.lazy_initialization(t, given[(i, "values", 0)])
                layer.keys, layer.values = t, given[(i, "values", 0)]
                if hasattr(layer, "cumulative_length"):  # a sliding-window layer counts every position seen
                    layer.cumulative_length = past
            elif kind in ("conv", "recurrent"):
                attr = SLOTS[kind][1]
                layer.lazy_initialization(**{attr: t, "state_idx": k})
                getattr(layer, attr)[k] = t
                layer.has_previous_state[k] = True
                layer.cumulative_length_linear = torch.full((), past, dtype=torch.int64, device=ids.device)
        s = ids.shape[1]
        kwargs: dict[str, Any] = {"input_ids": ids, cache_keyword(self.lm): cache, "use_cache": True}
        if "position_ids" in inspect.signature(self.lm.forward).parameters:
            kwargs["position_ids"] = (torch.arange(s, device=ids.device) + past).unsqueeze(0).expand(ids.shape[0], s)
        with _fixed_shape_masks():
            out = self.lm(**kwargs)
        return (out.logits, *(sl.of(cache) for sl in self.slots))


def state_source(source: Any, step: Any, probe: nn.Module) -> Any:
    """``source`` (a Hugging Face model with recurrent cache layers, ``probe`` built on meta) as one
    ``step``: :class:`HFStateStep` over the inputs of :func:`state_slots`."""
    from dataclasses import replace

    from .phases import _hf_dynamic_lengths, _named_forward, _token_ids

    if step.cache != "dynamic":
        raise CaptureError(f"{source.name}: --cache {step.cache}: the model's cache keeps recurrent states, which "
                           "transformers keeps in a DynamicCache only: use --cache dynamic")
    cfg = probe.config.get_text_config(decoder=True) if hasattr(probe.config, "get_text_config") else probe.config
    slots = state_slots(probe, step.batch, _hf_dynamic_lengths(probe, step, cfg.num_hidden_layers), source.name)
    vocab, base_model = int(cfg.vocab_size), source.model_factory
    named = _named_forward(HFStateStep, ["ids", *(s.name for s in slots)])

    def model() -> nn.Module:
        return named(base_model(), step, slots)

    def inputs() -> list[Any]:  # torch's global generator: validation seeds it
        return [_token_ids(step, vocab, None), *state_tensors(slots)]

    return replace(source, model_factory=model, inputs_factory=inputs)


__all__ = ["SLOTS", "STATE_INPUTS", "HFStateStep", "StateSlot", "cache_keyword", "has_recurrent_layers", "is_recurrent",
           "state_slots", "state_source", "state_tensors"]
