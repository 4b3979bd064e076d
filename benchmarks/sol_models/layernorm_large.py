"""LayerNorm over 16384 tokens x 1024 features, fp32."""
import torch


class Model(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(16384, 1024)]


def get_init_inputs():
    return [1024]
