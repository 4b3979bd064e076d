"""Embedding lookup: 65536 token ids into a 50257 x 1024 fp32 table."""
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(50257, 1024)

    def forward(self, ids):
        return self.emb(ids)


def get_inputs():
    return [torch.randint(0, 50257, (64, 1024))]


def get_init_inputs():
    return []
