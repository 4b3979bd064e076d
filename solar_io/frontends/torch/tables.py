"""The values of specialised indexes (``nonzero`` rows, ``repeat_interleave`` indices), by key.

:mod:`.specialise` fills it during the values pass; the lowering rule of
``solar_io::specialised_index`` (:mod:`.rules.select`) reads it. A module of its own so that the rule
does not import the capture machinery that imports the rules.
"""

from __future__ import annotations

import numpy as np

#: key -> the int64 values of a specialised index (``nonzero`` rows, ``repeat_interleave`` indices).
TABLES: dict[int, np.ndarray] = {}

__all__ = ["TABLES"]
