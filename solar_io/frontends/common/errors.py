"""Errors a user can cause while capturing a source program (one line each, exit 1)."""

from __future__ import annotations

from ...errors import SolarIOError


class CaptureError(SolarIOError):
    """A source program that cannot be captured: it raises, lacks an entry point, ..."""


class InputSpecError(CaptureError):
    """A malformed ``--input`` shape spec or ``--entry``."""


class NoRuleError(CaptureError):
    """An op with no lowering rule under ``--strict``."""


class ValidationFailed(CaptureError):
    """The captured graph disagrees with the source program (and ``--allow-invalid`` was not given)."""
