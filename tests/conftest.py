"""Shared fixtures: the repository root, a CLI runner that uses real processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``solar-io ARGS`` in a fresh interpreter and capture its output."""
    return subprocess.run([sys.executable, "-m", "solar_io", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def matmul_text() -> str:
    return (ROOT / "examples" / "graphs" / "matmul.yaml").read_text()
