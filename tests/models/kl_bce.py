import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """KL divergence and binary cross-entropy (with logits)."""

    def __init__(self):
        super().__init__()

    def forward(self, x, y, p):
        kl = F.kl_div(F.log_softmax(x, -1), F.softmax(y, -1), reduction='batchmean')
        bce = F.binary_cross_entropy(torch.sigmoid(x), p)
        return kl, bce, F.binary_cross_entropy_with_logits(x, p)


def get_inputs():
    return [torch.randn(4, 9), torch.randn(4, 9), torch.rand(4, 9)]


def get_init_inputs():
    return []
