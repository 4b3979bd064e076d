"""Every lowering rule; importing this package registers them in ``registry.RULES``."""

from . import (  # noqa: F401
    attention,
    backward,
    conv,
    elementwise,
    flash,
    fp4,
    gather,
    loss,
    matmul,
    misc,
    movement,
    norm,
    pool,
    reduce,
    resample,
    rnn,
    scan,
    scatter,
    select,
    shape,
)
