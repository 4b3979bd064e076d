"""C = A @ B as one loop nest: lifts to one contraction (map mul, reduce add)."""

from solar_io.frontends.loopir import Dim, Out, Tensor, kernel

M = Dim("M", 64, parallel=True)
N = Dim("N", 32)
K = Dim("K", 128)


@kernel
def matmul(a: Tensor("M,K"), b: Tensor("K,N"), c: Out("M,N")):
    for m in M:
        for n in N:
            for k in K:
                c[m, n] += a[m, k] * b[k, n]


def model(A: Tensor("M,K", dtype="fp16"), B: Tensor("K,N", dtype="fp16", role="weight")):
    return {"C": matmul(A, B)}
