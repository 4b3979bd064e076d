"""An embedding lookup (gather) then the mean over the sequence (cross-frontend twin of
tests/models/embedding.py): the sum is a bare reduction, scaled by 1/S in a later nest.
"""

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, gather, kernel, size

B, S, V, D = Dim("B", 16), Dim("S", 128), Dim("V", 32000), Dim("D", 512)
INV_S = 1.0 / size(S)  # follows a size override: the program is imported under it


@kernel
def mean(e: Tensor("B,S,D"), total: Temp("B,D"), y: Out("B,D")):
    for b in B:
        for d in D:
            for s in S:
                total[b, d] += e[b, s, d]
    for b in B:
        for d in D:
            y[b, d] = total[b, d] * INV_S


def model(ids: Tensor("B,S", dtype="int64"), table: Tensor("V,D", role="weight")):
    return {"y": mean(gather(table, ids, "V"))}


def get_inputs(rng):
    return {"ids": rng.integers(0, size(V), size=(size(B), size(S)))}
