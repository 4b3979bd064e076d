import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """NLL loss with class weights and ignore_index."""

    def __init__(self):
        super().__init__()
        self.register_buffer('w', torch.rand(5) + 0.5)

    def forward(self, logp, target):
        return F.nll_loss(logp, target, weight=self.w, ignore_index=2)


def get_inputs():
    return [torch.randn(12, 5).log_softmax(-1), torch.randint(0, 5, (12,))]


def get_init_inputs():
    return []
