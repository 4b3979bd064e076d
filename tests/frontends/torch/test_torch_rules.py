"""Per-rule validation: each lowering rule, at small sizes, against the real ATen op.

Every case calls one ATen op directly (``torch.ops.aten.X.overload``), is captured through
the full pipeline (export on meta, lowering) and validated by running the reference
executor against eager PyTorch on random inputs. ``test_every_rule_is_tested`` fails when a
rule is added without a case here or a model in tests/models exercising it
(``tests/frontends/torch/test_torch_corpus.py::test_every_rule_is_tested``).
"""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")


from solar_io.frontends.torch.capture import capture_source  # noqa: E402
from solar_io.frontends.torch.loader import Source, _FnModule  # noqa: E402
from solar_io.frontends.torch.specialise import TABLES  # noqa: E402

aten = torch.ops.aten


def r(*shape: int) -> Callable[[], torch.Tensor]:
    return lambda: torch.randn(*shape)


def pos(*shape: int) -> Callable[[], torch.Tensor]:
    return lambda: torch.rand(*shape) + 0.1


def ints(hi: int, *shape: int) -> Callable[[], torch.Tensor]:
    return lambda: torch.randint(0, hi, shape)


def u8(*shape: int) -> Callable[[], torch.Tensor]:
    return lambda: torch.randint(0, 256, shape, dtype=torch.uint8)


def boolean(*shape: int) -> Callable[[], torch.Tensor]:
    return lambda: torch.rand(*shape) > 0.5


def unit(*shape: int) -> Callable[[], torch.Tensor]:
    """Values in (-0.9, 0.9): inside the domain of asin, acos, atanh, erfinv."""
    return lambda: torch.rand(*shape) * 1.8 - 0.9


def perm(n: int, k: int) -> Callable[[], torch.Tensor]:
    """``k`` distinct indexes below ``n``."""
    return lambda: torch.randperm(n)[:k]


def rows_perm(rows: int, n: int, k: int) -> Callable[[], torch.Tensor]:
    """Per row, ``k`` distinct indexes below ``n``."""
    return lambda: torch.stack([torch.randperm(n)[:k] for _ in range(rows)])


class _BN(torch.nn.Module):
    """Calls a batch-norm overload with buffers (running stats) and parameters."""

    def __init__(self, fn: Callable, c: int = 4):
        super().__init__()
        self.fn = fn
        self.w = torch.nn.Parameter(torch.rand(c) + 0.5)
        self.b = torch.nn.Parameter(torch.randn(c))
        self.register_buffer("rm", torch.randn(c) * 0.1)
        self.register_buffer("rv", torch.rand(c) + 0.5)

    def forward(self, x: torch.Tensor):  # noqa: ANN201
        return self.fn(x, self.w, self.b, self.rm, self.rv)


# op name -> (function of the inputs, input makers)
CASES: dict[str, tuple[Callable, list[Callable]]] = {
    "aten.mm": (lambda a, b: aten.mm.default(a, b), [r(5, 7), r(7, 3)]),
    "aten.outer": (lambda x, y: aten.outer.default(x, y), [r(5), r(3)]),
    "aten.ger": (lambda x, y: aten.ger.default(x, y), [r(4), r(6)]),
    "aten.addbmm": (lambda c, a, b: aten.addbmm.default(c, a, b, beta=0.5, alpha=2.0),
                    [r(2, 3), r(5, 2, 6), r(5, 6, 3)]),
    "aten.addcdiv": (lambda x, a, b: aten.addcdiv.default(x, a, b, value=0.5), [r(3, 4), r(3, 4), pos(3, 4)]),
    "aten._convolution": (lambda x, w: aten._convolution.default(x, w, None, [2, 1], [1, 0], [1, 1], False, [0, 0],
                                                                  1, False, False, True, True),
                          [r(1, 2, 7, 6), r(3, 2, 3, 2)]),
    "aten.convolution": (lambda x, w, b: aten.convolution.default(x, w, b, [1], [1], [2], True, [0], 1),
                         [r(2, 3, 5), r(3, 2, 3), r(2)]),
    "aten._adaptive_avg_pool2d": (lambda x: aten._adaptive_avg_pool2d.default(x, [2, 3]), [r(1, 2, 4, 6)]),
    "aten._adaptive_avg_pool3d": (lambda x: aten._adaptive_avg_pool3d.default(x, [1, 2, 2]), [r(1, 2, 2, 4, 4)]),
    "aten.adaptive_avg_pool1d": (lambda x: aten.adaptive_avg_pool1d.default(x, [3]), [r(2, 3, 9)]),
    "aten.adaptive_avg_pool3d": (lambda x: aten.adaptive_avg_pool3d.default(x, [1, 1, 1]), [r(1, 2, 3, 4, 4)]),
    "aten.adaptive_max_pool1d": (lambda x: aten.adaptive_max_pool1d.default(x, [2])[0], [r(2, 3, 8)]),
    "aten.adaptive_max_pool3d": (lambda x: aten.adaptive_max_pool3d.default(x, [1, 2, 2])[0], [r(1, 2, 2, 4, 4)]),
    "aten.avg_pool1d": (lambda x: aten.avg_pool1d.default(x, [3], [2], [1]), [r(2, 3, 10)]),
    "aten.max_pool1d_with_indices": (lambda x: aten.max_pool1d_with_indices.default(x, [2])[0], [r(1, 2, 9)]),
    "aten.max_pool2d_with_indices": (lambda x: aten.max_pool2d_with_indices.default(x, [3, 3], [2, 2], [1, 1])[0],
                                     [r(1, 2, 7, 7)]),
    "aten.max_pool3d_with_indices": (lambda x: aten.max_pool3d_with_indices.default(x, [2, 2, 2])[0],
                                     [r(1, 1, 4, 4, 4)]),
    "aten._softmax": (lambda x: aten._softmax.default(x, 1, False), [r(3, 5, 2)]),
    "aten._safe_softmax": (lambda x: aten._safe_softmax.default(x, -1), [r(3, 5)]),
    "aten._log_softmax": (lambda x: aten._log_softmax.default(x, -1, False), [r(4, 6)]),
    "aten.special_softmax": (lambda x: aten.special_softmax.default(x, 0), [r(4, 3)]),
    "aten.special_log_softmax": (lambda x: aten.special_log_softmax.default(x, 1), [r(4, 3)]),
    "aten.native_layer_norm": (lambda x: aten.native_layer_norm.default(x, [6], None, None, 1e-5), [r(2, 3, 6)]),
    "aten.native_group_norm": (lambda x: aten.native_group_norm.default(x, None, None, 2, 6, 9, 3, 1e-5),
                               [r(2, 6, 3, 3)]),
    "aten._fused_rms_norm": (lambda x: aten._fused_rms_norm.default(x, [5], None, 1e-6)[0], [r(3, 5)]),
    "aten._prelu_kernel": (lambda x, w: aten._prelu_kernel.default(x, w), [r(2, 3, 4), r(3, 1)]),
    "aten._to_copy": (lambda x: aten._to_copy.default(x, dtype=torch.float16), [r(3, 4)]),
    "aten._unsafe_view": (lambda x: aten._unsafe_view.default(x * 2, [6, 2]), [r(3, 4)]),
    "aten.view_as": (lambda x, y: x.view_as(y) + y, [r(3, 4), r(2, 6)]),
    "aten.reshape_as": (lambda x, y: aten.reshape_as.default(x, y), [r(3, 4), r(12)]),
    "aten.amin": (lambda x: aten.amin.default(x, [0, 2]), [r(3, 4, 5)]),
    "aten.bitwise_or": (lambda a, b: aten.bitwise_or.Tensor(a, b), [boolean(3, 4), boolean(3, 4)]),
    "aten.logical_and": (lambda a, b: aten.logical_and.default(a, b), [boolean(3, 4), boolean(4)]),
    "aten.logical_or": (lambda a, b: aten.logical_or.default(a, b), [r(3, 4), r(3, 4)]),
    "aten.logical_not": (lambda a: aten.logical_not.default(a), [boolean(5)]),
    # Python's & and | on masks, and diff (transformers' causal-mask and packed-sequence code)
    "aten.bitwise_and": (lambda a, b: aten.bitwise_and.Tensor(a, b), [boolean(3, 4), boolean(3, 4)]),
    "aten.__and__": (lambda a, b: aten.__and__.Tensor(a, b), [boolean(3, 4), boolean(4)]),
    "aten.__or__": (lambda a, b: aten.__or__.Tensor(a, b), [boolean(3, 4), boolean(3, 4)]),
    "aten.diff": (lambda x, p, ids, m: (aten.diff.default(x, 1, 0), aten.diff.default(ids, 1, -1, p),
                                        aten.diff.default(x, 1, -1, None, x[:, :2]), aten.diff.default(m)),
                  [r(4, 5), ints(9, 3, 1), ints(9, 3, 6), boolean(2, 7)]),
    "aten.bitwise_not": (lambda a: aten.bitwise_not.default(a), [ints(100, 4, 3)]),
    # aten's alias names, which export keeps as written (torch.greater in a MoE's expert_hit)
    "aten.greater": (lambda a, b: (aten.greater.Scalar(a, 0), aten.greater.Tensor(a, b)), [r(3, 4), r(4)]),
    "aten.greater_equal": (lambda a, b: aten.greater_equal.Tensor(a, b), [r(3, 4), r(3, 4)]),
    "aten.less": (lambda a: aten.less.Scalar(a, 0.5), [r(3, 4)]),
    "aten.less_equal": (lambda a, b: aten.less_equal.Tensor(a, b), [r(3, 4), r(1, 4)]),
    "aten.not_equal": (lambda a: aten.not_equal.Scalar(a, 3), [ints(6, 5, 2)]),
    "aten.multiply": (lambda a, b: aten.multiply.Tensor(a, b), [r(3, 4), r(4)]),
    "aten.subtract": (lambda a, b: aten.subtract.Tensor(a, b, alpha=2), [r(3, 4), r(3, 4)]),
    "aten.divide": (lambda a, b: (aten.divide.Tensor(a, b), aten.divide.Tensor_mode(a, b, rounding_mode="floor")),
                    [r(3, 4), r(3, 4)]),
    "aten.true_divide": (lambda a, b: aten.true_divide.Tensor(a, b), [r(3, 4), r(4)]),
    "aten.absolute": (lambda a: aten.absolute.default(a), [r(3, 4)]),
    "aten.negative": (lambda a: aten.negative.default(a), [r(3, 4)]),
    "aten.arctan": (lambda a: aten.arctan.default(a), [r(3, 4)]),
    "aten.arcsin": (lambda a: aten.arcsin.default(a.tanh()), [r(3, 4)]),
    "aten.arccos": (lambda a: aten.arccos.default(a.tanh()), [r(3, 4)]),
    "aten.arcsinh": (lambda a: aten.arcsinh.default(a), [r(3, 4)]),
    "aten.arccosh": (lambda a: aten.arccosh.default(a.abs() + 1), [r(3, 4)]),
    "aten.arctanh": (lambda a: aten.arctanh.default(a.tanh() * 0.9), [r(3, 4)]),
    "aten.special_erf": (lambda a: aten.special_erf.default(a), [r(3, 4)]),
    "aten.special_exp2": (lambda a: aten.special_exp2.default(a), [r(3, 4)]),
    "aten.fix": (lambda a: aten.fix.default(a * 3), [r(3, 4)]),
    "aten.special_expit": (lambda a: aten.special_expit.default(a), [r(3, 4)]),
    # ops torch.export keeps whole that decomposed the whole program before they had rules
    "aten.mv": (lambda m, v: aten.mv.default(m, v), [r(3, 4), r(4)]),
    "aten.dot": (lambda u, v: aten.dot.default(u, v), [r(5), r(5)]),
    "aten.addmv": (lambda b, m, v: aten.addmv.default(b, m, v, beta=0.5, alpha=2), [r(3), r(3, 4), r(4)]),
    "aten.moveaxis": (lambda x: (aten.moveaxis.int(x, 0, -1) * 1, aten.moveaxis.intlist(x, [2, 0], [0, 3]) * 1),
                      [r(2, 3, 4, 5)]),
    "aten.logical_xor": (lambda a, b: aten.logical_xor.default(a, b), [r(3, 4), boolean(4)]),
    "aten.bitwise_xor": (lambda a, b: aten.bitwise_xor.Tensor(a, b), [boolean(3, 4), boolean(3, 4)]),
    "aten.log_sigmoid": (lambda x: aten.log_sigmoid.default(x * 30), [r(3, 4)]),
    "aten.logaddexp": (lambda a, b: aten.logaddexp.default(a * 30, b), [r(3, 4), r(4)]),
    "aten.isfinite": (lambda x: aten.isfinite.default(x / (x > 0.5)), [r(3, 4)]),
    "aten.sgn": (lambda x: aten.sgn.default(x), [r(3, 4)]),
    "aten.deg2rad": (lambda x: aten.deg2rad.default(x), [r(3, 4)]),
    "aten.rad2deg": (lambda x: aten.rad2deg.default(x), [r(3, 4)]),
    "aten.hypot": (lambda a, b: aten.hypot.default(a, b), [r(3, 4), r(3, 4)]),
    "aten.pixel_shuffle": (lambda x: aten.pixel_shuffle.default(x, 2), [r(2, 12, 3, 5)]),
    "aten.pixel_unshuffle": (lambda x: aten.pixel_unshuffle.default(x, 2), [r(3, 2, 4, 6)]),
    # packed fp4 and nibble unpacking (rules/fp4.py): uint8 bytes, masks of signed integers too
    "aten.view.dtype": (lambda b: aten.view.dtype(aten.view.dtype(b, torch.float4_e2m1fn_x2), torch.uint8) & 15,
                        [u8(3, 4)]),
    "aten.bitwise_and.Scalar": (lambda a: aten.bitwise_and.Scalar(a, 15), [lambda: torch.randint(-99, 99, (3, 4))]),
    "aten.__rshift__.Scalar": (lambda b: aten.__rshift__.Scalar(b, 4), [u8(3, 4)]),
    "aten.bitwise_right_shift.Tensor_Scalar": (lambda b: aten.bitwise_right_shift.Tensor_Scalar(b, 3), [u8(5)]),
    "aten.broadcast_to": (lambda x: aten.broadcast_to.default(x, [3, 4, 5]) * 1, [r(4, 1)]),
    "aten.expand_as": (lambda x, y: x.expand_as(y) + y, [r(1, 5), r(3, 5)]),
    "aten.ceil": (lambda x: aten.ceil.default(x * 3), [r(4, 4)]),
    "aten.floor": (lambda x: aten.floor.default(x * 3), [r(4, 4)]),
    "aten.round": (lambda x: aten.round.default(x * 3), [r(4, 4)]),
    "aten.clamp_max": (lambda x: aten.clamp_max.default(x, 0.2), [r(4, 4)]),
    "aten.clip": (lambda x: aten.clip.default(x, -0.1, 0.3), [r(4, 4)]),
    "aten.clone": (lambda x: aten.clone.default(x.t()), [r(3, 4)]),
    "aten.concat": (lambda a, b: aten.concat.default([a, b], 0), [r(2, 3), r(4, 3)]),
    "aten.concatenate": (lambda a, b: aten.concatenate.default([a, b], -1), [r(2, 3), r(2, 1)]),
    "aten.constant_pad_nd": (lambda x: aten.constant_pad_nd.default(x, [1, -1, 2, 0], 1.5), [r(2, 3, 4)]),
    "aten.cos": (lambda x: aten.cos.default(x), [r(3, 3)]),
    "aten.sin": (lambda x: aten.sin.default(x), [r(3, 3)]),
    "aten.erf": (lambda x: aten.erf.default(x), [r(3, 3)]),
    "aten.exp2": (lambda x: aten.exp2.default(x), [r(3, 3)]),
    "aten.log2": (lambda x: aten.log2.default(x), [pos(3, 3)]),
    "aten.log10": (lambda x: aten.log10.default(x), [pos(3, 3)]),
    "aten.square": (lambda x: aten.square.default(x), [r(3, 3)]),
    "aten.logit": (lambda x: aten.logit.default(x, 0.01), [lambda: torch.rand(3, 4)]),
    "aten.hardshrink": (lambda x: aten.hardshrink.default(x, 0.3), [r(3, 4)]),
    "aten.ne": (lambda x, y: aten.ne.Tensor(x.round(), y.round()), [r(3, 4), r(3, 4)]),
    "aten.le": (lambda x: aten.le.Scalar(x, 0.1), [r(3, 4)]),
    "aten.full": (lambda x: x + torch.full([3, 4], 2.5), [r(3, 4)]),
    "aten.full_like": (lambda x: aten.full_like.default(x, 7.0) * x, [r(3, 4)]),
    "aten.zeros_like": (lambda x: aten.zeros_like.default(x) + x, [r(3, 4)]),
    "aten.ones_like": (lambda x: aten.ones_like.default(x) - x, [r(3, 4)]),
    "aten.ones": (lambda x: torch.ones([4]) + x, [r(3, 4)]),
    "aten.empty_like": (lambda x: aten.fill.Scalar(aten.empty_like.default(x), 3.0) + x, [r(3, 4)]),
    "aten.new_zeros": (lambda x: x.new_zeros([3, 4]) + x, [r(3, 4)]),
    "aten.new_ones": (lambda x: x.new_ones([4]) + x, [r(3, 4)]),
    "aten.new_full": (lambda x: x.new_full([1, 4], 0.5) + x, [r(3, 4)]),
    "aten.new_empty": (lambda x: aten.fill.Scalar(x.new_empty([4]), 1.0) + x, [r(3, 4)]),
    "aten.scalar_tensor": (lambda x: aten.scalar_tensor.default(2.0) * x, [r(3, 4)]),
    "aten.norm": (lambda x: aten.norm.ScalarOpt_dim(x, 3, [1]), [r(3, 4)]),
    "aten.std_mean": (lambda x: aten.std_mean.correction(x, [1], correction=1), [r(3, 6)]),
    "aten.var_mean": (lambda x: aten.var_mean.correction(x, [0], correction=0, keepdim=True), [r(5, 2)]),
    "aten.split": (lambda x: aten.split.Tensor(x, 2, 1)[1], [r(3, 5)]),
    "aten.tensor_split": (lambda x: aten.tensor_split.sections(x, 3, 0)[2], [r(7, 2)]),
    "aten.swapaxes": (lambda x: aten.swapaxes.default(x, 0, 2) + 0, [r(2, 3, 4)]),
    "aten.swapdims": (lambda x: aten.swapdims.default(x, 1, 2) * 2, [r(2, 3, 4)]),
    "aten.t": (lambda x: aten.t.default(x) * 2, [r(3, 4)]),
    "aten.numpy_T": (lambda x: aten.numpy_T.default(x) * 2, [r(3, 4)]),
    "aten.type_as": (lambda x, y: aten.type_as.default(x, y) + y, [ints(9, 3, 4), r(3, 4)]),
    "aten.alias": (lambda x: aten.alias.default(x) + 1, [r(3)]),
    "aten.detach": (lambda x: aten.detach.default(x) + 1, [r(3)]),
    "aten.lift_fresh_copy": (lambda x: aten.lift_fresh_copy.default(x) + 1, [r(3)]),
    "aten.alpha_dropout": (lambda x: aten.alpha_dropout.default(x, 0.2, False) + 1, [r(3)]),
    "aten.feature_dropout": (lambda x: aten.feature_dropout.default(x, 0.2, False) + 1, [r(2, 3)]),
    "aten.empty": (lambda x: aten.fill.Scalar(torch.empty([3]), 2.0) + x, [r(3)]),
    "aten.empty_strided": (lambda x: aten.fill.Scalar(torch.empty_strided([3], [1]), 2.0) + x, [r(3)]),
    "aten.native_dropout": (lambda x: aten.native_dropout.default(x, 0.0, True)[0] * 2, [r(3, 4)]),
    "aten.fill": (lambda x: aten.fill.Scalar(x, 4.0) * x, [r(3)]),
    "aten.nll_loss_forward": (lambda x, t: aten.nll_loss_forward.default(x, t, None, 2, -100)[0],
                              [r(6, 4), ints(4, 6)]),
    "aten.nll_loss2d_forward": (lambda x, t: aten.nll_loss2d_forward.default(x, t, None, 1, 1)[0],
                                [r(2, 3, 4, 4), ints(3, 2, 4, 4)]),
    "aten.nll_loss2d": (lambda x, t: aten.nll_loss2d.default(x, t, None, 0), [r(2, 3, 4, 4), ints(3, 2, 4, 4)]),
    "aten.nll_loss_nd": (lambda x, t: aten.nll_loss_nd.default(x, t, None, 1), [r(5, 3), ints(3, 5)]),
    "aten.nll_loss": (lambda x, t: aten.nll_loss.default(x, t, None, 2), [r(5, 3), ints(3, 5)]),
    "aten.rnn_relu.input": (None, []),  # built below (needs weights)
    "aten.frobenius_norm": (lambda x: aten.frobenius_norm.dim(x, [0, 1]), [r(3, 4)]),
    # format 1.1: scans
    "aten.cumsum": (lambda x: aten.cumsum.default(x, 1), [r(3, 5, 2)]),
    "aten.cumprod": (lambda x: aten.cumprod.default(x, 0), [lambda: torch.rand(5, 3) + 0.5]),
    "aten.cummax": (lambda x: aten.cummax.default(x, 1)[0] * 2, [r(3, 6)]),
    "aten.cummin": (lambda x: aten.cummin.default(x, 0)[0] + 1, [r(5, 2)]),
    "aten.logcumsumexp": (lambda x: aten.logcumsumexp.default(x, -1), [r(3, 7)]),
    # format 1.1: scatters (overwrites get indexes without repeats: which write wins is undefined)
    "aten.scatter": (lambda x, i, s: aten.scatter.src(x, 1, i, s) + aten.scatter.value(x, 1, i, 0.5),
                     [r(3, 5), rows_perm(3, 5, 3), r(3, 4)]),
    "aten.scatter_add": (lambda x, i, s: aten.scatter_add.default(x, 0, i, s), [r(4, 3), ints(4, 6, 2), r(6, 3)]),
    "aten.scatter_reduce": (lambda x, i, s: aten.scatter_reduce.two(x, 1, i, s, "amax") +
                            aten.scatter_reduce.two(x, 1, i, s, "sum"), [r(3, 4), ints(4, 3, 6), r(3, 6)]),
    "aten.index_add": (lambda x, i, s: aten.index_add.default(x, 1, i, s, alpha=2.0),
                       [r(2, 5, 3), ints(5, 7), r(2, 7, 3)]),
    "aten.index_copy": (lambda x, i, s: aten.index_copy.default(x, 0, i, s), [r(6, 3), perm(6, 4), r(4, 3)]),
    "aten.index_put": (lambda x, i, j, v: aten.index_put.default(x, [i, None, j], v, True) +
                       aten.index_put.default(x, [i], v[0, :1], False)[:, :, :1].sum(),
                       [r(5, 3, 4), perm(5, 3), ints(4, 3), r(3, 3)]),
    # format 1.1: map operators
    "aten.tan": (lambda x: aten.tan.default(x), [r(3, 4)]),
    "aten.asin": (lambda x: aten.asin.default(x), [unit(3, 4)]),
    "aten.acos": (lambda x: aten.acos.default(x), [unit(3, 4)]),
    "aten.atan": (lambda x: aten.atan.default(x), [r(3, 4)]),
    "aten.sinh": (lambda x: aten.sinh.default(x), [r(3, 4)]),
    "aten.cosh": (lambda x: aten.cosh.default(x), [r(3, 4)]),
    "aten.asinh": (lambda x: aten.asinh.default(x), [r(3, 4)]),
    "aten.acosh": (lambda x: aten.acosh.default(x + 2), [pos(3, 4)]),
    "aten.atanh": (lambda x: aten.atanh.default(x), [unit(3, 4)]),
    "aten.atan2": (lambda y, x: aten.atan2.default(y, x), [r(3, 4), r(4)]),
    "aten.erfc": (lambda x: aten.erfc.default(x), [r(3, 4)]),
    "aten.erfinv": (lambda x: aten.erfinv.default(x), [unit(3, 4)]),
    "aten.log1p": (lambda x: aten.log1p.default(x), [pos(3, 4)]),
    "aten.expm1": (lambda x: aten.expm1.default(x), [r(3, 4)]),
    "aten.trunc": (lambda x: aten.trunc.default(x * 3), [r(3, 4)]),
    "aten.fmod": (lambda x, y: aten.fmod.Tensor(x * 5, y) + aten.fmod.Scalar(x, 0.3), [r(3, 4), pos(3, 4)]),
    "aten.remainder": (lambda x, y: aten.remainder.Tensor(x * 5, y) + aten.remainder.Scalar(x, -0.7),
                       [r(3, 4), pos(3, 4)]),
    "aten.native_batch_norm": (None, []),
    "aten._native_batch_norm_legit": (None, []),
    "aten._native_batch_norm_legit_no_training": (None, []),
    "aten._native_batch_norm_legit_functional": (None, []),
    "aten._batch_norm_with_update": (None, []),
    # selections and samplers (issue 18, rules/select.py; their counts: tests/frontends/torch/test_routing_ops.py)
    "aten.argsort": (lambda x: aten.argsort.default(x, 0, True), [r(6, 5)]),
    "aten.histc": (lambda x: aten.histc.default(x, 5, -1.0, 1.0), [r(50)]),
    "aten.multinomial": (lambda p: aten.multinomial.default(p, 3, True), [pos(4, 6)]),
    "aten.bernoulli": (lambda p: aten.bernoulli.default(p) + aten.bernoulli.p(p, 0.3), [pos(3, 5)]),
    "aten._grouped_mm": (lambda x, w, offs: aten._grouped_mm.default(x, w, offs),
                         [lambda: torch.randn(6, 8).bfloat16(), lambda: torch.randn(3, 8, 8).bfloat16(),
                          lambda: torch.tensor([2, 2, 6], dtype=torch.int32)]),
    "solar_io.bincount": (lambda x: torch.ops.solar_io.bincount(x, None, 6), [ints(6, 20)]),
    "solar_io.specialised_index": (lambda m: torch.ops.solar_io.specialised_index(m, [4, 2], -1),
                                   [lambda: torch.arange(12).reshape(3, 4) % 3 == 0]),
}
TABLES[-1] = torch.nonzero(torch.arange(12).reshape(3, 4) % 3 == 0).numpy()  # the specialised rows above
if importlib.util.find_spec("transformers") is not None:  # Hugging Face's grouped expert matmul
    import transformers.integrations.moe  # noqa: F401  (registers transformers::grouped_mm_fallback)

    CASES["transformers.grouped_mm_fallback"] = (
        lambda x, w, offs: torch.ops.transformers.grouped_mm_fallback(x, w, offs),
        [r(6, 4), r(3, 4, 5), lambda: torch.tensor([2, 2, 6])])

BN_CASES: dict[str, Callable] = {
    "aten.native_batch_norm": lambda x, w, b, m, v: aten.native_batch_norm.default(x, w, b, m, v, False, 0.1,
                                                                                  1e-5)[0],
    "aten._native_batch_norm_legit": lambda x, w, b, m, v: aten._native_batch_norm_legit.no_stats(
        x, w, b, True, 0.1, 1e-5)[0],
    "aten._native_batch_norm_legit_no_training": lambda x, w, b, m, v:
        aten._native_batch_norm_legit_no_training.default(x, w, b, m, v, 0.1, 1e-5)[0],
    "aten._native_batch_norm_legit_functional": lambda x, w, b, m, v:
        aten._native_batch_norm_legit_functional.default(x, w, b, m, v, False, 0.1, 1e-5)[0],
    "aten._batch_norm_with_update": lambda x, w, b, m, v: aten._batch_norm_with_update.default(
        x, w, b, m.clone(), v.clone(), 0.1, 1e-5)[0],
}


class _RNNRelu(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.RNN(3, 4, nonlinearity="relu", num_layers=2)

    def forward(self, x):  # noqa: ANN201
        return self.rnn(x)[0]


def _source(name: str, factory: Callable[[], torch.nn.Module], makers: list[Callable]) -> Source:
    return Source(Path(f"{name}.py"), f"{name}.py", "0" * 64, factory, lambda: [m() for m in makers])


def _case_sources() -> dict[str, Source]:
    out = {}
    for name, (fn, makers) in CASES.items():
        if name in BN_CASES:
            f = BN_CASES[name]
            out[name] = _source(name, lambda f=f: _BN(f), [r(3, 4, 2, 2)])
        elif name == "aten.rnn_relu.input":
            out[name] = _source(name, _RNNRelu, [r(5, 2, 3)])
        else:
            out[name] = _source(name, lambda fn=fn: _FnModule(fn), makers)
    return out


SOURCES = _case_sources()


@pytest.mark.parametrize("op", sorted(SOURCES))
def test_rule_matches_aten(op: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cap = capture_source(SOURCES[op], validate=True)
    assert op in cap.lowered.lowered_ops, f"{op} was not lowered by its rule (ops: {cap.lowered.lowered_ops})"
    assert not cap.lowered.opaque, cap.lowered.opaque
    assert cap.graph.validation.status == "passed", cap.graph.validation.reason


BN_TRAINING_RESULTS: dict[str, Callable] = {
    # every result in training mode: out, saved mean, saved rstd (and the updated running stats)
    "functional": lambda x, w, b, m, v: aten._native_batch_norm_legit_functional.default(
        x, w, b, m, v, True, 0.3, 1e-5),
    "native": lambda x, w, b, m, v: aten.native_batch_norm.default(x, w, b, m.clone(), v.clone(), True, 0.1, 1e-5),
    "no_stats": lambda x, w, b, m, v: aten._native_batch_norm_legit.no_stats(x, w, b, True, 0.1, 1e-5),
}


@pytest.mark.parametrize("case", sorted(BN_TRAINING_RESULTS))
def test_batch_norm_training_returns_every_statistic(case: str) -> None:
    """The per-node check of a large capture runs a batch norm alone and compares all its results
    (KernelBench's DenseNet and EfficientNet blocks train-mode batch norms), so the saved mean and
    rstd must have the op's per-channel shape and the running stats their momentum update."""
    f = BN_TRAINING_RESULTS[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cap = capture_source(_source(case, lambda: _BN(f), [r(3, 4, 2, 2)]), validate=True)
    n = {"functional": 5, "native": 3, "no_stats": 3}[case]
    assert len(cap.outputs) == n and not cap.lowered.opaque
    assert cap.graph.validation.status == "passed", cap.graph.validation.reason


CONV_CONFIGS = [
    # (dims, transposed, cin, cout, kernel, stride, padding, dilation, groups, output_padding, size)
    (1, False, 3, 4, 3, 1, 0, 1, 1, 0, 9), (1, False, 4, 6, 4, 3, 2, 2, 2, 0, 17),
    (2, False, 4, 4, 3, 2, 1, 1, 4, 0, 8), (2, False, 3, 5, 5, 2, 0, 1, 1, 0, 12),
    (2, False, 6, 6, (1, 3), (2, 1), (0, 1), (1, 3), 3, 0, 10), (3, False, 2, 4, 2, 2, 1, 1, 2, 0, 5),
    (1, True, 3, 4, 3, 1, 1, 2, 1, 0, 7), (1, True, 4, 2, 5, 3, 2, 1, 2, 1, 6),
    (2, True, 4, 6, 3, 2, 1, 1, 2, 1, 5), (2, True, 3, 3, 4, 2, 1, 1, 1, 0, 4),
    (2, True, 2, 4, (2, 3), (2, 3), (0, 1), 1, 1, (1, 2), 4), (2, True, 4, 4, 3, 1, 2, 3, 4, 0, 6),
    (3, True, 2, 2, 3, 2, 1, 1, 1, 1, 3),
]


@pytest.mark.parametrize("cfg", CONV_CONFIGS, ids=lambda c: f"{c[0]}d{'T' if c[1] else ''}-{c[2:9]}")
def test_convolution_variants(cfg: tuple) -> None:
    """Strided, dilated, padded, grouped and transposed convolutions against torch."""
    dims, transposed, cin, cout, k, s, p, d, g, op, n = cfg
    conv = {(1, False): torch.nn.Conv1d, (2, False): torch.nn.Conv2d, (3, False): torch.nn.Conv3d,
            (1, True): torch.nn.ConvTranspose1d, (2, True): torch.nn.ConvTranspose2d,
            (3, True): torch.nn.ConvTranspose3d}[(dims, transposed)]
    kw = dict(stride=s, padding=p, dilation=d, groups=g)
    if transposed:
        kw["output_padding"] = op
    src = _source("conv", lambda: conv(cin, cout, k, **kw), [r(2, cin, *([n] * dims))])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cap = capture_source(src, validate=True)
    assert not cap.lowered.opaque, cap.lowered.opaque
    assert cap.graph.validation.status == "passed", cap.graph.validation.reason
CONV_CONFIGS += [
    (1, True, 3, 2, 3, 2, 1, 2, 1, 0, 6), (1, True, 2, 3, 4, 3, 2, 2, 1, 1, 5),
    (2, True, 4, 4, 3, 2, (1, 2), (2, 3), 2, (1, 0), 5), (2, True, 2, 2, 5, 4, 3, 2, 1, 0, 4),
    (3, True, 2, 2, 3, (2, 1, 2), 1, (2, 1, 3), 1, 0, 3),
]


def _promoted_capture(name: str, fn: Callable) -> object:
    """``fn(ids, x)`` of int64 ids and fp32 x, captured and validated against eager."""
    src = _source(name, lambda: _FnModule(fn), [ints(9, 3, 6), lambda: torch.rand(3, 6) * 5])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cap = capture_source(src, validate=True)
    assert not cap.lowered.opaque, cap.lowered.opaque
    assert cap.graph.validation.status == "passed", cap.graph.validation.reason
    assert [t.dtype for t in cap.graph.tensors if t.role == "output"] == ["fp32"]
    return cap


def test_diff_with_an_append_of_another_dtype_is_promoted_as_eager_does() -> None:
    """``diff(int ids, append=float)`` joins at the promoted dtype (joining at the ids' dtype truncated the
    appended values), lowered by the diff rule."""
    cap = _promoted_capture("diff_promoted", lambda ids, p: aten.diff.default(ids, 1, -1, None, p[:, :1]))
    assert "aten.diff" in cap.lowered.lowered_ops


@pytest.mark.parametrize("op", ["cat", "stack"])
def test_cat_and_stack_of_mixed_dtypes_promote_as_eager_does(op: str) -> None:
    """``torch.cat([ints, floats])`` is float: every part is cast to the promoted dtype (casting to the first
    part's dtype truncated the floats)."""
    join = getattr(aten, op).default
    cap = _promoted_capture(f"{op}_promoted", lambda ids, p: join([ids, p], 0) * 1)
    assert f"aten.{op}" in cap.lowered.lowered_ops
