"""Fixtures the translation-loop tests share (imported by name into test_agent.py and
test_agent_fallback.py, where pytest finds them): no jail needed where none exists, and no cache,
key or replay setting leaking in from the environment."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _unjailed_where_no_jail(monkeypatch):
    """Where the jail is absent (tests/frontends/agent/test_agent_jail.py then skips, saying why), these tests of
    the translation loop run the programs unjailed, as --unsafe-exec would."""
    from solar_io.frontends.agent import fallback, jail, sandbox, translate

    if not jail.status().ok:
        for mod in (sandbox, translate, fallback):
            monkeypatch.setattr(mod, "require_jail", lambda unsafe=False: jail.status())


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("SOLAR_IO_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("SOLAR_IO_AGENT_REPLAY", raising=False)
