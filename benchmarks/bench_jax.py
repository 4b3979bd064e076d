"""Capture time and peak memory of the JAX frontend on Flax ResNet-50 and a GPT-2-medium-shaped
Flax decoder, side by side with the PyTorch frontend on the same architectures.

Each row runs in a fresh process (so peak RSS is its own): abstract parameters
(``jax.eval_shape``), ``jax.make_jaxpr``, lowering, YAML writing, no validation. MACs are
checked against the hand formulas of tests/frontends/jax/test_jax_corpus.py; ``--xla`` also compiles the
function with XLA (abstract arguments, nothing executed) and prints its cost-analysis FLOPs
(XLA skips convolution taps that read padding, so it is below ours on ResNet-50).

    .venv/bin/python benchmarks/bench_jax.py                 # ResNet-50 batch 1, 2, 4, 8 at 224^2; GPT-2-medium
    .venv/bin/python benchmarks/bench_jax.py --xla --torch   # plus XLA FLOPs and the PyTorch captures
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "tests" / "models_jax"
GPT2_MEDIUM = dict(layers=24, dim=1024, heads=16, vocab=50257, seq=1024)

TORCH_SRC = '''
import torch
from torch import nn
import torch.nn.functional as F


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.c2, self.b2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
        self.c3, self.b3 = nn.Conv2d(width, 4 * width, 1, bias=False), nn.BatchNorm2d(4 * width)
        self.proj = None
        if stride != 1 or cin != 4 * width:
            self.proj = nn.Sequential(nn.Conv2d(cin, 4 * width, 1, stride, bias=False), nn.BatchNorm2d(4 * width))

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        y = F.relu(self.b2(self.c2(y)))
        y = self.b3(self.c3(y))
        return F.relu(y + (x if self.proj is None else self.proj(x)))


class ResNet50(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], 64
        for i, n in enumerate((3, 4, 6, 3)):
            for b in range(n):
                blocks.append(Bottleneck(cin, 64 * 2 ** i, 2 if i > 0 and b == 0 else 1))
                cin = 256 * 2 ** i
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(2048, 1000)

    def forward(self, x):
        return self.fc(self.blocks(self.stem(x)).mean((2, 3)))


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.attn(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(o)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, layers, dim, heads, vocab, seq):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(seq, dim)
        self.blocks = nn.Sequential(*[Block(dim, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(dim)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        return self.ln(self.blocks(x)) @ self.wte.weight.T


def get_inputs():
    if ARCH == "resnet50":
        return [torch.randn(BATCH, 3, 224, 224)]
    return [torch.randint(0, CFG["vocab"], (BATCH, CFG["seq"]))]


def get_init_inputs():
    return [] if ARCH == "resnet50" else list(CFG.values())


Model = ResNet50 if ARCH == "resnet50" else GPT2
'''


def _jax_program(arch: str, batch: int):  # noqa: ANN202
    """The Program of the Flax model, with abstract parameters and inputs only."""
    import jax

    from solar_io.frontends.jax.capture import Program

    if arch == "resnet50":
        module, x = _load(MODELS / "resnet50.py").Model(1000), jax.ShapeDtypeStruct((batch, 224, 224, 3), "float32")
    else:
        module = _load(MODELS / "gpt2.py").Model(**GPT2_MEDIUM)
        x = jax.ShapeDtypeStruct((batch, GPT2_MEDIUM["seq"]), "int32")
    params = jax.eval_shape(module.init, jax.random.PRNGKey(0), x)
    return Program(f"{arch}.py", "0" * 64, lambda p, *xs: module.apply(p, *xs), params, (x,),
                   lambda: None, lambda: ())


def _load(path: Path):  # noqa: ANN202
    import importlib.util

    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _want_macs(arch: str, batch: int) -> int:
    sys.path.insert(0, str(ROOT / "tests"))
    from test_jax_corpus import gpt2_macs, resnet50_macs

    if arch == "resnet50":
        return resnet50_macs(batch, 224, 1000)
    g = GPT2_MEDIUM
    return gpt2_macs(batch, g["seq"], g["dim"], g["layers"], g["vocab"])


def child(frontend: str, arch: str, batch: int) -> dict:
    """One measurement in this process (see the module docstring)."""
    import warnings

    warnings.simplefilter("ignore")
    from solar_io import dumps
    from solar_io.metrics import graph_metrics

    t0 = time.perf_counter()
    if frontend == "jax":
        from solar_io.frontends.jax.capture import capture_program

        cap = capture_program(_jax_program(arch, batch), validate=False)
        g, opaque = cap.graph, len(cap.lowerer.opaque)
    elif frontend == "torch":
        from solar_io.frontends.torch import capture_file

        with tempfile.TemporaryDirectory() as d:
            src = Path(d) / f"{arch}_torch.py"
            src.write_text(f"ARCH, BATCH, CFG = {arch!r}, {batch}, {GPT2_MEDIUM!r}\n" + TORCH_SRC)
            g = capture_file(src, validate=False, eval_mode=True)
        opaque = sum(1 for n in g.nodes if n.kind == "opaque")
    else:  # xla
        import jax

        prog = _jax_program(arch, batch)
        cost = jax.jit(prog.fn).lower(prog.abstract_params, *prog.abstract_inputs).compile().cost_analysis()
        cost = cost[0] if isinstance(cost, list) else cost
        return dict(total_s=time.perf_counter() - t0, flops=float(cost.get("flops", -1)),
                    peak_rss_gib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20)
    t1 = time.perf_counter()
    text = dumps(g)
    t2 = time.perf_counter()
    m = graph_metrics(g)
    return dict(capture_s=t1 - t0, yaml_s=t2 - t1, total_s=t2 - t0, nodes=len(g.nodes), yaml_mb=len(text) / 1e6,
                macs=m.macs, flops=m.flops_matrix + m.flops_vector, opaque=opaque,
                peak_rss_gib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20)


def run(frontend: str, arch: str, batch: int) -> dict:
    r = subprocess.run([sys.executable, __file__, "--child", frontend, arch, str(batch)], capture_output=True,
                       text=True, timeout=3600, cwd=ROOT)
    if r.returncode:
        raise SystemExit(f"{frontend} {arch} batch {batch} failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(child(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
        return
    configs = [("resnet50", b) for b in (1, 2, 4, 8)] + [("gpt2", 1)]
    print(f"{'model':12} {'batch':>5} {'frontend':8} {'capture s':>9} {'yaml s':>7} {'RSS GiB':>8} {'nodes':>6} "
          f"{'MB':>6} {'opaque':>6} {'GMACs':>9} {'= hand':>6} {'GFLOPs':>9}")
    for arch, batch in configs:
        want = _want_macs(arch, batch)
        for fe in ["jax"] + (["torch"] if "--torch" in sys.argv else []):
            c = run(fe, arch, batch)
            print(f"{arch:12} {batch:5d} {fe:8} {c['capture_s']:9.2f} {c['yaml_s']:7.2f} {c['peak_rss_gib']:8.2f} "
                  f"{c['nodes']:6d} {c['yaml_mb']:6.1f} {c['opaque']:6d} {c['macs'] / 1e9:9.3f} "
                  f"{'yes' if c['macs'] == want else 'NO':>6} {c['flops'] / 1e9:9.2f}", flush=True)
        if "--xla" in sys.argv:
            x = run("xla", arch, batch)
            print(f"{arch:12} {batch:5d} {'xla':8} {x['total_s']:9.2f} {'':7} {x['peak_rss_gib']:8.2f} "
                  f"{'':6} {'':6} {'':6} {'':9} {'':6} {x['flops'] / 1e9:9.2f}", flush=True)


if __name__ == "__main__":
    main()
