"""GELU (erf form) over 32 Mi fp32 elements: transcendental-heavy elementwise."""
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(x)


def get_inputs():
    return [torch.randn(8192, 4096)]


def get_init_inputs():
    return []
