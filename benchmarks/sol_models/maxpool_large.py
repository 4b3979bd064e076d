"""3x3 stride-2 max pooling over batch 16, 64 channels, 112 x 112, fp32."""
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.max_pool2d(x, 3, stride=2, padding=1)


def get_inputs():
    return [torch.randn(16, 64, 112, 112)]


def get_init_inputs():
    return []
