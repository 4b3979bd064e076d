"""The model zoo: public architectures built from their libraries' configs (random weights, nothing
downloaded), captured, validated and checked against FlopCounterMode (issue 18 item 5).

    .venv/bin/python benchmarks/model_zoo.py [--filter TEXT[,TEXT...]] [--timeout S] [--markdown OUT.md]

Needs ``pip install 'solar-io[zoo]'`` (transformers); timm and torchvision models are added when
those import (they need their own torch build, so they are skipped when absent). Every model runs in
its own process (a crash or a hang is that model's row) and prints, per model:

- ``capture``: the status of ``capture_file`` (export on meta tensors, lowering, validation) and its
  seconds; ``nodes``, ``opaque`` (nodes whose compute is unknown, with their ops) and ``validation``;
- ``MACs``: the graph's multiply-accumulates against ``torch.utils.flop_counter.FlopCounterMode``
  run on the same model with real CPU tensors (FLOPs / 2). FlopCounterMode counts matmuls, convs and
  SDPA's fused CPU kernel; ``attn`` is the graph's SDPA MACs (QK^T and PV), so ``graph - attn`` is
  the figure to compare where FlopCounterMode misses an attention kernel. Mixture-of-experts
  models are captured under the default ``uniform`` routing assumption (expected tokens per
  expert), while FlopCounterMode counts the routing of its random weights: the two differ by the
  routing, which the graph records in its assumptions;
- ``decode``: for causal LMs, a decode step (batch 2 after 16 cached positions, dynamic cache) captured
  and validated (``solar-io capture --phase decode``), with its seconds;
- ``peak MB``: the process's peak resident memory and, in brackets, its growth over the imports.

Configs are small (2 layers, width 64, a few experts) so the whole zoo runs in minutes on two cores;
the architectures (attention variants, MLA, routing, norms, positional schemes) are the published
ones. Results: ``benchmarks/results/model_zoo.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

V, S = 512, 16  # vocabulary and tokens of the small configs
DENSE = dict(vocab_size=V, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=256)

#: name -> (kind, model_type, Auto class, config keywords). Kinds: causal (input_ids -> logits),
#: encoder (input_ids -> hidden states), seq2seq (input_ids, decoder_input_ids), whisper, vision.
ZOO: dict[str, tuple[str, str, str, dict]] = {
    "llama-3": ("causal", "llama", "AutoModelForCausalLM", DENSE),
    "mistral": ("causal", "mistral", "AutoModelForCausalLM", {**DENSE, "sliding_window": None}),
    "qwen2": ("causal", "qwen2", "AutoModelForCausalLM", DENSE),
    "qwen3": ("causal", "qwen3", "AutoModelForCausalLM", {**DENSE, "head_dim": 16}),
    "phi-3": ("causal", "phi3", "AutoModelForCausalLM", {**DENSE, "pad_token_id": 0}),
    "gemma-2": ("causal", "gemma2", "AutoModelForCausalLM", {**DENSE, "head_dim": 16}),
    "olmo-2": ("causal", "olmo2", "AutoModelForCausalLM", DENSE),
    "gpt-2": ("causal", "gpt2", "AutoModelForCausalLM", dict(vocab_size=V, n_embd=64, n_layer=2, n_head=4,
                                                             n_positions=256)),
    "gpt-neox": ("causal", "gpt_neox", "AutoModelForCausalLM", dict(vocab_size=V, hidden_size=64,
                                                                     intermediate_size=128, num_hidden_layers=2,
                                                                     num_attention_heads=4,
                                                                     max_position_embeddings=256)),
    "opt": ("causal", "opt", "AutoModelForCausalLM", dict(vocab_size=V, hidden_size=64, ffn_dim=128,
                                                          num_hidden_layers=2, num_attention_heads=4,
                                                          word_embed_proj_dim=64, max_position_embeddings=256)),
    "mixtral (MoE)": ("causal", "mixtral", "AutoModelForCausalLM", {**DENSE, "num_local_experts": 4,
                                                                   "num_experts_per_tok": 2,
                                                                   "sliding_window": None}),
    "qwen2-moe (MoE)": ("causal", "qwen2_moe", "AutoModelForCausalLM", {**DENSE, "num_experts": 4,
                                                                       "num_experts_per_tok": 2,
                                                                       "moe_intermediate_size": 32,
                                                                       "shared_expert_intermediate_size": 64}),
    "qwen3-moe (MoE)": ("causal", "qwen3_moe", "AutoModelForCausalLM", {**DENSE, "head_dim": 16, "num_experts": 4,
                                                                       "num_experts_per_tok": 2,
                                                                       "moe_intermediate_size": 32}),
    "deepseek-v3 (MLA, MoE)": ("causal", "deepseek_v3", "AutoModelForCausalLM",
                               {**DENSE, "num_key_value_heads": 4, "n_routed_experts": 8, "num_experts_per_tok": 2,
                                "n_group": 2, "topk_group": 1, "n_shared_experts": 1, "moe_intermediate_size": 32,
                                "first_k_dense_replace": 1, "kv_lora_rank": 32, "q_lora_rank": 48,
                                "qk_rope_head_dim": 8, "qk_nope_head_dim": 16, "v_head_dim": 16,
                                "rope_scaling": None}),
    "gpt-oss (MoE)": ("causal", "gpt_oss", "AutoModelForCausalLM", {**DENSE, "head_dim": 16, "num_local_experts": 4,
                                                                   "num_experts_per_tok": 2, "sliding_window": 8,
                                                                   "layer_types": ["sliding_attention",
                                                                                   "full_attention"]}),
    "bert": ("encoder", "bert", "AutoModel", dict(vocab_size=V, hidden_size=64, intermediate_size=128,
                                                  num_hidden_layers=2, num_attention_heads=4,
                                                  max_position_embeddings=256)),
    "roberta": ("encoder", "roberta", "AutoModel", dict(vocab_size=V, hidden_size=64, intermediate_size=128,
                                                        num_hidden_layers=2, num_attention_heads=4,
                                                        max_position_embeddings=256)),
    "t5": ("seq2seq", "t5", "AutoModelForSeq2SeqLM", dict(vocab_size=V, d_model=64, d_ff=128, d_kv=16, num_layers=2,
                                                          num_heads=4, decoder_start_token_id=0)),
    "bart": ("seq2seq", "bart", "AutoModelForSeq2SeqLM", dict(vocab_size=V, d_model=64, encoder_layers=2,
                                                              decoder_layers=2, encoder_attention_heads=4,
                                                              decoder_attention_heads=4, encoder_ffn_dim=128,
                                                              decoder_ffn_dim=128, max_position_embeddings=256)),
    "whisper": ("whisper", "whisper", "AutoModelForSpeechSeq2Seq",
                dict(vocab_size=V, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                     decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, num_mel_bins=16,
                     max_source_positions=32, max_target_positions=64, pad_token_id=0, bos_token_id=1,
                     eos_token_id=2, decoder_start_token_id=1)),
    "vit": ("vision", "vit", "AutoModel", dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                               num_attention_heads=4, image_size=32, patch_size=8)),
}

#: torchvision / timm models, added when their package imports: name -> (package, constructor).
VISION_EXTRA = {"resnet18 (torchvision)": ("torchvision", "torchvision.models.resnet18(num_classes=10)"),
                "vit-tiny (timm)": ("timm", "timm.create_model('vit_tiny_patch16_224', img_size=32, patch_size=8, "
                                            "num_classes=10)")}

MODEL_FILE = '''\
import torch
import transformers
from torch import nn

KIND, MODEL_TYPE, AUTO, CONFIG, V, S = {kind!r}, {model_type!r}, {auto!r}, {config!r}, {V}, {S}


def build():
    cfg = transformers.AutoConfig.for_model(MODEL_TYPE, **CONFIG)
    try:
        return getattr(transformers, AUTO).from_config(cfg, attn_implementation="sdpa")
    except ValueError:  # no SDPA path (Gemma-2's soft-capped scores): the eager attention
        return getattr(transformers, AUTO).from_config(cfg, attn_implementation="eager")


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.m = build()

    def forward(self, *xs):
        if KIND == "vision":
            return self.m(pixel_values=xs[0])[0]
        if KIND == "whisper":
            return self.m(input_features=xs[0], decoder_input_ids=xs[1], use_cache=False)[0]
        if KIND == "seq2seq":
            return self.m(input_ids=xs[0], decoder_input_ids=xs[1], use_cache=False)[0]
        if KIND == "encoder":
            return self.m(input_ids=xs[0])[0]
        return self.m(input_ids=xs[0], use_cache=False)[0]


def get_inputs():
    if KIND == "vision":
        return [torch.randn(1, 3, 32, 32)]
    if KIND == "whisper":
        return [torch.randn(1, CONFIG["num_mel_bins"], 2 * CONFIG["max_source_positions"]),
                torch.randint(0, V, (1, 8))]
    if KIND == "seq2seq":
        return [torch.randint(0, V, (1, S)), torch.randint(0, V, (1, 8))]
    return [torch.randint(0, V, (1, S))]
'''

EXTRA_FILE = '''\
import torch
import {package}
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.m = {constructor}

    def forward(self, x):
        return self.m(x)


def get_inputs():
    return [torch.randn(1, 3, 32, 32)]
'''


def one(name: str, path: Path, causal: bool) -> dict:
    """Capture, validate and count one model file (runs in its own process)."""
    import resource
    import warnings

    warnings.simplefilter("ignore")
    import torch
    import transformers  # noqa: F401  (imported before the baseline memory reading)
    from torch.utils.flop_counter import FlopCounterMode

    from solar_io import graph_metrics
    from solar_io.frontends.torch.capture import capture_file
    from solar_io.frontends.torch.loader import load_source

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    row: dict = {"model": name}
    t = time.perf_counter()
    try:
        g = capture_file(path)
    except Exception as e:  # a row, not a crash
        row.update(capture="failed", error=f"{type(e).__name__}: {str(e).splitlines()[0][:160]}")
        g = None
    row["capture_s"] = round(time.perf_counter() - t, 2)
    if g is not None:
        m = graph_metrics(g)
        row.update(capture="ok", nodes=len(g.nodes), validation=g.validation.status, macs=m.macs,
                   opaque=sorted({n.op for n in g.nodes if n.kind == "opaque"}),
                   attn=sum(nm.macs for n, nm in zip(g.nodes, m.nodes, strict=True)
                            if n.op == "aten.scaled_dot_product_attention"),
                   assumptions=[a.kind for a in g.assumptions])
        if g.validation.status == "failed":
            row["error"] = (g.validation.reason or "")[:160]
    try:
        src = load_source(path)
        torch.manual_seed(0)
        model = src.model("cpu")
        xs = src.inputs("cpu")
        with FlopCounterMode(display=False) as fc, torch.no_grad():
            model(*xs)
        row["flop_counter_macs"] = fc.get_total_flops() // 2
    except Exception as e:
        row["flop_counter_macs"] = f"failed: {type(e).__name__}"
    if causal:
        from solar_io.frontends.torch.phases import Step

        t = time.perf_counter()
        try:
            d = capture_file(path, entry=f"{path}:build", step=Step("decode", batch=2, kv_len=16))
            row["decode"] = d.validation.status + ("" if not any(n.kind == "opaque" for n in d.nodes) else
                                                   " (opaque)")
        except Exception as e:
            row["decode"] = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
        row["decode_s"] = round(time.perf_counter() - t, 2)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    row.update(peak_mb=round(peak), peak_over_imports_mb=round(peak - base))
    return row


def _files(folder: Path, names: list[str]) -> list[tuple[str, Path, bool]]:
    out = []
    for i, name in enumerate(names):
        p = folder / f"zoo_{i:02d}.py"
        if name in ZOO:
            kind, model_type, auto, config = ZOO[name]
            p.write_text(MODEL_FILE.format(kind=kind, model_type=model_type, auto=auto, config=config, V=V, S=S))
            out.append((name, p, kind == "causal"))
        else:
            package, constructor = VISION_EXTRA[name]
            p.write_text(EXTRA_FILE.format(package=package, constructor=constructor))
            out.append((name, p, False))
    return out


def _available_extras() -> list[str]:
    import importlib.util

    return [n for n, (pkg, _) in VISION_EXTRA.items() if importlib.util.find_spec(pkg) is not None]


def routed_expert_macs(name: str) -> int:
    """By hand: the routed experts' MACs of a zoo MoE model, S tokens x k experts each x 3 projections
    (gate, up, down) of width x expert width, per MoE layer. Under any routing T*k token-expert pairs
    are computed, so this is also what the graph counts."""
    if name not in ZOO:
        return 0
    c = ZOO[name][3]
    k = c.get("num_experts_per_tok")
    if not k:
        return 0
    width = c.get("moe_intermediate_size") or c["intermediate_size"]
    layers = c["num_hidden_layers"] - c.get("first_k_dense_replace", 0)
    return layers * S * k * 3 * c["hidden_size"] * width


def pooler_macs(name: str) -> int:
    """By hand: the pooler (a width x width dense on the first token) that BERT, RoBERTa and ViT's
    ``AutoModel`` runs eagerly; the captured output is the hidden states, so the graph has none."""
    return ZOO[name][3]["hidden_size"] ** 2 if name in ("bert", "roberta", "vit") else 0


def _macs_cell(r: dict) -> str:
    """Graph MACs / FlopCounterMode's, and which named terms account for the difference: the graph's
    SDPA MACs (FlopCounterMode does not count SDPA's fused CPU kernel), the routed experts (by hand:
    transformers runs them through kernels FlopCounterMode does not count) and the pooler (by hand:
    run eagerly, not part of the captured output)."""
    if "macs" not in r:
        return "-"
    fc = r.get("flop_counter_macs")
    if not isinstance(fc, int):
        return f"{r['macs']:,} / {fc}"
    terms = [("attention", -r.get("attn", 0)), ("routed experts", -routed_expert_macs(r["model"])),
             ("pooler", pooler_macs(r["model"]))]
    terms = [(n, v) for n, v in terms if v]
    verdict = None
    for mask in range(1 << len(terms)):
        used = [terms[i] for i in range(len(terms)) if mask >> i & 1]
        if r["macs"] + sum(v for _, v in used) == fc:
            verdict = "equal" + "".join(f" {'-' if v < 0 else '+'} {n} ({abs(v):,})" for n, v in used)
            break
    if verdict is None:
        verdict = f"differ by {r['macs'] - fc:,}"
    return f"{r['macs']:,} / {fc:,}: {verdict}"


def markdown(rows: list[dict]) -> str:
    head = ("| model | capture (s) | nodes | opaque | validation | MACs graph / FlopCounterMode | decode step (s) "
            "| peak MB (over imports) |\n|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        cap = f"{r.get('capture', 'failed')} ({r.get('capture_s', '-')})"
        opaque = ", ".join(r.get("opaque", [])) or ("0" if "nodes" in r else "-")
        dec = f"{r['decode']} ({r['decode_s']})" if "decode" in r else "n/a"
        lines.append(f"| {r['model']} | {cap} | {r.get('nodes', '-')} | {opaque} | {r.get('validation', '-')} "
                     f"| {_macs_cell(r)} | {dec} | {r.get('peak_mb', '-')} ({r.get('peak_over_imports_mb', '-')}) |")
    errors = [f"- {r['model']}: {r['error']}" for r in rows if r.get("error")]
    return "\n".join(lines + ([""] + ["Errors:"] + errors if errors else [])) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--filter", default="", help="only models whose name contains this text (or one of several, "
                    "comma-separated)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per model (a hang guard)")
    ap.add_argument("--markdown", type=Path, help="also write the table here")
    ap.add_argument("--one", nargs=3, metavar=("NAME", "FILE", "CAUSAL"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(a.one[0], Path(a.one[1]), a.one[2] == "1")))
        return
    try:
        import transformers  # noqa: F401
    except ImportError:
        sys.exit("model_zoo: needs transformers (pip install 'solar-io[zoo]')")
    wanted = [w.strip().lower() for w in a.filter.split(",")]
    names = [n for n in [*ZOO, *_available_extras()] if any(w in n.lower() for w in wanted)]
    skipped = [n for n in VISION_EXTRA if n not in names and not a.filter]
    rows = []
    with tempfile.TemporaryDirectory(prefix="solar-io-zoo-") as tmp:
        for name, path, causal in _files(Path(tmp), names):
            cmd = [sys.executable, __file__, "--one", name, str(path), "1" if causal else "0"]
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout,
                                   env={**os.environ, "PYTHONWARNINGS": "ignore"})
                last = [x for x in p.stdout.splitlines() if x.startswith("{")]
                row = json.loads(last[-1]) if last else {"model": name, "capture": "crashed",
                                                          "error": (p.stderr.strip().splitlines() or ["?"])[-1][:160]}
            except subprocess.TimeoutExpired:
                row = {"model": name, "capture": f"timeout ({a.timeout:.0f} s)"}
            rows.append(row)
            print(json.dumps(row), flush=True)
    print()
    text = markdown(rows)
    if skipped:
        text += "\nSkipped (package not importable with this torch): " + ", ".join(skipped) + "\n"
    print(text)
    if a.markdown:
        a.markdown.write_text(text)


if __name__ == "__main__":
    main()
