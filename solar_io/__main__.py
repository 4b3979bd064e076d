"""``python -m solar_io`` runs the ``solar-io`` command line."""

from .cli import main

main()
