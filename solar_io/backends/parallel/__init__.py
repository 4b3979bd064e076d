"""Many chips: shard a graph by documented rules, add the collectives, price them per link.

``parallel_bound(graph, "h100-sxm", parse_layout("tp=8"))`` (or ``system="dgx-h100x4"``) returns a
:class:`ParallelReport`: per pipeline stage, one chip's compute, memory and communication seconds,
and the step's SOL with communication overlapped (max) and serial (sum). The single-chip work is
priced by ``solar_io.bound`` on the graph each chip runs.

The rules (what is found in the graph itself, :mod:`.rules`; never from names):

====== ====================================================== ===========================================
layout what is split                                           collectives it adds (per microbatch)
====== ====================================================== ===========================================
tp=n   Megatron: a linear's output rank is split n ways when   all-reduce of every output that sums over a
       the ranks it forces (through reshapes, heads, the       split rank (the row-parallel linears: one per
       attention) reach a later linear's contracted rank:      MLP, one per attention block)
       column-parallel then row-parallel; attention by heads
       (GQA: KV heads split as far as they go). A linear
       no later one contracts (the LM head) is split alone,
       its output left split. Others, embeddings: replicated.
sp     the nodes outside TP regions whose tensors all have     the all-reduces into them become
       the token rank (norms, residual adds) split it tp ways  reduce-scatters; an all-gather feeds each TP
       (Megatron-LM sequence parallelism)                      region from them (same bytes as the all-reduce)
ep=n   the expert rank of batched expert weights (a weight     all-to-all of the tokens entering the expert
       rank the activation and output share) split n ways;     part (dispatch; an all-gather when every
       experts as separate modules (same-shaped column -> row  expert reads every token) and of those
       pairs reading the same tokens, :mod:`.experts`): every  leaving it (combine)
       n-th on a chip; each chip runs its experts on n DP
       ranks' tokens; the busiest chip is bounded
pp=n   layers (cuts in node order one activation alone     send/recv of the activations crossing each
       crosses) into n stages balanced by time; a training     cut (and of the gradients going back); the
       step keeps each layer's backward and update on its      step is sum_s t_s + (m-1) max_s t_s:
       stage; --microbatches m splits the batch rank (a        bubble (n-1)/m; a training step with m > 1
       training step accumulates the gradients; its            (sol.py) takes max_s(sum_{s'<s} t + m t_s
       optimizer runs once per step)                           + A_s, m t_s + A_s + O_s): (m+n-1) t
dp=n   replicates the graph (one replica's batch)              all-reduce of the weight gradients of a
                                                               training graph once per step, overlapping
                                                               the backward pass; none for inference
====== ====================================================== ===========================================

Prices: :mod:`.collectives` (ring formulas, hierarchical over nodes). Links: the chip spec's
``interconnect`` or a system spec (:mod:`.system`, ``hardware/systems/``). Every assumption that
changes a number is in ``ParallelReport.assumptions``.
"""

from .collectives import Collective, Priced, price, ring_seconds
from .layout import Layout, ParallelError, make_layout, parse_layout
from .plan import Plan, plan
from .sol import ChipTime, ParallelReport, StageResult, parallel_bound
from .system import System, chip_system, load_system, system_names
from .table import render

__all__ = ["ChipTime", "Collective", "Layout", "ParallelError", "ParallelReport", "Plan", "Priced", "StageResult",
           "System", "chip_system", "load_system", "make_layout", "parallel_bound", "parse_layout", "plan", "price",
           "render", "ring_seconds", "system_names"]
