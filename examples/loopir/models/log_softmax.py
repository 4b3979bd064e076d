"""log_softmax over the last dim (cross-frontend twin of tests/models/log_softmax.py)."""

from _common import log_softmax

from solar_io.frontends.loopir import Dim, Tensor

B, D = Dim("B", 4096), Dim("D", 32000)


def model(x: Tensor("B,D")):
    return {"y": log_softmax(x)}
