"""Cross-frontend: IR programs lift to the same work and traffic as the PyTorch captures.

Each tests/models file has its IR twin in examples/loopir (a top-level SPEC example where
one lowers exactly as PyTorch does, else examples/loopir/models/<name>.py, one kernel nest
per PyTorch op as the torch frontend lowers it). The program is captured at the model
file's sizes through ``capture_file(sizes=...)`` (its own defaults are other, larger
sizes) and, where the example declares another dtype, the torch side is captured with
that dtype; both captures must give the same MACs, matrix and vector FLOPs,
transcendental count and bytes. The IR capture is validated (plain Python kernels).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from paths import ROOT

from solar_io import graph_metrics
from solar_io.frontends.loopir import capture_file

torch_frontend = pytest.importorskip("solar_io.frontends.torch")
MODELS = ROOT / "tests" / "models"
IR = ROOT / "examples" / "loopir"

# tests/models name -> (IR program under examples/loopir, sizes of the model file, torch dtype)
TWINS: dict[str, tuple[str, dict[str, int], str | None]] = {
    "matmul_square": ("matmul.py", dict(M=48, K=48, N=48), "fp16"),
    "conv2d_strided_padded": ("conv2d.py", dict(N=2, C=3, H=17, W=17, K=16, P=9, Q=9), "bf16"),
    "layernorm": ("models/layernorm.py", dict(B=2, S=10, D=48), None),
    "embedding": ("models/embedding.py", dict(B=4, S=12, V=100, D=32), None),
    "softmax": ("models/softmax.py", dict(B=2, S=9, D=40), None),
    "mlp": ("models/mlp.py", dict(B=32, I=64, O=256, O2=256, C=10), None),
    "lstm": ("models/lstm.py", dict(B=3, S=5, D=12, G=64, Hd=16), None),
    "bmm": ("models/bmm.py", dict(B=4, S=16, D=32, E=8), None),
    "conv1d": ("models/conv1d.py", dict(B=2, C=4, L=33, K=8, R=5, P=16), None),
    "avgpool2d": ("models/avgpool2d.py", dict(N=2, C=3, H=11, W=11, P=6, Q=6, P2=5, Q2=5), None),
    "compare_where": ("models/compare_where.py", dict(B=6, D=20), None),
    "linear_relu": ("models/linear_relu.py", dict(B=16, D=64, E=96), None),
    "maxpool2d": ("models/maxpool2d.py", dict(N=2, C=4, H=15, W=15, P=8, Q=8), None),
    "sdpa_causal": ("models/sdpa_gqa.py", dict(B=2, H=4, G=4, R=1, S=16, T=16, E=8), None),  # a query head a group
    "sdpa_gqa": ("models/sdpa_gqa.py", dict(B=1, H=8, G=2, R=4, S=12, T=12, E=16), None),
    "rmsnorm": ("models/rmsnorm.py", dict(B=2, S=7, D=64), None),
    "slice_select": ("models/slice_select.py", dict(B=5, D=9), None),
    "view_permute": ("models/view_permute.py", dict(B=2, S=8, F=64, H=4, E=16, G=128), None),
    "cat_stack_split": ("models/cat_stack_split.py", dict(B=4, Da=5, Db=7), None),
    "batchnorm2d": ("models/batchnorm2d.py", dict(N=2, C=8, H=9, W=9), None),
    "batchnorm1d": ("models/batchnorm1d.py", dict(B=16, D=32), None),
    "groupnorm": ("models/groupnorm.py", dict(N=2, C=16, H=5, W=5, G=4, Cg=4), None),
    "instancenorm": ("models/groupnorm.py", dict(N=2, C=6, H=10, W=10, G=6, Cg=1), None),  # one channel a group
    "conv2d_depthwise": ("models/conv2d_depthwise.py", dict(N=2, C=8, H=14, W=14, K=12), None),
    "conv2d_dilated": ("models/conv2d_dilated.py", dict(N=1, C=4, H=20, W=18, K=6, P=20, Q=12), None),
    "conv2d_grouped": ("models/conv2d_grouped.py", dict(N=2, C=8, H=12, W=12, G=4, Cg=2, Kg=4, K=16), None),
    "conv_transpose2d_s2": ("models/conv_transpose2d_s2.py", dict(N=2, C=8, H=7, W=7, K=4, G=1, Cg=8, Kg=4, H2=8,
                                                                  W2=8, P=14, Q=14), None),
    "conv_transpose2d_k2s2": ("models/conv_transpose2d_s2.py", dict(N=1, C=8, H=6, W=5, K=6, G=2, Cg=4, Kg=3, KH=2,
                                                                    KW=2, I=1, J=1, H2=6, W2=5, P=12, Q=10), None),
    "avgpool3d": ("models/avgpool3d.py", dict(N=1, C=2, T=6, H=6, W=6, T2=3, H2=3, W2=3), None),
    "maxpool1d_3d": ("models/maxpool1d_3d.py", dict(B=2, S=3, L=20, P=16, N=1, C=2, T=6, H=8, W=8, T2=3, H2=4, W2=4),
                     None),
    "gru_bidirectional": ("models/gru_bidirectional.py", dict(T=4, B=2, D=8, G=30, Hd=10), None),
    "regression_losses": ("models/regression_losses.py", dict(B=8, D=6), None),
    "cross_entropy": ("models/cross_entropy.py", dict(B=16, D=10), None),
    "kl_bce": ("models/kl_bce.py", dict(B=4, D=9), None),
    "nll_loss_weighted": ("models/nll_loss_weighted.py", dict(B=12, C=5), None),
    "moe_topk": ("models/moe_topk.py", dict(B=24, D=32, E=4, F=64, K=2), None),
    "logsumexp": ("models/logsumexp.py", dict(B=4, S=6, D=30), None),
    "log_softmax": ("models/log_softmax.py", dict(B=16, D=100), None),
    "var_std": ("models/var_std.py", dict(B=5, D=21), None),
    "sum_mean": ("models/sum_mean.py", dict(N=3, C=5, H=7, W=9), None),
    "conv3d": ("models/conv3d.py", dict(N=1, C=3, T=6, H=10, W=10, K=6, P=6, Q=5, R=5), None),
    "activations_smooth": ("models/activations_smooth.py", dict(B=4, D=128), None),
    "activations_piecewise": ("models/activations_piecewise.py", dict(B=8, D=64), None),
    "conv_transpose1d": ("models/conv_transpose1d.py", dict(B=2, C=4, L=15, K=6, P=15), None),
    "cumulative_ops": ("models/cumulative_ops.py", dict(B=3, S=10, D=6, R=4, C=8), None),
    "prod_cumsum": ("models/prod_cumsum.py", dict(B=6, D=13), None),
    "gnn_scatter": ("models/gnn_scatter.py", dict(N=10, E=30, D=16, H=24), None),  # F = D + H follows
    "adaptive_pool": ("models/adaptive_pool.py", dict(N=2, C=5, H=8, W=8), None),  # window Dims follow H, W
}


def torch_extra_bytes(name: str, sizes: dict[str, int]) -> int:
    """Bytes the torch capture counts beyond the IR program's, derived by hand; 0 for all
    but two models.

    adaptive_pool: the torch lowering reads the valid-slot table of the first pooled dim through
    a broadcast view, an intermediate the per-node count charges at 1 B an element (the bounds
    resolve it to the generated table: 0 B); the IR reads the generated table itself.

    moe_topk: torch.gather needs its index expanded to the output's shape,
    ``idx.unsqueeze(-1).expand(B, K, D)``, and the torch frontend counts the gather's read
    of that broadcast view at full size (B*K*D int64), while the IR gather reads the
    [B, K] indexes once (B*K int64). And the torch frontend lowers the top-k (rules/select.py) where
    the IR keeps it opaque: its three nodes also write and read the row maximum (B fp32, twice), read
    the indices again in the values gather (B*K int64) and gather the values from the probabilities
    (B*K fp32)."""
    if name == "moe_topk":
        b, k = sizes["B"], sizes["K"]
        return 8 * b * k * (sizes["D"] - 1) + 2 * 4 * b + 8 * b * k + 4 * b * k
    if name == "adaptive_pool":  # the average to 3 and the max to 5 over H
        return sum(o * _window(sizes["H"], o) for o in (3, 5))
    return 0


def torch_extra_vector_flops(name: str, sizes: dict[str, int]) -> int:
    """Vector work the torch capture counts beyond the IR program's: moe_topk's lowered top-k, per row
    ``E - 1`` comparisons for the maximum and ``K`` for the choice (rules/select.py), which the IR's
    opaque top-k leaves uncounted; 0 for the others."""
    return sizes["B"] * (sizes["E"] - 1 + sizes["K"]) if name == "moe_topk" else 0


def _window(n: int, o: int) -> int:
    """The widest adaptive-pooling window of a dim of ``n`` pooled to ``o``."""
    return max(-(-(i + 1) * n // o) - (i * n) // o for i in range(o))


def counts(g) -> tuple:
    m = graph_metrics(g)
    return m.macs, m.flops_matrix, m.flops_vector, m.transcendental, m.bytes


@pytest.mark.parametrize("name", sorted(TWINS))
def test_ir_program_counts_equal_the_torch_capture(name):
    prog, sizes, dtype = TWINS[name]
    ir = capture_file(IR / prog, jit=False, sizes=sizes)
    assert ir.validation.status == "passed", ir.validation.reason
    th = torch_frontend.capture_file(MODELS / f"{name}.py", validate=False, dtype=dtype)
    macs, fm, fv, tr, nbytes = counts(th)
    assert counts(ir) == (macs, fm, fv - torch_extra_vector_flops(name, sizes), tr,
                          nbytes - torch_extra_bytes(name, sizes))


def test_every_models_program_has_a_twin():
    """Every program under examples/loopir/models is checked here, under its model's name."""
    progs = {p.stem for p in (IR / "models").glob("*.py") if not p.name.startswith("_")}  # _common: kernels
    assert progs == {Path(p).stem for p, _, _ in TWINS.values() if p.startswith("models/")}
    assert all((MODELS / f"{n}.py").is_file() for n in TWINS)


def test_sizes_override_module_level_constants():
    """The program is imported under the size overrides: sdpa_gqa's KEPT (the causal
    fraction, computed at import with size()) follows S and T."""
    for s in (16, 12):
        g = capture_file(IR / "models" / "sdpa_gqa.py", validate=False, sizes=dict(B=1, H=2, G=1, R=2, S=s, T=s, E=4))
        assert g.tensor_map["mask"].density == pytest.approx((s + 1) / (2 * s))


def run_ir(prog: str, sizes: dict[str, int], arrays: dict) -> dict:
    """The IR program executed (plain Python kernels, numpy builtins) at ``sizes`` on
    ``arrays`` (the rest from its get_inputs or random): {output name: numpy array}."""
    from solar_io.frontends.loopir.capture import load_program, make_inputs, model_params, program_sizes, run_model
    from solar_io.frontends.loopir.state import using

    path = IR / prog
    mod = load_program(path, sizes)
    params = model_params(mod, path)
    dims = program_sizes(mod, sizes, path)
    with using(sizes=dims):  # get_inputs sees the sizes, as in a capture
        inputs = make_inputs(mod, params, dims, 0, path)
    inputs.update({k: np.asarray(v, dtype=inputs[k].dtype) for k, v in arrays.items()})
    outs = run_model(mod, params, inputs, path, tracer=None, jit=False, sizes=dims)
    return {k: v.numpy() for k, v in outs.items()}


def torch_model(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_twin_{name}", MODELS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    return mod, mod.Model(*mod.get_init_inputs()).eval(), [t for t in mod.get_inputs()]


def test_scan_scatter_and_adaptive_programs_compute_what_torch_computes():
    """The scan, scatter-add and adaptive-pool twins compute the PyTorch models' values on
    the same inputs (not only the same counts): window tables, scans and scatters included."""
    torch = pytest.importorskip("torch")
    _, m, (x, p) = torch_model("cumulative_ops")
    want = [t.detach().numpy() for t in m(x, p)]
    got = run_ir("models/cumulative_ops.py", TWINS["cumulative_ops"][1], {"x": x.numpy(), "p": p.numpy()})
    for k, w in zip(("y", "c", "lse"), want, strict=True):
        np.testing.assert_allclose(got[k], w, rtol=1e-5, atol=1e-5)

    _, m, (x,) = torch_model("prod_cumsum")
    want = [t.detach().numpy() for t in m(x)]
    got = run_ir("models/prod_cumsum.py", TWINS["prod_cumsum"][1], {"x": x.numpy()})
    for k, w in zip("psc", want, strict=True):
        np.testing.assert_allclose(got[k], w, rtol=1e-5, atol=1e-6)

    _, m, (x,) = torch_model("adaptive_pool")
    want = [t.detach().numpy() for t in m(x)]
    got = run_ir("models/adaptive_pool.py", TWINS["adaptive_pool"][1], {"x": x.numpy()})
    for k, w in zip("abcdef", want, strict=True):
        np.testing.assert_allclose(got[k], w, rtol=1e-5, atol=1e-6)

    _, m, (x, src, dst) = torch_model("gnn_scatter")
    with torch.no_grad():
        want = m(x, src, dst).numpy()
    weights = {"w_msg": m.msg.weight, "b_msg": m.msg.bias, "w_upd": m.upd.weight, "b_upd": m.upd.bias}
    got = run_ir("models/gnn_scatter.py", TWINS["gnn_scatter"][1],
                 {"x": x.numpy(), "src": src.numpy(), "dst": dst.numpy(),
                  **{k: v.detach().numpy() for k, v in weights.items()}})
    np.testing.assert_allclose(got["y"], want, rtol=1e-4, atol=1e-5)
