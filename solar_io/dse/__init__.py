"""Design-space exploration: parameter sweeps, hardware what-ifs, contraction reordering, graph diffs."""

from .diff import GraphDiff, diff_graphs
from .reorder import ChainReport, OrderCost, ReorderError, analyse, analyse_chain
from .reorder_apply import Check, apply, check, rewrite
from .reorder_chains import Chain, Operand, find_chains

__all__ = ["Chain", "ChainReport", "Check", "GraphDiff", "Operand", "OrderCost", "ReorderError", "analyse",
           "analyse_chain", "apply", "check", "diff_graphs", "find_chains", "rewrite"]
