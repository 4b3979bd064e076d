"""Embedding + LSTM + linear head on the last hidden state (a text classifier)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, vocab=50, d=16, hidden=24, classes=3):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.lstm = nn.LSTM(d, hidden, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, ids):
        out, (h, c) = self.lstm(self.emb(ids))
        return self.head(out[:, -1])


def get_inputs():
    return [torch.randint(0, 50, (4, 6))]


def get_init_inputs():
    return []
