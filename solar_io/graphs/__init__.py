"""Graph algorithms and pictures of einsum graphs.

``dag`` (the node/tensor DAG as a networkx view: order, cycles, components, critical path,
dominators, convexity), ``blocks`` (repeated blocks, e.g. the layers of a decoder) and
``picture`` (``solar-io graph``: Graphviz DOT/SVG, GraphML, Mermaid).
"""

from .dag import components, critical_path, cycle, dag, dominators, is_convex, topological_order

__all__ = ["components", "critical_path", "cycle", "dag", "dominators", "is_convex", "topological_order"]
