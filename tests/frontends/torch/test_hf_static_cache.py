"""Hugging Face decode and chunked prefill over transformers' StaticCache (``--cache static``; phases.py).

A two-layer Llama from a small config (random weights, nothing downloaded): vocabulary V, width D,
H query and KV key/value heads of HD, feed-forward F. The static buffers hold kv_len + seq
positions; the model's ``index_copy_`` writes the step's seq and attention reads them all. By hand
(fp32): the fused kernel reads every weight once (the embedding at the batch's rows), the rotary
``inv_freq``, the token ids and the kv_len cached positions per layer (the written slots are never
read: views.py's scatter reads), and writes the logits and the new entries (the written slots of the
caches, which the program changes without returning them: outputs updating them in place, each slot
charged once). A sliding-window
model (Mistral, window W = 8) holds W - 1 positions per layer in its DynamicCache and attends the
last W. Skipped without transformers (optional extra ``zoo``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from solar_io import graph_metrics  # noqa: E402
from solar_io.frontends.common.errors import CaptureError  # noqa: E402
from solar_io.frontends.torch.capture import capture_file  # noqa: E402
from solar_io.frontends.torch.phases import Step  # noqa: E402

V, D, H, KV, HD, F, LAYERS = 256, 64, 4, 2, 16, 160, 2
B, L = 2, 20
FP32, INT64 = 4, 8

HF_MODEL = f"""\
import torch
from transformers import LlamaConfig, LlamaForCausalLM

def Model():
    cfg = LlamaConfig(vocab_size={V}, hidden_size={D}, intermediate_size={F}, num_hidden_layers={LAYERS},
                      num_attention_heads={H}, num_key_value_heads={KV}, max_position_embeddings=4096)
    cfg._attn_implementation = "sdpa"
    return LlamaForCausalLM(cfg)

def get_inputs():
    return [torch.randint(0, {V}, (1, 8))]
"""


@pytest.fixture(scope="module")
def hf_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("hf_static") / "hf_llama.py"
    p.write_text(HF_MODEL)
    return p


def _macs(tokens: int, attended: int) -> int:
    """Projections, SwiGLU and the head per token; QK^T and PV over ``attended`` scores per head."""
    proj = D * D + 2 * D * KV * HD + D * D + 3 * D * F
    return tokens * (LAYERS * proj + D * V) + LAYERS * 2 * H * attended * HD


def test_static_decode_validates_and_reads_the_cache_once(hf_file: Path) -> None:
    g = capture_file(hf_file, step=Step("decode", batch=B, kv_len=L, cache="static"))
    assert g.validation.status == "passed", g.validation.reason
    m = graph_metrics(g)
    assert not m.opaque and m.macs == _macs(B, B * (L + 1)) == 215552
    shapes = {t.name: g.shape(t.name) for t in g.tensors if t.role in ("input", "output")}
    assert all(shapes[f"{kv}_cache_{i}"] == (B, KV, L + 1, HD) for i in range(LAYERS) for kv in "kv")
    # The caches, changed by index_copy_ and not returned, are outputs updating them in place (the program's
    # effect on memory); the returned new entries are slices of them: the written slot is charged once.
    updated = {t.updates: t.name for t in g.tensors if t.role == "output" and t.updates is not None}
    assert sorted(updated) == sorted(f"{kv}_cache_{i}" for i in range(LAYERS) for kv in "kv")
    new = [t.name for t in g.tensors if t.role == "output" and len(g.shape(t.name)) == 4 and t.updates is None]
    assert len(new) == 2 * LAYERS and all(shapes[n] == (B, KV, 1, HD) for n in new)
    scatters = [i for i, n in enumerate(g.nodes) if n.op == "aten.index_copy"]
    assert len(scatters) == 2 * LAYERS  # each writes its one slot: the new entry read, the slot written, the index
    assert all(m.nodes[i].bytes == 2 * FP32 * B * KV * HD + INT64 for i in scatters)
    per_layer = 2 * D + 2 * D * D + 2 * D * KV * HD + 3 * D * F
    weights = FP32 * (LAYERS * per_layer + D + D * V + B * D)
    cache = FP32 * LAYERS * 2 * B * KV * L * HD  # kv_len positions: the written slot is never read
    written = FP32 * LAYERS * 2 * B * KV * HD + FP32 * B * V
    assert m.boundary_bytes == weights + cache + written + INT64 * B + FP32 * HD // 2 == 434992
    step = dict(next(a for a in g.assumptions if a.kind == "step").values)
    assert (step["cache"], step["kv_len"], step["cache_outputs"]) == ("static", L, (*updated.values(), *new))


def test_static_chunked_prefill_is_priced_at_the_mask(hf_file: Path) -> None:
    c = 4  # queries i = 0..3 see keys 0 .. L + i: 4 * 21 + 6 = 90 of 4 * 24 = 96 per sequence
    g = capture_file(hf_file, step=Step("prefill", batch=B, seq=c, kv_len=L, cache="static"))
    assert g.validation.status == "passed", g.validation.reason
    assert graph_metrics(g).macs == _macs(B * c, B * c * (L + c))  # the rectangle, as FlopCounterMode counts
    (mask,) = [dict(a.values) for a in g.assumptions if a.kind == "attention_mask"]
    assert (mask["kept"], mask["positions"], mask["known"]) == (B * 90, B * 96, True)


def test_paged_stays_a_clear_error(hf_file: Path) -> None:
    with pytest.raises(CaptureError, match="no paged KV cache"):
        capture_file(hf_file, step=Step("decode", kv_len=4, cache="paged"), validate=False)


SLIDING = (HF_MODEL.replace("LlamaConfig, LlamaForCausalLM", "MistralConfig, MistralForCausalLM")
           .replace("cfg = LlamaConfig(", "cfg = MistralConfig(sliding_window=8, ")
           .replace("LlamaForCausalLM(cfg)", "MistralForCausalLM(cfg)"))


def test_sliding_window_layers_hold_and_attend_their_window(tmp_path: Path) -> None:
    p = tmp_path / "mistral.py"
    p.write_text(SLIDING)
    dec = capture_file(p, step=Step("decode", batch=1, kv_len=L))
    assert dec.validation.status == "passed", dec.validation.reason
    shapes = {t.name: dec.shape(t.name) for t in dec.tensors if t.role == "input"}
    assert all(shapes[f"{kv}_cache_{i}"] == (1, KV, 7, HD) for i in range(LAYERS) for kv in "kv")  # W - 1
    assert graph_metrics(dec).macs == _macs(1, 8) == 104448  # the last W = 8 positions, not kv_len + 1
    pre = capture_file(p, step=Step("prefill", batch=1, seq=4, kv_len=L), validate=False)
    (mask,) = [dict(a.values) for a in pre.assumptions if a.kind == "attention_mask"]
    assert (mask["kept"], mask["positions"]) == (4 * 8, 4 * 11)  # each query its window of 8 of 7 + 4 keys
    with pytest.raises(CaptureError, match="sliding-window"):
        capture_file(p, step=Step("decode", kv_len=4, cache="static"), validate=False)
