"""What an attention mask keeps, counted the same way by every frontend.

A flash kernel given a mask (causal, a sliding window, padding, block-sparse) skips the key blocks
the mask hides, so a lower bound charges the attention work only at the positions the mask keeps.
A frontend decides, per query row and key, whether a position is kept; this module turns that into
a :class:`MaskFact`:

- **Known values** (the program fixes them: ``arange`` comparisons, ``tril``, numpy constants):
  :func:`fact_of_keep` counts the kept positions, and the keys no query keeps (their K/V rows are
  still read: a kernel does not know in advance).
- **Unknown values** (a mask computed from an input or a weight): any mask whose softmax is
  defined keeps at least one key per query row, and a kernel that reads the mask may skip every
  other position, so the provable share is one key per row (:func:`one_key_per_row`). Where a
  frontend knows part of the mask (a causal triangle combined with a user's mask, padding rows
  fixed by the program), ``fact_of_keep(must, can)`` counts, per row, the positions kept whatever
  the unknown values are, and at least one where any key of the row can be kept.

>>> import numpy as np
>>> causal = np.tril(np.ones((4, 4), bool))
>>> f = fact_of_keep(causal)
>>> f.kept, f.total, f.known, round(f.fraction, 3)
(10, 16, True, 0.625)
>>> f = fact_of_keep(np.zeros((4, 4), bool), causal, why="mask m is an input")  # causal AND a user's mask
>>> f.kept, f.known
(4, False)
>>> one_key_per_row(64, 8, "graph input m").kept
8
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class MaskFact:
    """``kept`` of ``total`` mask entries, whether from the mask's values (``known``) or the least any
    mask keeps; ``unattended`` key positions no query keeps (their K/V are still charged); ``why``
    names the input a mask of unknown values is computed from."""

    kept: int
    total: int
    known: bool
    unattended: int = 0
    why: str = ""

    @property
    def fraction(self) -> float:
        return self.kept / self.total


def fact_of_keep(must: np.ndarray, can: np.ndarray | None = None, repeat: int = 1, why: str = "") -> MaskFact:
    """The :class:`MaskFact` of ``must`` (boolean, ``[..., keys]``: a query row per leading index),
    the positions kept whatever the mask's unknown values are; ``can`` (same shape) the positions
    some values keep (None: the values are known, ``can`` is ``must``). A row that can keep a key
    keeps at least one. ``repeat``: copies of the mask counted once (a batch broadcast of one mask).

    >>> m = np.array([[True, False, False], [False, False, False]])
    >>> fact_of_keep(m).kept, fact_of_keep(m).unattended  # a known row that keeps nothing keeps nothing
    (1, 2)
    >>> fact_of_keep(m, np.ones_like(m)).kept  # unknown values: the empty row keeps one key
    2
    """
    must = np.asarray(must, bool)
    keys = int(must.shape[-1]) if must.ndim else 1
    must = must.reshape(-1, keys)
    known = can is None
    can = must if can is None else np.asarray(can, bool).reshape(-1, keys) | must
    per_row = must.sum(axis=1)
    kept = int(np.where(per_row > 0, per_row, can.any(axis=1)).sum())
    unattended = int((~can.any(axis=0)).sum())
    return MaskFact(kept * repeat, int(must.size) * repeat, known, unattended, why)


def one_key_per_row(total: int, keys: int, why: str) -> MaskFact:
    """The least any mask of ``total`` entries over ``keys`` keys per row keeps: one key per row."""
    return MaskFact(total // keys, total, False, why=why)


__all__ = ["MaskFact", "fact_of_keep", "one_key_per_row"]
