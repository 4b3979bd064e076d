"""A token embedding lookup (gather) scaled and added to positional embeddings.

gather reads rows of the table picked by integer ids: a data_movement copy reading
``table[@ids, D]``, zero MACs, bytes of the rows it touches.
"""

from solar_io.frontends.loopir import Dim, Out, Tensor, gather, kernel, size

B = Dim("B", 2, parallel=True)
S = Dim("S", 16)
V = Dim("V", 1000)
D = Dim("D", 64)
SCALE = 8.0  # sqrt(D)


@kernel
def add_positions(e: Tensor("B,S,D"), pos: Tensor("S,D"), y: Out("B,S,D")):
    for b in B:
        for s in S:
            for d in D:
                y[b, s, d] = e[b, s, d] * SCALE + pos[s, d]


def model(ids: Tensor("B,S", dtype="int32"), table: Tensor("V,D", dtype="bf16", role="weight"),
          pos: Tensor("S,D", dtype="bf16", role="weight")):
    return {"h": add_positions(gather(table, ids, "V"), pos)}


def get_inputs(rng):
    return {"ids": rng.integers(0, size(V), size=(size(B), size(S)))}
