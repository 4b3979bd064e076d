"""Hugging Face MoE models from small configs with random weights (nothing downloaded): Mixtral and
DeepSeek-V3 (MLA, shared expert, grouped routing) capture with no opaque node, validate against eager
torch, and carry a routing record. Skipped when ``transformers`` is not installed (optional extra ``zoo``).

transformers 5 runs its experts through a grouped matmul whose shapes do not depend on the routing
(``transformers.grouped_mm_fallback`` on meta, ``aten._grouped_mm`` on the CPU): lowered as one
contraction over the token-expert rows with the expert weights gathered per row (rules/select.py).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from solar_io.frontends.torch.capture import capture_file  # noqa: E402
from solar_io.metrics import graph_metrics  # noqa: E402

pytestmark = pytest.mark.slow

MODELS = {
    "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                "vocab_size=64, hidden_size=32, intermediate_size=32, num_hidden_layers=1, num_attention_heads=4, "
                "num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=32"),
    "deepseek_v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM",
                    "vocab_size=64, hidden_size=32, intermediate_size=32, moe_intermediate_size=16, "
                    "num_hidden_layers=1, first_k_dense_replace=0, num_attention_heads=4, num_key_value_heads=4, "
                    "n_routed_experts=8, num_experts_per_tok=2, n_group=4, topk_group=2, n_shared_experts=1, "
                    "q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8, "
                    "max_position_embeddings=32"),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_hf_moe_captures_with_no_opaque_node(tmp_path: Path, name: str) -> None:
    cfg, cls, args = MODELS[name]
    p = tmp_path / f"{name}.py"
    p.write_text(textwrap.dedent(f'''
        import torch
        from transformers import {cfg}, {cls}


        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = {cls}({cfg}({args})).eval()

            def forward(self, ids):
                return self.m(input_ids=ids, use_cache=False).logits


        def get_inputs():
            return [torch.randint(0, 64, (1, 6))]
    '''))
    g = capture_file(p)
    assert g.validation.status == "passed", g.validation.reason
    assert graph_metrics(g).opaque == ()
    routing = [dict(a.values) for a in g.assumptions if a.kind == "routing"]
    assert routing and all(r["rows"] == 6 * 2 for r in routing)  # T*k token-expert rows per layer
