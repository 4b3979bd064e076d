"""conv_general_dilated variants: 1-d dilated (NWC), 3-d strided (NCDHW), depthwise 2-d (NHWC),
grouped 2-d with asymmetric padding (NCHW)."""

import numpy as np
from jax import lax


def normal(rng, shape):
    return rng.standard_normal(shape, dtype=np.float32)


def get_params():
    rng = np.random.default_rng(21)
    return {"w1": normal(rng, (3, 4, 6)) * 0.3,          # WIO
            "w3": normal(rng, (5, 2, 3, 3, 3)) * 0.3,    # OIDHW
            "wd": normal(rng, (3, 3, 1, 8)) * 0.3,       # HWIO, depthwise (8 groups)
            "wg": normal(rng, (6, 2, 3, 2)) * 0.3}       # OIHW, 2 groups of 2 -> 3


def get_inputs():
    rng = np.random.default_rng(22)
    return (normal(rng, (2, 12, 4)), normal(rng, (1, 2, 6, 7, 7)),
            normal(rng, (2, 9, 9, 8)), normal(rng, (2, 4, 8, 7)))


def model(p, x1, x3, xd, xg):
    y1 = lax.conv_general_dilated(x1, p["w1"], (1,), ((2, 2),), rhs_dilation=(2,),
                                  dimension_numbers=("NWC", "WIO", "NWC"))              # out 12
    y3 = lax.conv_general_dilated(x3, p["w3"], (2, 2, 2), ((1, 1), (1, 1), (1, 1)))    # out 3x4x4
    yd = lax.conv_general_dilated(xd, p["wd"], (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                  feature_group_count=8)                                # out 5x5
    yg = lax.conv_general_dilated(xg, p["wg"], (1, 1), ((0, 1), (1, 0)), feature_group_count=2)  # out 7x7
    return y1, y3, yd, yg
