"""A model calling a custom torch.library op (a row RMS scaling) that solar-io has no rule for."""
import torch
import torch.nn as nn


@torch.library.custom_op("solar_test::row_rms_scale", mutates_args=())
def row_rms_scale(x: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)


@row_rms_scale.register_fake
def _(x, eps):
    return torch.empty_like(x)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 8)

    def forward(self, x):
        return torch.relu(row_rms_scale(self.fc(x), 1e-6))


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return []
