"""A two-layer MLP, 512 tokens, 4096 -> 4096 -> 4096 with GELU, fp32."""
import torch


class Model(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.up = torch.nn.Linear(d, d)
        self.down = torch.nn.Linear(d, d)

    def forward(self, x):
        return self.down(torch.nn.functional.gelu(self.up(x)))


def get_inputs():
    return [torch.randn(512, 4096)]


def get_init_inputs():
    return [4096]
