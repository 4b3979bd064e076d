"""solar-io: speed-of-light analysis of deep-learning workloads from einsum-graph files.

The core (this package, without its ``frontends``) imports neither torch nor jax, and no backend:
``solar_io.bound`` and ``solar_io.Report`` are the backends' (``solar_io.backends.bound``), imported on first use.
"""

from .affine import Access, AffineExpr, Indirect, parse_access, parse_expr
from .errors import ExecutionError, GraphError, Issue, SolarIOError
from .format.files import check_text, dump, dumps, load, loads
from .format.validate import validate
from .graph import FORMAT_NAME, FORMAT_VERSION, Graph, Node, Producer, Tensor, Validation
from .metrics import GraphMetrics, NodeMetrics, graph_metrics, node_metrics

#: public names that live in a backend, imported when first used (the core never imports a backend), and the
#: reference executor, imported when first used too (``solar-io bound`` never runs it).
_FROM_BACKENDS = {"bound": "solar_io.backends.bound", "Report": "solar_io.backends.result",
                  "execute": "solar_io.executor"}


def __getattr__(name: str):  # noqa: ANN202 - PEP 562 module attribute
    if name in _FROM_BACKENDS:
        import importlib

        return getattr(importlib.import_module(_FROM_BACKENDS[name]), name)
    if name == "__version__":  # read from the install's metadata on first use (importlib.metadata is slow to import)
        global __version__
        __version__ = _installed_version()
        return __version__
    raise AttributeError(f"module 'solar_io' has no attribute {name!r}")


def _installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("solar-io")
    except PackageNotFoundError:  # running from a source tree without an install
        return "0.0.0+source"

__all__ = [
    "Access", "AffineExpr", "ExecutionError", "FORMAT_NAME", "FORMAT_VERSION", "Graph", "GraphError", "GraphMetrics",
    "Indirect", "Issue", "Node", "NodeMetrics", "Producer", "Report", "SolarIOError", "Tensor", "Validation",
    "__version__", "bound", "check_text", "dump", "dumps", "execute", "graph_metrics", "load", "loads", "node_metrics",
    "parse_access", "parse_expr", "validate",
]
