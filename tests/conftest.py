"""Shared fixtures: the repository root, a CLI runner that uses real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

# CI must not fail on a draw no earlier run made: property tests replay the same examples every run
# (derandomize). HYPOTHESIS_PROFILE=explore draws fresh random examples, ten times as many, to hunt
# for new counterexamples locally; add any it finds as an explicit @example.
settings.register_profile("ci", derandomize=True, database=None)  # no shared state between xdist workers
settings.register_profile("explore", derandomize=False, max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``solar-io ARGS`` in a fresh interpreter and capture its output. The timeout is a hang
    guard only: the longest command (the zero-violation check-bounds) takes 90 s on a quiet machine
    and went past 300 s at a load of 15."""
    return subprocess.run([sys.executable, "-m", "solar_io", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=1200)


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def matmul_text() -> str:
    return (ROOT / "examples" / "graphs" / "matmul.yaml").read_text()


@pytest.fixture(scope="session")
def fast_probe(tmp_path_factory):
    """(spec, path) of this machine from one fast probe (``ProbeConfig.fast()``, ~14 s CPU), made once per
    pytest run: the first xdist worker that needs it probes under a lock in the run's shared temporary
    folder, the others read its file; ``tests/hardware/test_hardware_probe.py`` checks the file."""
    import fcntl

    from solar_io.hardware import load_spec
    from solar_io.hardware.probe import ProbeConfig, probe_to_file

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # xdist: pytest-N/popen-gwK
    path = shared / "fast-probe" / "cpu.yaml"
    path.parent.mkdir(exist_ok=True)
    with open(shared / "fast-probe.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            probe_to_file(path, ProbeConfig.fast())
    return load_spec(path), path

