"""Decode steps over a KV cache (issue 18 item 4): MACs and bytes of a two-layer Llama-shaped decoder by hand.

The model is ``examples/models/llama_kv.py`` at the configuration written below (fp32): vocabulary
V, width D, H query heads and KV key/value heads of HD, feed-forward F, two layers.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

from paths import ROOT

from solar_io import graph_metrics  # noqa: E402
from solar_io.frontends.common.errors import CaptureError, InputSpecError  # noqa: E402
from solar_io.frontends.torch.capture import capture_file  # noqa: E402
from solar_io.frontends.torch.phases import Step  # noqa: E402

EXAMPLE = ROOT / "examples" / "models" / "llama_kv.py"
V, D, H, KV, HD, F, LAYERS = 256, 64, 4, 2, 16, 160, 2
B, L = 2, 1000
FP32, INT64, INT32 = 4, 8, 4


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("decode") / "two_layer_llama.py"
    p.write_text(textwrap.dedent(f"""\
        import importlib.util
        import torch
        _spec = importlib.util.spec_from_file_location("llama_kv_example", {str(EXAMPLE)!r})
        _m = importlib.util.module_from_spec(_spec)
        _spec.loader.exec_module(_m)

        class Model(_m.Model):
            def __init__(self):
                super().__init__(vocab={V}, d={D}, layers={LAYERS}, heads={H}, kv_heads={KV}, ff={F})

        def get_inputs():
            return [torch.randint(0, {V}, (1, 1))]
        """))
    return p


def _macs_per_token(kv_len: int) -> int:
    """q, k, v, o projections, SwiGLU and attention over kv_len + 1 positions, per layer; the head."""
    proj = D * D + 2 * D * KV * HD + D * D + 3 * D * F
    attention = 2 * H * (kv_len + 1) * HD  # QK^T and PV: one full row of kv_len + 1 scores per head
    return LAYERS * (proj + attention) + D * V


def _weight_bytes(batch: int) -> int:
    """Every weight once; the embedding only at the rows the batch's tokens read."""
    per_layer = 2 * D + 2 * D * D + 2 * D * KV * HD + 3 * D * F
    return FP32 * (LAYERS * per_layer + D + D * V + batch * D)


CACHE_READ = FP32 * LAYERS * 2 * B * KV * L * HD          # k and v of every layer, L positions
NEW_ENTRIES = FP32 * LAYERS * 2 * B * KV * 1 * HD         # the one position each layer writes
FIXED = INT64 * B + FP32 * HD // 2 + FP32 * B * V          # token ids, the rotary inv_freq buffer, the logits


def test_static_decode_bytes_and_macs_by_hand(model_file: Path) -> None:
    g = capture_file(model_file, step=Step("decode", batch=B, kv_len=L, cache="static"), validate=False)
    m = graph_metrics(g)
    assert m.macs == B * _macs_per_token(L) == 717312
    assert m.boundary_bytes == _weight_bytes(B) + CACHE_READ + NEW_ENTRIES + FIXED == 1438512
    assert not m.opaque
    inputs = {t.name: g.shape(t.name) for t in g.tensors if t.role == "input"}
    assert inputs == {"ids": (B, 1), **{f"{kv}_cache_{i}": (B, KV, L, HD) for i in range(LAYERS) for kv in "kv"}}
    step = next(a for a in g.assumptions if a.kind == "step")
    assert step.subject == "decode" and dict(step.values)["kv_len"] == L and dict(step.values)["cache"] == "static"
    assert dict(step.values)["cache_inputs"] == ("k_cache_0", "v_cache_0", "k_cache_1", "v_cache_1")


def test_dynamic_decode_writes_the_grown_cache(model_file: Path) -> None:
    g = capture_file(model_file, step=Step("decode", batch=B, kv_len=L), validate=False)
    m = graph_metrics(g)
    grown = FP32 * LAYERS * 2 * B * KV * (L + 1) * HD  # torch.cat(past, new) per layer, returned
    assert m.macs == B * _macs_per_token(L)
    assert m.boundary_bytes == _weight_bytes(B) + CACHE_READ + grown + FIXED == 2462512


def test_paged_decode_reads_its_pages_through_the_block_table(model_file: Path) -> None:
    page = 16
    g = capture_file(model_file, step=Step("decode", batch=B, kv_len=L, cache="paged", page_size=page),
                     validate=False)
    m = graph_metrics(g)
    pages = -(-L // page)  # 63: the last page holds 1000 - 62 * 16 = 8 valid positions
    shapes = {t.name: g.shape(t.name) for t in g.tensors if t.role == "input"}
    assert shapes["block_table"] == (B, pages) and shapes["k_pages_0"] == (B * pages, page, KV, HD)
    # the pools are read at the L valid slots of each sequence only; the table is read whole
    assert m.boundary_bytes == _weight_bytes(B) + CACHE_READ + NEW_ENTRIES + FIXED + INT32 * B * pages == 1439016
    assert m.macs == B * _macs_per_token(L)
    assert dict(next(a for a in g.assumptions if a.kind == "step").values)["page_size"] == page


def test_paged_decode_validates_against_the_model(model_file: Path) -> None:
    g = capture_file(model_file, step=Step("decode", batch=2, kv_len=13, cache="paged", page_size=4))
    assert g.validation.status == "passed"


def test_bad_steps_are_one_line_errors(model_file: Path, tmp_path: Path) -> None:
    with pytest.raises(InputSpecError, match="--kv-len"):
        Step("decode", batch=2)
    with pytest.raises(InputSpecError, match="--cache"):
        Step("decode", kv_len=4, cache="ring")
    with pytest.raises(InputSpecError, match="--seq"):
        Step("prefill", batch=2)
    plain = tmp_path / "mlp.py"
    plain.write_text("import torch\nclass Model(torch.nn.Linear):\n    def __init__(self):\n"
                     "        super().__init__(4, 4)\ndef get_inputs():\n    return [torch.randn(2, 4)]\n")
    with pytest.raises(CaptureError, match="kv_cache_layout"):
        capture_file(plain, step=Step("decode", kv_len=4), validate=False)


def test_cli_decode_writes_the_step(model_file: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from solar_io.cli.main import app
    from solar_io.format.files import load

    out = tmp_path / "d.yaml"
    r = CliRunner().invoke(app, ["capture", str(model_file), "--phase", "decode", "--batch", "3", "--kv-len", "9",
                                 "--cache", "static", "--no-validate", "-o", str(out)])
    assert r.exit_code == 0, r.output
    g = load(out)
    step = dict(next(a for a in g.assumptions if a.kind == "step").values)
    assert (step["batch"], step["seq"], step["kv_len"], step["cache"]) == (3, 1, 9, "static")
    r = CliRunner().invoke(app, ["capture", str(model_file), "--phase", "decode", "--no-validate"])
    assert r.exit_code != 0 and isinstance(r.exception, InputSpecError) and "--kv-len" in str(r.exception)
    r = CliRunner().invoke(app, ["capture", str(model_file), "--kv-len", "9", "--no-validate"])  # no --phase
    assert r.exit_code != 0 and "--phase" in str(r.exception)


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


def test_hugging_face_llama_decode_and_prefill(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    p = tmp_path / "hf_llama.py"
    p.write_text(HF_MODEL)
    dec = capture_file(p, step=Step("decode", batch=B, kv_len=20), validate=False)
    m = graph_metrics(dec)
    assert m.macs == B * _macs_per_token(20) and not m.opaque  # the same arithmetic as the plain decoder
    shapes = {t.name: dec.shape(t.name) for t in dec.tensors if t.role == "input"}
    assert shapes["k_cache_1"] == (B, KV, 20, HD)
    # DynamicCache: each layer returns cat(past, new), 21 positions
    assert sorted(dec.shape(t.name) for t in dec.tensors if t.role == "output")[0] == (B, 1, V)
    assert sum(dec.shape(t.name) == (B, KV, 21, HD) for t in dec.tensors if t.role == "output") == 2 * LAYERS
    pre = capture_file(p, step=Step("prefill", batch=1, seq=8), validate=False)
    qk = [n for n in pre.nodes if n.name.endswith(".scores")]
    assert len(qk) == LAYERS and all(dict(n.attrs)["causal"] for n in qk)  # SDPA's is_causal: the triangle
    with pytest.raises(CaptureError, match="dynamic"):
        capture_file(p, step=Step("decode", kv_len=4, cache="paged"), validate=False)


def test_deepseek_mla_caches_its_latent() -> None:
    """transformers >= 5 caches MLA's compressed latent and the shared rotary key, not per-head K/V."""
    transformers = pytest.importorskip("transformers")
    from torch import nn

    from solar_io.frontends.torch.phases import CacheLayout, _hf_layout

    holder = nn.Module()
    holder.config = transformers.DeepseekV3Config(vocab_size=V, hidden_size=D, num_hidden_layers=3,
                                                  num_attention_heads=H, kv_lora_rank=32, qk_rope_head_dim=8)
    assert _hf_layout(holder, "m.py") == (CacheLayout(3, (1, 32), (1, 8)), V)
    holder.config = transformers.LlamaConfig(vocab_size=V, hidden_size=D, num_hidden_layers=2,
                                             num_attention_heads=H, num_key_value_heads=KV)
    assert _hf_layout(holder, "m.py") == (CacheLayout(2, (KV, HD), (KV, HD)), V)


def test_a_model_without_attention_or_cached_state_is_refused_in_one_line() -> None:
    """RWKV has no attention heads and keeps its state in an argument of its own, not in transformers'
    cache: refused naming the file and the config (it raised AttributeError for ``num_attention_heads``)."""
    transformers = pytest.importorskip("transformers")
    from torch import nn

    from solar_io.frontends.torch.phases import _hf_layout

    holder = nn.Module()
    holder.config = transformers.RwkvConfig(vocab_size=V, hidden_size=D, num_hidden_layers=2)
    with pytest.raises(CaptureError, match=r"^m\.py: --phase: its config \(RwkvConfig\) has no attention heads"):
        _hf_layout(holder, "m.py")


def test_a_hugging_face_shaped_model_without_transformers_is_one_line(tmp_path) -> None:
    """A module with a ``config`` (num_hidden_layers) and ``get_input_embeddings`` is stepped through
    transformers' caches; without transformers that is one line naming the file, not an ImportError."""
    import importlib.util

    if importlib.util.find_spec("transformers") is not None:
        pytest.skip("transformers is installed here")
    p = tmp_path / "hfish.py"
    p.write_text("""\
import types
import torch

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.config = types.SimpleNamespace(num_hidden_layers=1, vocab_size=8, num_attention_heads=2, hidden_size=4)
        self.emb = torch.nn.Embedding(8, 4)
    def get_input_embeddings(self):
        return self.emb
    def forward(self, ids):
        return self.emb(ids)

def get_inputs():
    return [torch.zeros(1, 2, dtype=torch.long)]
""")
    with pytest.raises(CaptureError, match=r"^.*hfish\.py: --phase: .*pip install 'solar-io\[zoo\]'"):
        capture_file(p, step=Step("decode", kv_len=4), validate=False)
