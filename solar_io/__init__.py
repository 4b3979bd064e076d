"""solar-io: speed-of-light analysis of deep-learning workloads from einsum-graph files.

The core (this package, without its ``frontends``) imports neither torch nor jax.
"""

from importlib.metadata import PackageNotFoundError, version

from .affine import Access, AffineExpr, Indirect, parse_access, parse_expr
from .backends.roofline import Report, bound
from .errors import GraphError, Issue, SolarIOError
from .executor import ExecutionError, execute
from .files import check_text, dump, dumps, load, loads
from .graph import FORMAT_NAME, FORMAT_VERSION, Graph, Node, Producer, Tensor, Validation
from .metrics import GraphMetrics, NodeMetrics, graph_metrics, node_metrics
from .validate import validate

try:
    __version__ = version("solar-io")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+source"

__all__ = [
    "Access", "AffineExpr", "ExecutionError", "FORMAT_NAME", "FORMAT_VERSION", "Graph", "GraphError", "GraphMetrics",
    "Indirect", "Issue", "Node", "NodeMetrics", "Producer", "Report", "SolarIOError", "Tensor", "Validation",
    "__version__", "bound", "check_text", "dump", "dumps", "execute", "graph_metrics", "load", "loads", "node_metrics",
    "parse_access", "parse_expr", "validate",
]
