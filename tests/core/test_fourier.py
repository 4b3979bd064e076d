"""The ``fft`` node kind (format 1.7, ``solar_io/fourier.py``): its values against a brute-force DFT
(the O(n^2) sum, no FFT library), its floor by hand, its shape rules and its bound."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import solar_io
from solar_io.affine import Access
from solar_io.fourier import Fourier, floor_flops, out_shape, problem, run
from solar_io.graph import Graph, Node, Tensor
from solar_io.hardware import load_spec


def _dft(z: np.ndarray, axis: int, inverse: bool) -> np.ndarray:
    """The unscaled DFT of ``z`` along ``axis`` as the explicit sum over j of z_j exp(-+2 pi i jk / n)."""
    n = z.shape[axis]
    jk = np.outer(np.arange(n), np.arange(n))
    w = np.exp((2j if inverse else -2j) * np.pi * jk / n)
    return np.moveaxis(np.tensordot(np.moveaxis(z, axis, -1), w, axes=([-1], [0])), -1, axis)


def _reference(spec: Fourier, x: np.ndarray, out: tuple[int, ...]) -> np.ndarray:
    """The transform by definition: the full complex signal (c2r: the Hermitian extension of the stored
    half, imaginary parts of self-conjugate bins dropped), the sums, then the scale and the layout."""
    if spec.type == "r2c":
        z = x.astype(complex)
    else:
        z = x[..., 0] + 1j * x[..., 1]
    if spec.type == "c2r":  # one transformed dim here: X_k = conj(X_{n-k}) extends the stored half
        (last,) = spec.dims
        n, stored = out[last], z.shape[last]
        z = np.concatenate([z, np.conj(np.flip(np.take(z, range(1, n - stored + 1), axis=last), axis=last))],
                           axis=last)
    for d in spec.dims:
        z = _dft(z, d, spec.inverse)
    n = np.prod([(out if spec.type == "c2r" else x.shape)[d] for d in spec.dims])
    z = z * {"none": 1.0, "by_sqrt_n": 1 / np.sqrt(n), "by_n": 1 / n}[spec.norm]
    if spec.type == "c2r":
        return z.real
    if spec.type == "r2c" and out[spec.dims[-1]] != x.shape[spec.dims[-1]]:
        z = np.take(z, range(out[spec.dims[-1]]), axis=spec.dims[-1])
    return np.stack([z.real, z.imag], axis=-1)


CASES = [  # (type, input shape, dims, output shape or None for the default)
    ("c2c", (3, 8, 2), (1,), None), ("c2c", (4, 6, 2), (0, 1), None), ("c2c", (5, 2), (0,), None),
    ("r2c", (3, 8), (1,), None), ("r2c", (3, 7), (1,), None), ("r2c", (3, 8), (1,), (3, 8, 2)),
    ("r2c", (4, 6), (0, 1), None), ("r2c", (6, 2, 5), (0,), None),
    ("c2r", (3, 5, 2), (1,), (3, 8)), ("c2r", (3, 5, 2), (1,), (3, 9)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}{list(c[1])}{list(c[2])}")
@pytest.mark.parametrize("inverse, norm", list(itertools.product((False, True), ("none", "by_sqrt_n", "by_n"))))
def test_values_match_the_dft_by_definition(case, inverse, norm):
    kind, shape, dims, given = case
    spec = Fourier(kind, dims, inverse, norm)
    out = out_shape(spec, shape, given)
    assert problem(spec, shape, out) is None
    x = np.random.default_rng(1).standard_normal(shape)
    if kind == "c2r":  # a genuinely Hermitian input: the spectrum of a real signal of the output's length
        sig = np.random.default_rng(2).standard_normal(out)
        spec_full = np.fft.rfft(sig, axis=dims[-1])
        x = np.stack([spec_full.real, spec_full.imag], axis=-1)
    np.testing.assert_allclose(run(spec, x, out), _reference(spec, x, out), rtol=1e-9, atol=1e-9)


def test_multi_dim_c2r_inverts_a_multi_dim_r2c():
    x = np.random.default_rng(3).standard_normal((4, 6, 5))
    fwd = Fourier("r2c", (1, 2), False, "none")
    s = run(fwd, x, out_shape(fwd, x.shape, None))
    back = Fourier("c2r", (1, 2), True, "by_n")
    np.testing.assert_allclose(run(back, s, x.shape), x, atol=1e-12)


@pytest.mark.parametrize("spec, shape, out, flops", [
    (Fourier("c2c", (1,), False, "none"), (3, 8, 2), (3, 8, 2), 3 * (2 * 8 - 2)),  # real and imaginary sums
    (Fourier("c2c", (0, 1), True, "by_n"), (4, 6, 2), (4, 6, 2), 2 * 24 - 2),  # one 2-D transform of 24
    (Fourier("r2c", (1,), False, "none"), (3, 7), (3, 4, 2), 3 * 6),
    (Fourier("r2c", (0,), False, "none"), (6, 2, 5), (4, 2, 5, 2), 10 * 5),  # 10 columns of 6
    (Fourier("c2r", (1,), True, "none"), (3, 5, 2), (3, 8), 3 * 4),  # 5 stored values a row
])
def test_the_floor_is_the_zero_frequency_sums(spec, shape, out, flops):
    assert floor_flops(spec, shape, out) == flops


@pytest.mark.parametrize("spec, shape, out, message", [
    (Fourier("c2c", (1,), False, "none"), (3, 8), (3, 8), "last rank must have size 2"),
    (Fourier("r2c", (2,), False, "none"), (3, 8), (3, 5, 2), "distinct positions in [0, 1]"),
    (Fourier("r2c", (1, 1), False, "none"), (3, 8), (3, 5, 2), "distinct positions"),
    (Fourier("r2c", (1,), False, "none"), (3, 8), (3, 6, 2), "writes [3, 5, 2], got [3, 6, 2]"),
    (Fourier("c2r", (1,), True, "none"), (3, 5, 2), (3, 10), "n // 2 + 1 = 5"),
    (Fourier("c2c", (0,), False, "ortho"), (3, 2), (3, 2), "norm must be one of"),
])
def test_shape_problems_are_named(spec, shape, out, message):
    assert message in problem(spec, shape, out)


def _graph(spec: Fourier, x: tuple[str, ...], y: tuple[str, ...], sizes: dict[str, int],
           dtype: str = "fp32") -> Graph:
    return Graph(tuple(sizes.items()), (Tensor("x", x, dtype, "input"), Tensor("y", y, "fp32", "output")),
                 (Node("t", "fft", "aten._fft_c2c", (Access("x"),), (Access("y"),), fft=spec),))


def test_a_graph_with_a_misfit_or_integer_fft_is_refused_naming_the_node():
    sizes = {"B": 3, "N": 8, "F": 6, "P": 2}
    bad_shape = _graph(Fourier("r2c", (1,), False, "none"), ("B", "N"), ("B", "F", "P"), sizes)
    (issue,) = [i for i in solar_io.validate(bad_shape) if i.severity == "error"]
    assert issue.path == ("nodes", 0, "fft") and "node t: an r2c of [3, 8]" in issue.message
    ints = _graph(Fourier("c2c", (1,), False, "none"), ("B", "N", "P"), ("B", "N", "P"), sizes, "int32")
    assert any("x is int32" in i.message for i in solar_io.validate(ints))
    missing = _graph(None, ("B", "N", "P"), ("B", "N", "P"), sizes)  # type: ignore[arg-type]
    assert any("needs its fft record" in i.message for i in solar_io.validate(missing))


def test_a_malformed_fft_record_is_one_line_naming_the_field(tmp_path):
    from solar_io.errors import GraphError

    text = solar_io.dumps(_graph(Fourier("c2c", (1,), False, "none"), ("B", "N", "P"), ("B", "N", "P"),
                                 {"B": 3, "N": 8, "P": 2}))
    for old, new, field in (("norm: none", "norm: ortho", "norm"), ("dims: [1]", "dims: [-1]", "dims"),
                            ("type: c2c", "type: dct", "type")):
        with pytest.raises(GraphError) as e:
            solar_io.loads(text.replace(old, new))
        assert f"fft.{field}" in str(e.value) or f"'{field}'" in str(e.value), str(e.value)


def test_the_bound_charges_bytes_and_the_floor_and_lists_nothing_as_opaque():
    """A c2c transform of 1,024 rows of 4,096 fp32 pairs: 2 x 32 MiB of bytes and 1,024 x 8,190 vector
    FLOPs of floor; the node's time is the larger over DRAM and the vector unit, and it is known compute."""
    rows, n = 1024, 4096
    g = _graph(Fourier("c2c", (1,), False, "none"), ("B", "N", "P"), ("B", "N", "P"), {"B": rows, "N": n, "P": 2})
    m = solar_io.graph_metrics(g)
    assert m.boundary_bytes == 2 * rows * n * 2 * 4 and m.flops_vector == rows * (2 * n - 2) and m.macs == 0
    spec = load_spec("b200")
    r = solar_io.bound(g, "b200", cache_aware=False)
    assert not r.opaque and r.compute_complete
    assert r.fused.time == pytest.approx(max(m.boundary_bytes / spec.dram_bandwidth,
                                             m.flops_vector / spec.peak("vector", "fp32")))


def test_an_fft_over_a_tensor_of_unknown_dtype_reports_the_dtype_not_a_traceback():
    g = _graph(Fourier("c2c", (1,), False, "none"), ("B", "N", "P"), ("B", "N", "P"), {"B": 3, "N": 8, "P": 2},
               "fp99")
    assert [i.message for i in solar_io.validate(g) if i.severity == "error"] == ["unknown dtype 'fp99'"]
