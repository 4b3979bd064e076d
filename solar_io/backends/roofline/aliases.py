"""View chains and boundary bytes for the backends: :mod:`solar_io.views`, re-exported.

The derivation lives in the core so that ``solar-io info`` and every backend read one number
(``GraphMetrics.boundary_bytes``).
"""

from solar_io.views import ViewChains, boundary_bytes, exposed_bytes, view_roots

__all__ = ["ViewChains", "boundary_bytes", "exposed_bytes", "view_roots"]
