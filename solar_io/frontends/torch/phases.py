"""Prefill and decode steps of causal LMs over a KV cache (``solar-io capture --phase ...``).

A *step* is one forward call of a serving loop: ``prefill`` feeds ``seq`` prompt tokens per
sequence (after ``kv_len`` cached ones: 0 unless the prompt is chunked); ``decode`` feeds one
token per sequence (``seq`` = 1 by default) after ``kv_len`` cached ones. The cache is an *input*
of the captured graph: its tensors hold exactly ``kv_len`` positions, so the bound reads them,
and the step's outputs are the logits and what the step writes into the cache.

Cache kinds (``--cache``):

``dynamic``
    The cache of each layer is ``(k, v)`` of shape (batch, kv_heads, kv_len, head_dim); the step
    returns the grown cache (kv_len + seq positions, a ``torch.cat`` per layer: what Hugging
    Face's ``DynamicCache`` does every step, so the copy is part of the step's work).
``static``
    The same inputs; the step returns only the ``seq`` new entries per layer (the writes into a
    preallocated buffer): no copy of the old entries is charged. A Hugging Face model gets
    transformers' ``StaticCache``: per layer a buffer of ``kv_len + seq`` positions (the smallest
    ``max_cache_len`` that holds the step, so attention reads no unwritten slot), the step's
    ``index_copy_`` writes the last ``seq`` (a scatter: only those are charged) and returns them.
    The fused bound reads the ``kv_len`` filled positions of each buffer (the slots the scatter
    writes before attention reads them are not read: ``views.boundary_reads``).
``paged``
    A block table (batch, ceil(kv_len / page_size)) int32 of page numbers and, per layer, page
    pools ``(k_pages, v_pages)`` of shape (batch * pages_per_seq, page_size, kv_heads, head_dim)
    (vLLM's layout); the step gathers its pages, attends over the first kv_len positions and
    returns the new entries. The page numbers are a permutation (each sequence owns its pages).

Two kinds of model take part:

- **Hugging Face causal LMs** (a module with a ``config`` that has ``num_hidden_layers``): the
  model is called as ``lm(input_ids=ids, past_key_values=DynamicCache(...), position_ids=...)``
  with the cache built from the input tensors: ``dynamic`` (``DynamicCache``) or ``static``
  (``StaticCache`` over the input buffers, ``cache_position`` given so no length is read from
  the cache's counter tensor). A sliding-window layer's ``DynamicCache`` input holds
  ``min(kv_len, window - 1)`` positions (all it keeps) and its position counter is set to kv_len,
  so its mask is the window's. ``paged`` is refused: transformers has no paged cache that a
  forward takes (its ``PagedAttentionCache`` lives inside the continuous-batching generate loop).
- **Hugging Face models whose cache keeps recurrent states** (Mamba, Jamba, Qwen3-Next, Bamba ...:
  transformers' ``LinearAttentionLayer``): :mod:`.state_step`, ``dynamic`` only; the states are inputs
  and are updated in place.
- **Plain PyTorch decoders** with a method ``kv_cache_layout() -> (layers, kv_heads, head_dim)``
  and a forward ``forward(ids, past_key_values, block_table=None, cache="dynamic", kv_len=None)``, where
  ``past_key_values`` is a list of per-layer ``(k, v)`` pairs (page pools for ``paged``). The
  forward returns ``(logits, new_cache)``, ``new_cache`` a list of ``(k, v)`` pairs; ``kv_len`` is
  the number of valid cached positions (a paged cache's last page may be partly filled) (see
  ``examples/models/llama_kv.py``).

The step is recorded in the graph as ``Assumption("step", phase, ...)`` with batch, seq,
kv_len, the cache kind, page size, the names of the cache input tensors (the floating-point
inputs) and of the cache entries the step writes (its 4-D outputs: (batch, kv_heads, positions,
head_dim); the logits are 3-D).

>>> s = Step("decode", batch=64, kv_len=8192)
>>> s.seq, s.tokens, s.cache
(1, 64, 'dynamic')
>>> Step("prefill", batch=2, seq=128).kv_len
0
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from ...graph import Assumption, Graph
from ..common.errors import CaptureError, InputSpecError
from .loader import Source
from .state_step import STATE_INPUTS, has_recurrent_layers, state_source

PHASES = ("prefill", "decode")
CACHES = ("static", "dynamic", "paged")
DEFAULT_PAGE = 16


@dataclass(frozen=True)
class Step:
    """One serving step: phase, batch, tokens per sequence (``seq``), cached positions (``kv_len``),
    cache kind and page size (paged caches). InputSpecError (one line) on values that cannot be."""

    phase: str
    batch: int = 1
    seq: int | None = None
    kv_len: int = 0
    cache: str = "dynamic"
    page_size: int = DEFAULT_PAGE

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise InputSpecError(f"bad --phase {self.phase!r}: use prefill or decode")
        if self.cache not in CACHES:
            raise InputSpecError(f"bad --cache {self.cache!r}: use {', '.join(CACHES)}")
        seq = self.seq if self.seq is not None else (1 if self.phase == "decode" else None)
        if seq is None:
            raise InputSpecError("--phase prefill needs --seq S (the prompt tokens per sequence)")
        object.__setattr__(self, "seq", seq)
        for flag, v in (("--batch", self.batch), ("--seq", seq), ("--page-size", self.page_size)):
            if not isinstance(v, int) or v <= 0:
                raise InputSpecError(f"bad {flag} {v!r}: must be a positive integer")
        if not isinstance(self.kv_len, int) or self.kv_len < 0:
            raise InputSpecError(f"bad --kv-len {self.kv_len!r}: must be an integer >= 0")
        if self.phase == "decode" and self.kv_len == 0:
            raise InputSpecError("--phase decode needs --kv-len L > 0 (the positions already in the KV cache)")

    @property
    def tokens(self) -> int:
        """Tokens the step feeds: batch x seq."""
        return self.batch * int(self.seq or 0)

    @property
    def pages(self) -> int:
        """Pages per sequence of a paged cache: ceil(kv_len / page_size)."""
        return math.ceil(self.kv_len / self.page_size)

    def assumption(self, cache_inputs: tuple[str, ...], cache_outputs: tuple[str, ...] = ()) -> Assumption:
        """The graph's record of this step."""
        what = (f"{self.phase} step of {self.seq} token(s) per sequence for {self.batch} sequence(s) after "
                f"{self.kv_len} cached position(s); {self.cache} KV cache")
        values: list[tuple[str, Any]] = [("batch", self.batch), ("seq", int(self.seq or 0)),
                                         ("kv_len", self.kv_len), ("cache", self.cache)]
        if self.cache == "paged":
            what += f" of {self.page_size}-position pages"
            values.append(("page_size", self.page_size))
        values += [("cache_inputs", tuple(cache_inputs)), ("cache_outputs", tuple(cache_outputs))]
        return Assumption("step", self.phase, what, tuple(values))


@dataclass(frozen=True)
class CacheLayout:
    """What one cached position holds per layer: ``k`` and ``v`` as (heads, dim).

    Usually both are (kv_heads, head_dim); DeepSeek's multi-head latent attention caches the
    compressed latent (1, kv_lora_rank) as its "keys" and the shared rotary key (1, qk_rope_head_dim)
    as its "values" (transformers >= 5)."""

    layers: int
    k: tuple[int, int]
    v: tuple[int, int]


def cache_tensors(step: Step, layout: CacheLayout, dtype: torch.dtype, gen: torch.Generator | None = None,
                  positions: int | Sequence[int] | None = None) -> tuple[torch.Tensor | None, list[tuple[Any, Any]]]:
    """(block table or None, per-layer (k, v)) for ``step`` on the default device.

    Contiguous caches are (batch, heads, positions, dim), ``positions`` = kv_len unless given, for
    every layer or per layer (a Hugging Face static buffer holds the step's slots too; a
    sliding-window layer holds its window); paged pools are
    (batch * pages, page_size, heads, dim) with a permuted int32 block table.

    >>> bt, kv = cache_tensors(Step("decode", batch=2, kv_len=5, cache="paged", page_size=4),
    ...                        CacheLayout(1, (3, 8), (3, 8)), torch.float32)
    >>> tuple(bt.shape), tuple(kv[0][0].shape)
    ((2, 2), (4, 4, 3, 8))
    """
    def rand(*shape: int) -> torch.Tensor:
        if torch.get_default_device().type == "meta":
            return torch.empty(shape, dtype=dtype)
        return torch.randn(shape, dtype=torch.float32, generator=gen).to(dtype)

    if step.cache == "paged":
        n = step.batch * step.pages
        order = torch.randperm(n, generator=gen, device="cpu").to(torch.int32).view(step.batch, step.pages)
        table = order.to(torch.get_default_device())
        return table, [(rand(n, step.page_size, *layout.k), rand(n, step.page_size, *layout.v))
                       for _ in range(layout.layers)]
    (hk, dk), (hv, dv) = layout.k, layout.v
    n = step.kv_len if positions is None else positions
    lengths = [n] * layout.layers if isinstance(n, int) else list(n)
    return None, [(rand(step.batch, hk, m, dk), rand(step.batch, hv, m, dv)) for m in lengths]


def _token_ids(step: Step, vocab: int, gen: torch.Generator | None) -> torch.Tensor:
    ids = torch.randint(0, vocab, (step.batch, int(step.seq or 0)), generator=gen, device="cpu")
    return ids.to(torch.get_default_device())


def _is_hf(m: nn.Module) -> bool:
    cfg = getattr(m, "config", None)
    return cfg is not None and hasattr(cfg, "num_hidden_layers") and hasattr(m, "get_input_embeddings")


def _hf_layout(m: nn.Module, name: str) -> tuple[CacheLayout, int]:
    """The cache layout and vocabulary of a Hugging Face causal LM whose cache is keys and values in every
    layer, from its config (a model with recurrent cache layers is :mod:`.state_step`'s). CaptureError
    naming ``name`` for a model with no attention heads whose cache transformers does not keep (RWKV's
    state is an argument of its own)."""
    cfg = m.config.get_text_config(decoder=True) if hasattr(m.config, "get_text_config") else m.config
    if not hasattr(cfg, "num_attention_heads"):
        raise CaptureError(f"{name}: --phase: its config ({type(cfg).__name__}) has no attention heads and "
                           "transformers' DynamicCache keeps no recurrent state for it: a step over its state is "
                           "not supported; capture the whole sequence without --phase")
    if getattr(cfg, "kv_lora_rank", None) and getattr(cfg, "qk_rope_head_dim", None):  # MLA: the latent
        return CacheLayout(cfg.num_hidden_layers, (1, cfg.kv_lora_rank), (1, cfg.qk_rope_head_dim)), cfg.vocab_size
    heads = cfg.num_attention_heads
    kv = getattr(cfg, "num_key_value_heads", None) or heads
    hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    return CacheLayout(cfg.num_hidden_layers, (kv, hd), (kv, hd)), cfg.vocab_size


def _hf_dynamic_lengths(m: nn.Module, step: Step, layers: int) -> int | tuple[int, ...]:
    """Positions each layer of a Hugging Face ``DynamicCache`` holds after ``kv_len`` tokens: all of
    them, or ``min(kv_len, window - 1)`` for a sliding-window layer (it keeps only what the next
    token can attend to); one int when every layer holds kv_len."""
    from transformers import DynamicCache

    cache = DynamicCache(config=m.config)
    lengths = tuple(min(step.kv_len, int(layer.sliding_window) - 1) if getattr(layer, "is_sliding", False)
                    and getattr(layer, "sliding_window", None) else step.kv_len for layer in cache.layers[:layers])
    if len(lengths) < layers or all(n == step.kv_len for n in lengths):
        return step.kv_len
    return lengths


class HFStep(nn.Module):
    """A Hugging Face causal LM as one step: ``forward(ids, k0, v0, k1, v1, ...)`` builds a
    ``DynamicCache`` holding those tensors and returns the logits and the grown cache."""

    def __init__(self, lm: nn.Module, step: Step):
        super().__init__()
        self.lm, self.step = lm, step

    def forward(self, ids: torch.Tensor, *kv: torch.Tensor) -> tuple[torch.Tensor, ...]:
        s, past = ids.shape[1], self.step.kv_len
        if self.step.cache == "static":
            return self._static(ids, kv, s, past)
        from transformers import DynamicCache

        cache = DynamicCache(config=self.lm.config)
        for i, layer in enumerate(cache.layers[: len(kv) // 2]):
            layer.lazy_initialization(kv[2 * i], kv[2 * i + 1])
            layer.keys, layer.values = kv[2 * i], kv[2 * i + 1]
            if hasattr(layer, "cumulative_length"):  # a sliding-window layer counts every position seen
                layer.cumulative_length = past
        pos = (torch.arange(s, device=ids.device) + past).unsqueeze(0).expand(ids.shape[0], s)
        with _fixed_shape_masks():
            out = self.lm(input_ids=ids, past_key_values=cache, position_ids=pos, use_cache=True)
        grown = [t for layer in cache.layers[: len(kv) // 2] for t in (layer.keys, layer.values)]
        return (out.logits, *grown)

    def _static(self, ids: torch.Tensor, kv: tuple[torch.Tensor, ...], s: int, past: int) -> tuple[torch.Tensor, ...]:
        """A ``StaticCache`` over the input buffers (``past + s`` positions each, the first ``past``
        filled): the model writes its ``s`` new entries in place; they are returned."""
        from transformers import StaticCache

        cache = StaticCache(config=self.lm.config, max_cache_len=past + s)
        layers = cache.layers[: len(kv) // 2]
        for i, layer in enumerate(layers):
            if getattr(layer, "is_sliding", False) or getattr(layer, "max_cache_len", past + s) != past + s:
                raise CaptureError(f"--cache static: layer {i} of the Hugging Face model is a sliding-window layer "
                                   f"(a rolling buffer of {layer.max_cache_len} positions): use --cache dynamic")
            layer.lazy_initialization(kv[2 * i], kv[2 * i + 1])
            layer.keys, layer.values = kv[2 * i], kv[2 * i + 1]
            layer.cumulative_length = torch.full((), past, dtype=torch.int64, device=ids.device)
        at = torch.arange(s, device=ids.device) + past
        pos = at.unsqueeze(0).expand(ids.shape[0], s)
        with _fixed_shape_masks():
            out = self.lm(input_ids=ids, past_key_values=cache, position_ids=pos, cache_position=at, use_cache=True)
        new = [t[:, :, past:] for layer in layers for t in (layer.keys, layer.values)]
        return (out.logits, *new)


@contextmanager
def _fixed_shape_masks() -> Iterator[None]:
    """Let transformers' mask code skip the explicit causal mask as it does when not exporting.

    Under ``torch.export`` transformers always materialises the mask, because an exported graph
    would hard-code SDPA's ``is_causal`` for the example's shape (pytorch#108108). A solar-io graph
    is captured for one fixed shape, so the eager choice is exact here: a prefill without padding
    gets ``is_causal=True`` (the causal triangle), a one-token decode no mask (the full row).
    """
    try:
        import transformers.masking_utils as mu
    except ImportError:
        yield
        return
    saved = getattr(mu, "is_torchdynamo_exporting", None)
    if saved is None:
        yield
        return
    mu.is_torchdynamo_exporting = lambda: False
    try:
        yield
    finally:
        mu.is_torchdynamo_exporting = saved


class PlainStep(nn.Module):
    """A plain decoder (``kv_cache_layout()``) as one step: ``forward(ids, [block_table,] k0, v0, ...)``
    calls ``model(ids, past_key_values=[(k0, v0), ...], block_table=..., cache=kind, kv_len=L)`` and returns the
    logits and every tensor of the new cache it gives back."""

    def __init__(self, model: nn.Module, step: Step):
        super().__init__()
        self.model, self.step = model, step

    def forward(self, ids: torch.Tensor, *flat: torch.Tensor) -> tuple[torch.Tensor, ...]:
        table = flat[0] if self.step.cache == "paged" else None
        kv = flat[1:] if table is not None else flat
        pairs = [(kv[i], kv[i + 1]) for i in range(0, len(kv), 2)]
        out = self.model(ids, past_key_values=pairs, block_table=table, cache=self.step.cache,
                         kv_len=self.step.kv_len)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise CaptureError("a plain decoder step must return (logits, new_cache)")
        logits, new = out
        return (logits, *[t for pair in new for t in pair])


def step_source(source: Source, step: Step) -> Source:
    """``source`` turned into one ``step``: the model wrapped (:class:`HFStep`, :class:`PlainStep`)
    and the inputs made by :func:`cache_tensors`. CaptureError naming the file when the model is
    neither a Hugging Face causal LM nor a decoder with ``kv_cache_layout()``."""
    probe = source.model("meta")
    buffer = step.kv_len  # positions per cache input
    if _is_hf(probe):
        try:
            import transformers  # noqa: F401
        except ImportError as e:
            raise CaptureError(f"{source.name}: --phase: the model is a Hugging Face model (a config with "
                               "num_hidden_layers), whose cache needs transformers: pip install 'solar-io[zoo]'") from e
        if step.cache == "paged":
            raise CaptureError(f"{source.name}: --cache paged: transformers has no paged KV cache that a model's "
                               "forward takes (its PagedAttentionCache lives inside the continuous-batching generate "
                               "loop); use --cache dynamic or static, or a plain decoder taking (k, v) page pools "
                               "and a block table")
        if has_recurrent_layers(probe):
            return state_source(source, step, probe)
        layout, vocab = _hf_layout(probe, source.name)
        if step.cache == "static":
            buffer = step.kv_len + int(step.seq or 0)  # StaticCache's max_cache_len: the step's slots included
        else:
            buffer = _hf_dynamic_lengths(probe, step, layout.layers)
        wrap: type[nn.Module] = HFStep
    elif callable(getattr(probe, "kv_cache_layout", None)):
        layers, kv_heads, head_dim = (int(x) for x in probe.kv_cache_layout())
        layout = CacheLayout(layers, (kv_heads, head_dim), (kv_heads, head_dim))
        vocab = _vocab(probe)
        wrap = PlainStep
    else:
        raise CaptureError(f"{source.name}: --phase needs a causal LM that takes a KV cache: a Hugging Face "
                           "model (a config with num_hidden_layers) or a module with kv_cache_layout() -> "
                           "(layers, kv_heads, head_dim) and forward(ids, past_key_values, block_table, cache)")
    dtype = _cache_dtype(probe, source)
    del probe
    base_model = source.model_factory
    pool = "pages" if step.cache == "paged" else "cache"
    names = ["ids", *(["block_table"] if step.cache == "paged" else []),
             *[f"{kv}_{pool}_{i}" for i in range(layout.layers) for kv in ("k", "v")]]
    named = _named_forward(wrap, names)

    def model() -> nn.Module:
        return named(base_model(), step)

    def inputs() -> list[Any]:  # torch's global generator: validation seeds it
        table, kv = cache_tensors(step, layout, dtype, positions=buffer)
        flat = [t for pair in kv for t in pair]
        return [_token_ids(step, vocab, None), *([table] if table is not None else []), *flat]

    return replace(source, model_factory=model, inputs_factory=inputs)


def _named_forward(cls: type[nn.Module], names: list[str]) -> type[nn.Module]:
    """``cls`` whose forward declares one parameter per input (so the graph's input tensors are
    named ``ids``, ``block_table``, ``k_cache_0``, ... rather than ``flat_0``)."""
    def forward(self: nn.Module, *args: Any) -> Any:
        return cls.forward(self, *args)

    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    forward.__signature__ = inspect.Signature([inspect.Parameter(n, kind) for n in ["self", *names]])  # type: ignore[attr-defined]
    return type(cls.__name__, (cls,), {"forward": forward})


def _vocab(m: nn.Module) -> int:
    for sub in m.modules():
        if isinstance(sub, nn.Embedding):
            return int(sub.num_embeddings)
    raise CaptureError("the decoder has no nn.Embedding: cannot tell its vocabulary size for the token ids")


def _cache_dtype(m: nn.Module, source: Source) -> torch.dtype:
    """The cache's dtype: ``--dtype`` if given, else that of the model's first floating parameter."""
    if source.dtype is not None:
        return source.dtype
    for p in m.parameters():
        if p.is_floating_point():
            return p.dtype
    return torch.float32


def record_step(g: Graph, step: Step) -> Graph:
    """``g`` with the step's assumption appended; CaptureError if no cache input of the step's
    length reached the graph (the model ignored its cache)."""
    cache = tuple(t.name for t in g.tensors if t.role == "input" and not t.dtype.startswith(("int", "uint", "bool")))
    written = tuple(t.name for t in g.tensors if t.role == "output"  # (b, kv, pos, hd), or a cache input updated
                    and (len(t.ranks) == 4 or t.updates in cache))
    if step.kv_len and not cache:
        raise CaptureError(f"{g.name}: the {step.phase} step's graph reads no KV cache input (the model ignored "
                           "past_key_values?)")
    full = {step.kv_len, step.kv_len + int(step.seq or 0)}  # a static HF buffer holds the step's slots too
    kv = [n for n in cache if not n.startswith(STATE_INPUTS)]  # recurrent states hold no positions
    if step.kv_len and step.cache != "paged" and kv and not any(
            full & set(g.shape(n)) or _window(g.shape(n), step.kv_len) for n in kv):
        raise CaptureError(f"{g.name}: no cache input of the graph has kv_len = {step.kv_len} positions")
    record = step.assumption(cache, written)
    if any(n.startswith(STATE_INPUTS) for n in cache):
        record = replace(record, detail=record.detail + " with recurrent states (convolution windows, SSM or linear "
                         "attention states: conv_state_*, ssm_state_*) read and updated in place")
    return replace(g, assumptions=(*g.assumptions, record))


def _window(shape: tuple[int, ...], kv_len: int) -> bool:
    """Whether ``shape`` is a sliding-window layer's cache: (batch, heads, window - 1 < kv_len, dim)."""
    return len(shape) == 4 and 0 < shape[2] < kv_len
