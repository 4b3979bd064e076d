"""Running a model eagerly the way the capture lowers it: dropout as the identity.

Validation (``check``), the value-specialising trace (``specialise``) and the training check
(``train_check``) all run the user's model eagerly; this module is what they share, so none of
them imports another for it.

>>> import torch
>>> with no_dropout():
...     bool((torch.nn.functional.dropout(torch.ones(4), 0.5, training=True) == 1).all())
True
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch


@contextmanager
def no_dropout() -> Iterator[None]:
    """Run eager code with dropout as the identity, as the capture lowers it.

    Patches the dropout functions of ``torch`` and ``torch.nn.functional`` (which nn modules
    and ``multi_head_attention_forward`` look up at call time) and forces ``dropout_p=0`` in
    ``scaled_dot_product_attention``; restores them afterwards.
    """
    F = torch.nn.functional
    sdpa = F.scaled_dot_product_attention

    def identity(x: Any, *args: Any, **kwargs: Any) -> Any:
        return x

    def sdpa_no_dropout(*args: Any, **kwargs: Any) -> Any:
        if len(args) > 4:
            args = args[:4] + (0.0,) + args[5:]
        else:
            kwargs["dropout_p"] = 0.0
        return sdpa(*args, **kwargs)

    patches = [(F, n, identity) for n in ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
                                          "feature_alpha_dropout")]
    patches += [(torch, n, identity) for n in ("dropout", "alpha_dropout", "feature_dropout",
                                               "feature_alpha_dropout")]
    patches.append((F, "scaled_dot_product_attention", sdpa_no_dropout))
    saved = [(mod, name, getattr(mod, name)) for mod, name, _ in patches]
    try:
        for mod, name, fn in patches:
            setattr(mod, name, fn)
        yield
    finally:
        for mod, name, fn in saved:
            setattr(mod, name, fn)
