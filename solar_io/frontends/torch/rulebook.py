"""Every lowering rule of the torch frontend, registered on first use.

Importing :mod:`.rules` fills :data:`.registry.RULES` (each rule module registers its ops with
``@rule``). That import is done here, not in :mod:`.registry`, which the rule modules themselves
import: the table's users (:mod:`.lower`, :mod:`.capture`) load the rules, the table does not.
"""

from __future__ import annotations

from .registry import RULES

_loaded = False


def load_rules() -> None:
    """Register every rule (once; importing torch's rule modules is not free)."""
    global _loaded
    if not _loaded:
        from . import rules  # noqa: F401  (registers every rule)

        _loaded = True


def ruled_ops() -> set[str]:
    """Names of every op (packet or overload) that has a rule."""
    load_rules()
    return set(RULES)


__all__ = ["load_rules", "ruled_ops"]
