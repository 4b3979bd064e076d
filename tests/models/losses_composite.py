"""Losses written by PyTorch in terms of other ops: cosine similarity/embedding, triplet margin,
hinge embedding, margin ranking, soft-target cross-entropy; plus logsigmoid, softmin, remainder, fmod."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b, x):
        y = b.sign()
        return (F.cosine_similarity(a, b), F.triplet_margin_loss(a, b, b.flip(0)), F.hinge_embedding_loss(a, y),
                F.margin_ranking_loss(a[:, 0], b[:, 0], y[:, 1]), F.cross_entropy(a, b.softmax(1)),
                F.cosine_embedding_loss(a, b, y[:, 0]), F.logsigmoid(x), F.softmin(x, 1),
                torch.remainder(x, 0.7), torch.fmod(x, -0.3))


def get_inputs():
    return [torch.randn(8, 6), torch.randn(8, 6), torch.randn(4, 5) * 3]


def get_init_inputs():
    return []
