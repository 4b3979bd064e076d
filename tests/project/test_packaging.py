"""The wheel ships schema/ and hardware/, and the package finds them from the wheel."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    r = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    (whl,) = out.glob("solar_io-*.whl")
    return whl


def test_wheel_contains_schema_and_hardware(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for schema in (ROOT / "schema").glob("*.json"):
        assert f"solar_io/_data/schema/{schema.name}" in names
    specs = list((ROOT / "hardware").glob("*.yaml"))
    assert len(specs) >= 11
    for spec in specs:
        assert f"solar_io/_data/hardware/{spec.name}" in names
    assert any(n.endswith("entry_points.txt") for n in names)
    assert "solar_io/frontends/loopir/SPEC.md" in names  # the LLM frontend's prompt
    assert not any(n.startswith(("tests/", "benchmarks/")) for n in names)


def test_unpacked_wheel_finds_its_data(wheel, tmp_path):
    zipfile.ZipFile(wheel).extractall(tmp_path / "site")
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import solar_io, solar_io.resources as r, solar_io.hardware as hw;"
        "assert solar_io.__file__.startswith(sys.argv[1]), solar_io.__file__;"
        "p = r.schema_path(); assert str(p).startswith(sys.argv[1]) and p.is_file(), p;"
        "assert hw.load_spec('thor').name == 'jetson-agx-thor';"
        "assert 'torch' not in sys.modules and 'jax' not in sys.modules;"
        "print('ok')"
    )
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "site")], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
