"""A DeepSeek-V3-sized routed MoE layer (256 experts of 7168 -> 2048 -> 7168, top-8, 4096 tokens, bf16) in the
KernelBench style (``if not mask.any(): continue``): 22.5 GB of expert weights, never allocated, since the
value-specialised capture runs on meta and only the routing masks get values (frontends/torch/specialise.py).

    solar-io capture benchmarks/moe_models/dsv3_layer.py --no-validate --routing uniform -o /tmp/dsv3.yaml
    solar-io bound /tmp/dsv3.yaml --hw h100-sxm

Figures on the 2-core machine (loaded, issue 18): capture 96 s, peak RSS 0.48 GB, 3845 nodes; uniform
routing: 256 experts x 128 tokens, H100 SXM fused 6.75 ms (memory: 22.6 GB of weights), unfused 6.77 ms;
skewed=1.2: unfused 8.23 ms (the popular experts' kernels are compute-bound), fused 6.75 ms.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

E, K, T, D, FF = 256, 8, 4096, 7168, 2048


class Expert(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(D, FF, bias=False)
        self.up = nn.Linear(D, FF, bias=False)
        self.down = nn.Linear(FF, D, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.router = nn.Linear(D, E, bias=False)
        self.experts = nn.ModuleList(Expert() for _ in range(E))
        self.to(torch.bfloat16)

    def forward(self, x):
        w, idx = torch.topk(self.router(x).sigmoid(), K, dim=-1)
        out = torch.zeros_like(x)
        for e in range(E):
            mask = idx == e
            if not mask.any():
                continue
            rows, slot = torch.where(mask)
            out.index_add_(0, rows, self.experts[e](x[rows]) * w[rows, slot, None])
        return out


def get_inputs():
    return [torch.randn(T, D, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
