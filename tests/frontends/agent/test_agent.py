"""Agent frontend (LLM translation into the Affine Loop IR), offline: recorded replies are fed
through the same code path as the live client; the sandbox, cache and key handling are tested
without any network."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from agent_fixtures import _isolated, _unjailed_where_no_jail  # noqa: F401  (autouse fixtures)
from paths import TESTS

from solar_io.format.files import dumps, load, loads
from solar_io.frontends.agent import METHOD, AnthropicClient, ReplayClient, capture_file
from solar_io.frontends.agent.compare import compare
from solar_io.frontends.agent.sandbox import run_program
from solar_io.frontends.agent.translate import extract_code
from solar_io.frontends.common.errors import CaptureError
from solar_io.frontends.loopir import SPEC_PATH

HERE = TESTS / "agent_replays"
KEY = "sk-ant-test-SECRET-0123456789"




def _replies(name: str) -> list[dict]:
    return json.loads((HERE / name).read_text())["replies"]


def _code(name: str, i: int) -> str:
    return extract_code(_replies(name)[i]["text"])


def test_import_does_not_need_anthropic():
    import subprocess

    r = subprocess.run([sys.executable, "-c", "import solar_io, solar_io.frontends.agent, sys; "
                        "print('anthropic' in sys.modules)"], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "False"


def test_numpy_first_try():
    c = ReplayClient(HERE / "layernorm_np_first_try.json")
    logs: list[str] = []
    g = capture_file(HERE / "layernorm_np.py", client=c, log=logs.append)
    assert g.validation.status == "passed" and g.validation.method == METHOD
    assert (g.validation.model, g.validation.attempts) == ("claude-sonnet-4-5", 1)  # format 1.1 fields
    assert "attempt" not in g.validation.reason and "network namespace" in g.validation.reason
    back = loads(dumps(g))
    assert (back.validation.model, back.validation.attempts) == ("claude-sonnet-4-5", 1)
    assert "  model: claude-sonnet-4-5\n  attempts: 1\n" in dumps(g)
    assert g.producer.frontend == "agent" and g.producer.source == "layernorm_np.py"
    assert {t.name for t in g.tensors} >= {"x", "g", "beta", "y"}
    assert any("9100 input + 400 output tokens" in m for m in logs)
    req = c.requests[0]
    assert req["system"][0] == SPEC_PATH.read_text()  # the spec verbatim
    assert "NumPy" in req["system"][1]
    assert "def forward" in req["messages"][0]["content"] and "shape [8, 32]" in req["messages"][0]["content"]


def test_numpy_repair_after_numeric_mismatch():
    c = ReplayClient(HERE / "layernorm_np_mismatch_then_fix.json")
    g = capture_file(HERE / "layernorm_np.py", client=c, no_cache=True)
    assert g.validation.attempts == 2
    diag = c.requests[1]["messages"][-1]["content"]
    assert "output y (shape [8, 32]) diverges" in diag and "worst at index" in diag and "expected" in diag
    assert c.requests[1]["messages"][1]["role"] == "assistant"


def test_torch_repair_after_exception():
    pytest.importorskip("torch")
    c = ReplayClient(HERE / "mlp_torch_exception_then_fix.json")
    g = capture_file(HERE / "mlp_torch.py", client=c, no_cache=True)
    assert g.validation.status == "passed" and "torch" in g.validation.reference
    diag = c.requests[1]["messages"][-1]["content"]
    assert "NameError" in diag and "Traceback" in diag
    assert "PyTorch" in c.requests[0]["system"][1]
    assert {"fc_weight", "fc_bias"} <= {t.name for t in g.tensors}
    macs = [n for n in g.nodes if n.map == "mul" and n.reduce == "add"]
    assert len(macs) == 1


def _cuda_golden(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((8, 12)).astype(np.float32), rng.standard_normal((12, 6)).astype(np.float32)
    p = tmp_path / "ref.npz"
    np.savez(p, **{"input:A": a, "input:B": b, "output:C": a @ b})
    return p


def test_cuda_with_golden_and_reply_without_code(tmp_path):
    c = ReplayClient(HERE / "matmul_cu_no_code_then_fix.json")
    g = capture_file(HERE / "matmul.cu", golden=_cuda_golden(tmp_path), client=c)
    assert "no ```python code block" in c.requests[1]["messages"][-1]["content"]
    assert "golden data" in g.validation.reference
    assert "CUDA" in c.requests[0]["system"][1]
    (n,) = g.nodes
    assert n.map == "mul" and n.reduce == "add"


def test_gives_up_after_max_attempts():
    bad = _code("layernorm_np_mismatch_then_fix.json", 0)
    c = ReplayClient([f"```python\n{bad}```"] * 3)
    with pytest.raises(CaptureError, match="after 3 attempt"):
        capture_file(HERE / "layernorm_np.py", client=c, max_attempts=3)
    assert len(c.requests) == 3


def test_cache_hit_needs_no_client_and_no_cache_bypasses(tmp_path):
    capture_file(HERE / "layernorm_np.py", client=ReplayClient(HERE / "layernorm_np_mismatch_then_fix.json"))
    assert list((tmp_path / "cache" / "agent").iterdir())
    logs: list[str] = []
    g = capture_file(HERE / "layernorm_np.py", client=ReplayClient([]), log=logs.append)  # no reply needed
    assert g.validation.attempts == 2 and any("cached" in m for m in logs)
    with pytest.raises(CaptureError, match="no recorded reply"):
        capture_file(HERE / "layernorm_np.py", client=ReplayClient([]), no_cache=True)
    # another model is another cache entry
    with pytest.raises(CaptureError, match="no recorded reply"):
        capture_file(HERE / "layernorm_np.py", client=ReplayClient([]), model="other-model")


def test_missing_key_is_one_clear_error():
    with pytest.raises(CaptureError, match="ANTHROPIC_API_KEY is not set"):
        capture_file(HERE / "layernorm_np.py", no_cache=True)


def run(capsys, *args: str) -> tuple[int, str, str]:
    from solar_io.cli.main import main

    try:
        main(["capture", *args])
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_key_never_in_output(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("SOLAR_IO_AGENT_REPLAY", str(HERE / "layernorm_np_mismatch_then_fix.json"))
    out = tmp_path / "g.yaml"
    code, so, se = run(capsys, str(HERE / "layernorm_np.py"), "--frontend", "agent", "-o", str(out),
                       "--max-attempts", "2")
    assert code == 0, se
    assert load(out).validation.method == METHOD and load(out).validation.attempts == 2
    assert "2 attempt(s)" in se and "tokens" in se
    texts = [so, se, out.read_text()]
    texts += [p.read_text() for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert all(KEY not in t for t in texts)
    assert "AnthropicClient()" == repr(AnthropicClient(api_key=KEY))


def test_cli_missing_key_exit_1(capsys):
    code, so, se = run(capsys, str(HERE / "layernorm_np.py"), "--frontend", "agent", "--no-cache")
    assert code == 1 and "ANTHROPIC_API_KEY is not set" in se
    assert "Traceback" not in se and len(se.strip().splitlines()) == 1


def test_cli_cuda_golden(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SOLAR_IO_AGENT_REPLAY", str(HERE / "matmul_cu_no_code_then_fix.json"))
    out = tmp_path / "mm.yaml"
    code, _, se = run(capsys, str(HERE / "matmul.cu"), "--frontend", "agent", "--golden", str(_cuda_golden(tmp_path)),
                      "-o", str(out), "--no-cache")
    assert code == 0, se
    assert load(out).producer.source == "matmul.cu"


def test_output_is_byte_stable():
    a = dumps(capture_file(HERE / "layernorm_np.py", client=ReplayClient(HERE / "layernorm_np_first_try.json"),
                           no_cache=True))
    b = dumps(capture_file(HERE / "layernorm_np.py", client=ReplayClient(HERE / "layernorm_np_first_try.json"),
                           no_cache=True))
    assert a == b and "/tmp" not in a


# ---- sandbox -------------------------------------------------------------------------------

def test_sandbox_kills_infinite_loop():
    r = run_program("while True:\n    pass\n", {}, timeout=2)
    assert not r.ok and "time limit" in r.error


def test_sandbox_memory_limit_fails_cleanly():
    code = "import numpy as np\nbig = np.ones(1 << 31)\n"  # 16 GiB
    r = run_program(code, {}, timeout=20, memory=1 << 30)
    assert not r.ok and ("MemoryError" in r.error or "memory" in r.error)


@pytest.mark.parametrize("code, what", [
    ("import socket\nsocket.create_connection(('127.0.0.1', 80))\n", "socket"),
    ("open('/etc/passwd').read()\n", "/etc/passwd"),
    ("import subprocess\nsubprocess.run(['true'])\n", "subprocess"),
])
def test_sandbox_blocks_network_files_processes(code, what):
    r = run_program(code, {}, timeout=20)
    assert not r.ok and "sandbox" in r.error and what in r.error


def test_sandbox_isolation_is_recorded():
    """The jail reports what isolated the program: its jail, uid nobody, seccomp, the limits
    and the interfaces of its network namespace (loopback only)."""
    from solar_io.frontends.agent import jail

    if not jail.status().ok:
        pytest.skip(f"the jail is unavailable here: {jail.status().reason}")
    r = run_program("x = 1\n", {}, timeout=20)
    assert not r.ok and "no model" in r.error  # not an IR program; the isolation is reported anyway
    iso = r.isolation
    assert iso["jail"].startswith("bubblewrap") and iso["uid"] == jail.NOBODY and iso["seccomp"] == "jail"
    assert int(iso["capabilities"], 16) == 0
    assert iso["network_namespace"] and iso["interfaces"] == ["lo"]
    assert iso["limits"]["processes"] > 0 and iso["limits"]["file_size"] > 0


def test_sandbox_reply_that_reads_files_is_repaired():
    good = _code("layernorm_np_first_try.json", 0)
    evil = "import os\nprint(os.environ.get('ANTHROPIC_API_KEY'))\nopen('/etc/hostname').read()\n" + good
    c = ReplayClient([f"```python\n{evil}```", f"```python\n{good}```"])
    g = capture_file(HERE / "layernorm_np.py", client=c, no_cache=True)
    assert g.validation.status == "passed"
    assert "not allowed" in c.requests[1]["messages"][-1]["content"]


# ---- comparison ----------------------------------------------------------------------------

def test_compare_dtype_aware():
    g = np.linspace(-1, 1, 10)
    assert compare({"y": g}, {"y": g + 1e-5}).ok is False  # fp64 both: tight
    assert compare({"y": g.astype(np.float32)}, {"y": (g + 1e-5).astype(np.float32)}).ok
    assert compare({"y": g.astype(np.float16)}, {"y": (g * 1.005).astype(np.float32)}).ok
    assert not compare({"i": np.arange(3)}, {"i": np.arange(3) + np.array([0, 0, 1])}).ok
    c = compare({"y": np.zeros((2, 3))}, {"y": np.zeros((3, 2))})
    assert not c.ok and "shape [3, 2], expected [2, 3]" in c.problems[0]
    assert compare({"y": g}, {"out": g}).ok  # a single output matches whatever its name


def test_extract_code():
    assert extract_code("a\n```python\nx = 1\n```\nb\n```python\ny = 2\n```") == "y = 2\n"
    assert extract_code("no code") is None


def test_reply_that_loops_forever_is_killed_and_repaired():
    good = _code("layernorm_np_first_try.json", 0)
    c = ReplayClient(["```python\nwhile True:\n    pass\n```", f"```python\n{good}```"])
    g = capture_file(HERE / "layernorm_np.py", client=c, no_cache=True, timeout=3)
    assert g.validation.status == "passed" and g.validation.attempts == 2
    assert "time limit" in c.requests[1]["messages"][-1]["content"]


def test_golden_file_without_outputs_is_an_error(tmp_path):
    p = tmp_path / "bad.npz"
    np.savez(p, x=np.zeros(3))
    with pytest.raises(CaptureError, match="output:NAME"):
        capture_file(HERE / "matmul.cu", golden=p, client=ReplayClient([]))
    with pytest.raises(CaptureError, match="--golden"):
        capture_file(HERE / "matmul.cu", client=ReplayClient([]))


def test_jax_source_with_a_callback_the_jax_frontend_leaves_opaque():
    """A JAX function calling a NumPy routine through jax.pure_callback: the JAX frontend
    captures it with an opaque node; the agent translates the whole function (golden outputs
    from jax.jit on the source's own inputs), repairing a misnamed input."""
    pytest.importorskip("jax")
    from solar_io import graph_metrics
    from solar_io.frontends.jax import capture_file as jax_capture

    c = ReplayClient(HERE / "callback_jax_wrong_name_then_fix.json")
    g = capture_file(HERE / "callback_jax.py", client=c, no_cache=True)
    v = g.validation
    assert v.status == "passed" and v.attempts == 2 and v.reference.startswith("jax ")
    assert "JAX" in c.requests[0]["system"][1] and "pure_callback" in c.requests[0]["messages"][0]["content"]
    assert "'W'" in c.requests[1]["messages"][-1]["content"] and "not among the source's inputs" in \
        c.requests[1]["messages"][-1]["content"]
    m = graph_metrics(g)
    # by hand, x[4, 16] @ w[16, 8]: 512 MACs; row RMS: square 32, sums 4*7, mean 4, +eps 4, div 32;
    # ReLU 32 (max with 0); one sqrt per row
    assert (m.macs, m.flops_vector, m.transcendental, m.opaque) == (4 * 8 * 16, 32 + 28 + 4 + 4 + 32 + 32, 4, ())
    jg = jax_capture(HERE / "callback_jax.py", validate=False)
    assert [n.op for n in jg.nodes if n.kind == "opaque"] == ["jax.pure_callback"]
    assert graph_metrics(jg).macs == m.macs  # the contraction the JAX frontend does see agrees
