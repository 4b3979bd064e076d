"""The traffic model: bytes, views, residency and kernels of one graph, built once per graph.

:mod:`.graph` (:class:`GraphTraffic`, :func:`traffic_of`: the chip-independent facts every fidelity
reads), :mod:`.residency` (each node's reads and writes by alias root; the DRAM bytes when on-chip
memory keeps data between kernels), :mod:`.kernels` (the nodes one source op was lowered to, run
as one kernel). View chains and boundary bytes are the core's :mod:`solar_io.views`.
"""

from .graph import GraphTraffic, build_traffic, traffic_of
from .kernels import kernel_groups, kernel_traffic, kernels
from .residency import NodeTraffic, dram_bytes, node_traffic, on_chip_capacity

__all__ = ["GraphTraffic", "NodeTraffic", "build_traffic", "dram_bytes", "kernel_groups", "kernel_traffic",
           "kernels", "node_traffic", "on_chip_capacity", "traffic_of"]
