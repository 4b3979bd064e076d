"""The fixed-size ops a replayed value-specialised capture exports (:mod:`.values`, :mod:`.specialise`).

``solar_io::specialised_index(src, shape, key)`` is a data-dependent result (``nonzero``, mask
indexing, ``repeat_interleave``, ...) as a constant of a fixed shape: the values pass stored it in
:data:`.tables.TABLES` under ``key`` (a fresh one from ``_keys``). ``solar_io::bincount(x, weights,
length)`` is ``torch.bincount`` at a fixed length. Each has a fake (meta) kernel giving its shape,
so ``torch.export`` traces it; importing this module registers both.
"""

from __future__ import annotations

import itertools

import torch

from .tables import TABLES

_lib = torch.library.Library("solar_io", "DEF")
_lib.define("specialised_index(Tensor src, int[] shape, int key) -> Tensor")
_lib.define("bincount(Tensor self, Tensor? weights, int length) -> Tensor")
_keys = itertools.count(1)


def _specialised_index(src: torch.Tensor, shape: list[int], key: int) -> torch.Tensor:
    return torch.from_numpy(TABLES[key].copy()).to(src.device)


def _bincount(x: torch.Tensor, weights: torch.Tensor | None, length: int) -> torch.Tensor:
    return torch.bincount(x, weights, minlength=length)[:length]


_lib.impl("specialised_index", _specialised_index, "CompositeExplicitAutograd")
_lib.impl("bincount", _bincount, "CompositeExplicitAutograd")


@torch.library.register_fake("solar_io::specialised_index")
def _specialised_index_fake(src: torch.Tensor, shape: list[int], key: int) -> torch.Tensor:
    return src.new_empty(tuple(shape), dtype=torch.int64)


@torch.library.register_fake("solar_io::bincount")
def _bincount_fake(x: torch.Tensor, weights: torch.Tensor | None, length: int) -> torch.Tensor:
    return x.new_empty((length,), dtype=weights.dtype if weights is not None else torch.int64)
