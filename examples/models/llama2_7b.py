"""The computation behind a published H100 time: a Llama-2-7B prefill of 2048 tokens (``make run``).

NVIDIA's TensorRT-LLM documentation publishes a measured first-token latency for exactly this
shape: TensorRT-LLM v0.9.0, ``docs/source/performance.md``, section "Low Latency" ("All data was
generated using version 0.9.0", batch size 1), table "H100 GPUs (FP8)", row ``LLaMA 7B | 1 | 1 |
2048 | 30.8``: 30.8 ms from a 2048-token prompt to the first token on one H100 (the page's
build commands use ``gptSessionBenchmark --input_output_len 2048,1``, an FP8 engine with an FP8
KV cache, fp16 attention plugin). The same page gives the network: 32 layers, width 4096,
32 heads (no grouped KV heads), feed-forward 11008, vocabulary 32000 (``examples/llama/build.py
--n_layer 32 --n_head 32 --n_embd 4096 --inter_size 11008 --vocab_size 32000``), which is
Llama 2 7B.

One output token means one forward: every prompt token through the 32 blocks and the vocabulary
projection of the last position only (the logits the first token is sampled from). The blocks
are those of ``llama3_8b.py`` (RMSNorm, rotary embeddings, causal attention, SwiGLU). Capture it
in bf16 and bound it with ``--dtype fp8_e4m3``: every tensor at one byte and every contraction
at the fp8 peak is no slower than the FP8 engine (whose norms, softmax and residuals stay
fp16), so the bound stays a lower bound of the measured run.
"""

import importlib.util
from pathlib import Path

import torch

_spec = importlib.util.spec_from_file_location("solar_io_example_llama3_8b",
                                               Path(__file__).with_name("llama3_8b.py"))
_prefill = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_prefill)

VOCAB, SEQ = 32000, 2048


class Model(_prefill.Model):
    """The prefill step of ``llama3_8b.Model`` (last-position logits) at the Llama 2 7B shape."""

    def __init__(self, vocab=VOCAB, d=4096, layers=32, heads=32, kv_heads=32, ff=11008, seq=SEQ):
        super().__init__(vocab=vocab, d=d, layers=layers, heads=heads, kv_heads=kv_heads, ff=ff, seq=seq)


class TwoBlocks(Model):
    """The same prefill with 2 of the 32 blocks: full width and length, captured in seconds (tests)."""

    def __init__(self):
        super().__init__(layers=2)


def get_init_inputs():
    return []


def get_inputs():
    return [torch.randint(0, VOCAB, (1, SEQ))]


__all__ = ["Model", "TwoBlocks"]
