"""The wheel installs beside the user's own torch: built here, installed into a fresh venv with --no-deps
and constraints.txt (its dependencies come from this environment's site-packages, so nothing is
downloaded), then ``solar-io capture`` and ``bound`` run from that install, not from this source tree."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from paths import ROOT

pytestmark = pytest.mark.slow


def sh(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(args)}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    return r


def test_wheel_in_a_fresh_venv(tmp_path: Path) -> None:
    pytest.importorskip("build", reason="the dev extra's 'build' builds the wheel")
    dist = tmp_path / "dist"
    sh([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(ROOT)], tmp_path)
    (wheel,) = dist.glob("solar_io-*.whl")
    venv = tmp_path / "venv"
    sh([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path)
    py = venv / "bin" / "python"
    site = Path(sh([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path)
                .stdout.strip())
    (site / "_solar_io_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # torch, numpy, ...
    sh([sys.executable, "-m", "pip", "--python", str(py), "install", "--quiet", "--no-deps", "--no-index",
        "-c", str(ROOT / "constraints.txt"), str(wheel)], tmp_path)
    where = sh([str(py), "-c", "import solar_io; print(solar_io.__file__)"], tmp_path).stdout.strip()
    assert where.startswith(str(site)), where  # the installed wheel, not the source tree
    cli = venv / "bin" / "solar-io"
    g = tmp_path / "llama.yaml"
    cap = sh([str(cli), "capture", str(ROOT / "examples/models/llama_decoder.py"), "-o", str(g)], tmp_path)
    assert "validation passed" in cap.stderr
    out = sh([str(cli), "bound", str(g), "--hw", "h100-sxm", "--format", "json", "--no-cache-aware"], tmp_path)
    import json

    doc = json.loads(out.stdout)
    assert doc["reports"][0]["hardware"]["name"] == "h100-sxm"  # the specs ship inside the wheel
    assert doc["reports"][0]["fidelities"]["fused"]["time_s"] > 0
