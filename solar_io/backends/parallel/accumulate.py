"""Gradient accumulation of a pipelined training step with ``m > 1`` microbatches (for :mod:`.sol`).

Each stage runs its forward and backward once per microbatch (``t_s``, with its communication), its
optimizer ``O_s`` once per step, and re-reads the gradient sums so far once per microbatch after the
first (``A_s``, :func:`gradient_accumulation`). The step is at least what any stage needs
(:func:`accumulating_makespan`); with ``p`` equal stages it is ``(m + p - 1) t``, the 1F1B and GPipe
makespan, a bubble of ``(p - 1) / (m + p - 1)`` of the step.

>>> from solar_io.backends.parallel.sol import ChipTime, StageResult
>>> st = [StageResult(i, 1, ("replicated",), {"unfused": ChipTime(1.0, 1.0, 1.0)}, (), 0.0) for i in range(2)]
>>> accumulating_makespan(st, [1.0, 1.0], "unfused", 4)  # (m + p - 1) t
5.0
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from solar_io.backends.traffic.residency import on_chip_capacity
from solar_io.graph import Graph
from solar_io.hardware import HardwareSpec
from solar_io.metrics import tensor_bytes

from .plan import Plan
from .shard import producers

if TYPE_CHECKING:
    from .sol import StageResult


def gradient_accumulation(p: Plan, s: int, graphs: list[Graph], chip: HardwareSpec, m: int,
                          opts: dict) -> dict[str, float]:
    """Seconds per step that stage ``s`` spends accumulating its weight gradients over ``m`` microbatches,
    per fidelity: the weight-gradient kernel of every microbatch after the first adds into the sum so far,
    so it reads it once more, (m - 1) x the gradients' bytes, less what on-chip memory could hold (all of
    the gradients kept on chip the whole step: then nothing); cache-aware the same (the same capacity);
    fused (unlimited on-chip memory): 0."""
    made_by = producers(p.graph)
    here = set(p.stages[s])
    mine = {t for t in p.gradients if made_by.get(t) in here}
    nbytes = math.fsum(tensor_bytes(sg, t) for sg in graphs for t in sg.tensors if t.name in mine
                       and made_by.get(t.name) in {n.name for n in sg.nodes})
    cap = on_chip_capacity(chip, opts.get("capacity"))[0] if opts.get("residency", True) else 0.0
    bw = float(chip.dram_bandwidth or 0.0)
    spill = max(0.0, nbytes - cap) if math.isfinite(cap) else 0.0
    spilled = (m - 1) * spill / bw if bw else 0.0
    return {"unfused": spilled, "fused": 0.0, "cache-aware": spilled}


def accumulating_makespan(stages: list[StageResult], t: list[float], f: str, m: int) -> float:
    """The step of a training pipeline with ``m`` microbatches and gradient accumulation (``t``: each stage's
    seconds per microbatch, forward and backward with its communication): every stage runs its ``m``
    microbatches and its accumulation, and cannot start before the first microbatch's forward has passed the
    earlier stages, nor end before the last gradient has passed them back; its optimizer runs after its own
    last backward. So ``max_s max(sum_{s' < s} t_s' + m t_s + A_s, m t_s + A_s + O_s)``; with equal stages
    ``(m + p - 1) t`` (the 1F1B and GPipe schedules): a bubble of (p - 1) / (m + p - 1) of the step."""
    best = 0.0
    for i, st in enumerate(stages):
        busy = m * t[i] + st.accumulation.get(f, 0.0)
        opt = st.step_work[f].time if st.step_work else 0.0
        best = max(best, math.fsum(t[:i]) + busy, busy + opt)
    return best


__all__ = ["accumulating_makespan", "gradient_accumulation"]
