"""Lowering rules of jaxpr primitives, one registry (``registry.RULES``).

Elementwise primitives are einsums with reduce ``none`` (operands of a jaxpr equation have
the output's shape; scalar literals become immediates); reductions reduce over their axes;
``dot_general`` is one contraction over its contracting dims with its batch dims shared;
``conv_general_dilated`` and ``reduce_window_*`` put the window in the input's affine index
(``s*O + d*K - lo``) with the padding a declared border, and a transposed convolution is one
such einsum per output phase; data movement (transpose, slice, pad, broadcast) are copies,
reshapes are row-major views; ``gather`` is an indirect copy and ``scatter*`` a scatter
einsum (format 1.1), as is a max pooling's backward (``select_and_scatter_add``, ``pool_grad``);
``scan`` and counted ``while`` loops are unrolled; cumulative ops are
format-1.1 scans. What stays opaque says why (``opaque.REASONS``).

One module per family; importing this package registers every rule in ``registry.RULES``.
"""

from . import contraction, conv, conv_transpose, elementwise, indexing, loops, movement, opaque, pool_grad  # noqa: F401
