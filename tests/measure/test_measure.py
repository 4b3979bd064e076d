"""``solar-io measure``: timing protocol, cache flush, runners, headroom against the bounds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from inprocess import run_main
from paths import ROOT

from solar_io.measure import RunOptions, headroom, measure_file, time_runs
from solar_io.measure.timing import FLUSH_FACTOR, CacheFlusher, Timing, last_level_cache_bytes

MODELS = ROOT / "tests" / "models_measure"


pytestmark = pytest.mark.xdist_group("probe")  # uses the fast probe: one per run, shared by workers (conftest)


@pytest.fixture
def cpu_spec(fast_probe) -> Path:
    """This machine's spec from the probe (a fast configuration, one for the session: conftest.py)."""
    return fast_probe[1]


def test_time_runs_protocol():
    """Warm-up runs are untimed, the flush runs before every timed run and never inside it."""
    events: list[str] = []
    clock = iter(range(100))

    def timer(run):
        events.append("start")
        run()
        events.append("stop")
        return 0.5 + next(clock)  # 0.5, 1.5, 2.5, ...

    t = time_runs(lambda: events.append("run"), repeats=4, warmup=2, flush=lambda: events.append("flush"),
                  timer=timer, flushed_bytes=123)
    assert events[:2] == ["run", "run"]  # warm-up: no flush, no timer
    assert events[2:] == ["flush", "start", "run", "stop"] * 4
    assert t.samples == (0.5, 1.5, 2.5, 3.5)
    assert (t.median, t.min) == (2.0, 0.5)
    assert t.iqr == pytest.approx(np.percentile(t.samples, 75) - np.percentile(t.samples, 25))
    assert not t.warm and t.flushed_bytes == 123


def test_time_runs_min_seconds_and_warm():
    """More runs until ``min_seconds`` of timed runs; without a flush the timing is marked warm."""
    t = time_runs(lambda: None, repeats=2, warmup=0, min_seconds=1.0, timer=lambda run: 0.25)
    assert len(t.samples) == 4  # 4 x 0.25 s reaches 1 s
    assert t.warm and t.as_dict()["cache"] == "warm"
    with pytest.raises(ValueError):
        time_runs(lambda: None, repeats=0)


def test_timing_statistics_match_numpy():
    rng = np.random.default_rng(1)
    xs = tuple(float(x) for x in rng.uniform(1e-4, 1e-2, 37))
    t = Timing(xs, 0, "perf_counter_ns", "cpu", 2, 0)
    q1, q3 = np.percentile(xs, [25, 75])
    assert (t.median, t.min, t.iqr) == (float(np.median(xs)), min(xs), float(q3 - q1))


def test_last_level_cache_from_sysfs(tmp_path):
    """The largest cache with all its instances: one 54 MiB L3 shared by the 4 CPUs of the fake
    tree (its private L2s are 4 x 1280 KiB); None when nothing can be read."""
    from fake_cpu import fake_root

    assert last_level_cache_bytes(fake_root(tmp_path)) == 54 << 20
    assert last_level_cache_bytes(tmp_path / "nothing") is None


def test_flusher_writes_several_times_the_cache():
    llc = last_level_cache_bytes()
    f = CacheFlusher()
    if llc:
        assert f.nbytes == FLUSH_FACTOR * llc
    before = f._buf[:4].copy()
    f()
    assert np.all(f._buf[:4] == before + 1)  # the buffer is written, not only read
    again = CacheFlusher()  # a second flusher of the same size shares the buffer and still writes it
    again()
    assert again._buf is f._buf and np.all(f._buf[-4:] == before + 2)


def test_measure_torch_file_cold_and_warm():
    m = measure_file(MODELS / "small_matmul.py", repeats=3, warmup=1, min_seconds=0)
    assert m.frontend == "torch" and "eager" in m.runtime
    assert len(m.timing.samples) == 3 and m.timing.min > 0
    assert m.timing.flushed_bytes > 0 and m.timing.threads and m.timing.threads >= 1
    assert not m.fuses and m.judged == ("unfused", "fused", "cache-aware")  # eager: one kernel per op
    w = measure_file(MODELS / "small_matmul.py", repeats=2, warmup=0, min_seconds=0, warm=True)
    assert w.timing.warm


def test_measure_jax_file(tmp_path):
    src = tmp_path / "jax_mm.py"
    src.write_text("import jax.numpy as jnp\n\n\ndef get_inputs():\n    return [jnp.ones((64, 32)), "
                   "jnp.ones((32, 16))]\n\n\ndef model(a, b):\n    return jnp.tanh(a @ b)\n")
    m = measure_file(src, repeats=2, warmup=1, min_seconds=0)
    assert m.frontend == "jax" and "jit" in m.runtime and len(m.timing.samples) == 2
    assert m.fuses and m.judged == ("fused", "cache-aware")  # XLA fuses: unfused does not describe the run
    with pytest.raises(Exception, match="--compile is for PyTorch"):
        measure_file(src, options=RunOptions(compile=True), repeats=1)


def test_headroom_is_measured_over_sol(cpu_spec):
    """headroom() divides the measured time by each computed fidelity's SOL, flags runs below it."""
    from solar_io.backends.bound import bound
    from solar_io.measure import capture_graph

    g = capture_graph(MODELS / "small_matmul.py")
    r = bound(g, str(cpu_spec))
    rows = {h.fidelity: h for h in headroom(r, 1e-3)}
    assert set(rows) == {"unfused", "fused"}
    for f in r.fidelities:
        if f.computed:
            assert rows[f.name].ratio == pytest.approx(1e-3 / f.time)
            assert not rows[f.name].violated
    assert all(h.violated for h in headroom(r, r.fused.time / 2))


def test_measure_cli_bound_json(cli):
    """The JSON of measure --bound, on the shipped H100 spec: any run on this CPU is far slower than its
    SOL, so no probe and no quiet machine are needed (tests/reports holds runs to this machine's probe)."""
    res = cli("measure", str(MODELS / "small_matmul.py"), "--bound", "--hw", "h100-sxm", "--repeats", "3",
              "--min-time", "0", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    t = doc["timing"]
    assert t["runs"] >= 3 and t["cache"].startswith("flushed")
    (b,) = doc["bounds"]
    assert b["violations"] == []
    fids = {f["fidelity"]: f for f in b["fidelities"]}
    assert set(fids) == {"unfused", "fused", "cache-aware"}
    for f in fids.values():
        assert f["headroom"] == pytest.approx(t["median"] / f["sol_s"])
        assert f["headroom"] >= 1 and f["binding"]
    # by hand: one fp32 256^3 matmul fused, at the TF32 peak the precision policy allows (494.7 TFLOP/s)
    # against reading two and writing one 256x256 fp32 at 3.35 TB/s (hardware/h100-sxm.yaml)
    spec = yaml.safe_load((ROOT / "hardware" / "h100-sxm.yaml").read_text())
    want = max(2 * 256**3 / spec["units"]["matrix"]["tf32"]["peak"], 3 * 4 * 256**2 / spec["memory"][0]["bandwidth"])
    assert fids["fused"]["sol_s"] == pytest.approx(want)


def test_measure_cli_text_and_errors(tmp_path):
    res = run_main("measure", str(MODELS / "small_softmax.py"), "--repeats", "2", "--min-time", "0", "--warm")
    assert res.returncode == 0, res.stderr
    assert "warm cache (--warm)" in res.stdout and "median" in res.stdout and "IQR" in res.stdout
    res = run_main("measure", str(MODELS / "small_softmax.py"), "--bound")
    assert res.returncode == 1
    assert res.stderr.strip() == "error: --bound needs --hw (a chip name, a spec path, or 'local')"
    bad = tmp_path / "raises.py"
    bad.write_text("import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                   "        raise RuntimeError('boom')\n\n\ndef get_inputs():\n    return [torch.ones(2)]\n")
    res = run_main("measure", str(bad), "--repeats", "1")
    assert res.returncode == 1
    assert res.stderr.count("\n") == 1 and "raises.py" in res.stderr and "boom" in res.stderr


@pytest.mark.slow
def test_measure_torch_compile():
    """--compile times torch.compile(model); compilation happens in the untimed warm-up."""
    m = measure_file(MODELS / "small_mlp.py", options=RunOptions(compile=True), repeats=3, warmup=1,
                     min_seconds=0)
    assert "compile" in m.runtime and len(m.timing.samples) == 3 and m.fuses
    eager = measure_file(MODELS / "small_mlp.py", repeats=3, warmup=1, min_seconds=0)
    assert "eager" in eager.runtime
