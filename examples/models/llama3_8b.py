"""A Llama-3-8B-shaped decoder prefilling a 4096-token prompt (the ``make run`` demo).

The blocks are those of ``llama_decoder.py`` (RMSNorm, rotary embeddings, GQA causal attention,
SwiGLU) at the published Llama 3 8B configuration: 32 layers, width 4096, 32 query heads and
8 key/value heads of 128, feed-forward 14336, vocabulary 128256 (Meta's model card and
``config.json`` of meta-llama/Meta-Llama-3-8B). The forward is one prefill step as a server
runs it: every prompt token goes through the 32 blocks and only the last position is projected
to the vocabulary (the logits that pick the first generated token), so a published
time-to-first-token for this shape is a run of this graph plus serving overhead.

Capture it in bf16 (``solar-io capture examples/models/llama3_8b.py --dtype bf16``): the export
runs on meta tensors, so no weight memory is allocated; validation runs each node at reduced
sizes (``--validate-budget``). ``Model(layers=2, seq=64)`` is a small twin for tests.
"""

import importlib.util
from pathlib import Path

import torch

_spec = importlib.util.spec_from_file_location("solar_io_example_llama_decoder",
                                               Path(__file__).with_name("llama_decoder.py"))
_blocks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_blocks)

VOCAB, SEQ = 128256, 4096


class Model(_blocks.Model):
    """``llama_decoder.Model`` whose head projects only the last position (a prefill step)."""

    def __init__(self, vocab=VOCAB, d=4096, layers=32, heads=32, kv_heads=8, ff=14336, seq=SEQ):
        super().__init__(vocab=vocab, d=d, layers=layers, heads=heads, kv_heads=kv_heads, ff=ff, seq=seq)

    def forward(self, ids):
        x = self.embed(ids)
        for blk in self.blocks:
            x = blk(x, self.cos, self.sin)
        return self.head(self.norm(x[:, -1:, :]))


class Small(Model):
    """Two blocks at width 64 over 64 tokens: the same graph structure, captured in a second."""

    def __init__(self):
        super().__init__(vocab=256, d=64, layers=2, heads=4, kv_heads=2, ff=160, seq=64)


def get_init_inputs():
    return []


def get_inputs():
    return [torch.randint(0, VOCAB, (1, SEQ))]


__all__ = ["Model", "Small"]
