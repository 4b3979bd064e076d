"""The agent frontend on KernelBench-convention files (``Model(*get_init_inputs())`` called on
``get_inputs()``), read through the PyTorch frontend's loader: twelve problems across levels
(elementwise, a scalar argument, reductions, matmul, convolution, attention, norms, fused blocks, a file written
for a GPU, an MLP, an RNN cell), each with replies in tests/agent_replays/kernelbench/ fed
through the whole loop (golden run, jailed run, comparison, repair, lift). The lifted graph's
MACs and transcendental counts must equal the PyTorch frontend's on the same file. The
replies are written by hand in the form of model replies (each file's ``note`` says so); the
attention problem's first reply forgets the 1/sqrt(E) scale, which the comparison catches.
No network: ReplayClient only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")


from paths import TESTS

from solar_io import graph_metrics  # noqa: E402
from solar_io.format.files import load  # noqa: E402
from solar_io.frontends.agent import METHOD, ReplayClient, capture_file  # noqa: E402
from solar_io.frontends.torch import capture_file as torch_capture  # noqa: E402

KB = TESTS / "agent_replays" / "kernelbench"
REPLAYS = sorted(KB.glob("*.json"))
SOFTMAX, SOFTMAX_REPLY = KB / "l1_23_softmax.py", KB / "l1_23_softmax_first_try.json"


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("SOLAR_IO_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("SOLAR_IO_AGENT_REPLAY", raising=False)
    from solar_io.frontends.agent import jail, sandbox, translate

    if not jail.status().ok:  # the jail's own tests skip, saying why; the loop runs unjailed here
        for mod in (sandbox, translate):
            monkeypatch.setattr(mod, "require_jail", lambda unsafe=False: jail.status())


def _source(replay: Path) -> Path:
    return KB / (replay.stem.rsplit("_first_try", 1)[0].rsplit("_unscaled_then_fix", 1)[0] + ".py")


def test_there_are_enough_problems():
    assert len(REPLAYS) >= 10 and all(_source(r).is_file() for r in REPLAYS)
    assert all("by hand" in json.loads(r.read_text())["note"] for r in REPLAYS)


@pytest.mark.parametrize("replay", REPLAYS, ids=lambda p: p.stem)
def test_lifted_macs_equal_the_torch_frontends(replay):
    src = _source(replay)
    c = ReplayClient(replay)
    g = capture_file(src, client=c, no_cache=True, log=lambda m: None)
    v = g.validation
    assert v.status == "passed" and v.method == METHOD and v.attempts == len(c.replies)
    assert "PyTorch" in c.requests[0]["system"][1] and "get_init_inputs" in c.requests[0]["system"][1]
    ours, theirs = graph_metrics(g), graph_metrics(torch_capture(src, validate=False))
    assert ours.opaque == () and theirs.opaque == ()
    assert (ours.macs, ours.transcendental) == (theirs.macs, theirs.transcendental)


def test_a_wrong_first_translation_is_caught_and_repaired():
    replay = KB / "l1_97_attention_unscaled_then_fix.json"
    c = ReplayClient(replay)
    g = capture_file(KB / "l1_97_attention.py", client=c, no_cache=True, log=lambda m: None)
    diag = c.requests[1]["messages"][-1]["content"]
    assert "output y (shape [2, 2, 8, 4]) diverges" in diag and "Attempt 1 failed" in diag
    assert g.validation.attempts == 2
    # by hand: QK^T and PV, each B*H*S*T*E = 2*2*8*8*4 MACs; one exp per score
    assert graph_metrics(g).macs == 2 * (2 * 2 * 8 * 8 * 4) and graph_metrics(g).transcendental == 2 * 2 * 8 * 8


def test_inputs_and_weights_are_named_as_the_benchmark_defines_them():
    c = ReplayClient(KB / "l3_vanilla_rnn_cell_first_try.json")
    g = capture_file(KB / "l3_vanilla_rnn_cell.py", client=c, no_cache=True, log=lambda m: None)
    req = c.requests[0]["messages"][0]["content"]
    for line in ("- x: shape [4, 8]", "- hidden: shape [4, 16]", "- i2h_weight: shape [16, 24]", "- y0: shape [4, 6]",
                 "- y1: shape [4, 16]"):
        assert line in req
    assert {"x", "hidden", "i2h_weight", "h2o_bias", "y0", "y1"} <= {t.name for t in g.tensors}


def test_a_file_written_for_a_gpu_runs_on_the_cpu():
    c = ReplayClient(KB / "l2_conv_relu_bias_cuda_first_try.json")
    g = capture_file(KB / "l2_conv_relu_bias_cuda.py", client=c, no_cache=True, log=lambda m: None)
    assert "written for a GPU" in g.validation.reference and g.validation.status == "passed"


def _cli(capsys, *args: str) -> tuple[int, str]:
    from solar_io.cli.main import main

    try:
        main(["capture", *args])
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("extra", [[], ["--inputs-from", "make_inputs"], ["--input", "x=fp32[4,32]"],
                                   ["--entry", f"{SOFTMAX}:Model"]], ids=["plain", "inputs-from", "input", "entry"])
def test_cli_reads_the_file_as_the_torch_frontend_does(extra, tmp_path, monkeypatch, capsys):
    from solar_io.frontends.agent import jail

    monkeypatch.setenv("SOLAR_IO_AGENT_REPLAY", str(SOFTMAX_REPLY))
    out = tmp_path / "g.yaml"
    unsafe = [] if jail.status().ok else ["--unsafe-exec"]
    code, err = _cli(capsys, str(SOFTMAX), "--frontend", "agent", "-o", str(out), "--no-cache", *unsafe, *extra)
    assert code == 0, err
    g = load(out)
    assert g.validation.method == METHOD and g.producer.source == "l1_23_softmax.py"
    assert graph_metrics(g).transcendental == 4 * 32


def test_no_key_is_one_line_before_any_work(tmp_path, capsys):
    marker = tmp_path / "ran"
    src = tmp_path / "kb_marker.py"
    src.write_text(SOFTMAX.read_text() + f"\nopen({str(marker)!r}, 'w').write('the file ran')\n")
    code, err = _cli(capsys, str(src), "--frontend", "agent")
    assert code == 1 and len(err.strip().splitlines()) == 1 and "ANTHROPIC_API_KEY" in err
    assert "Traceback" not in err and not marker.exists()  # checked before the source ran


def test_a_non_tensor_input_is_a_constant_of_the_request():
    c = ReplayClient(KB / "l1_5_matrix_scalar_first_try.json")
    g = capture_file(KB / "l1_5_matrix_scalar.py", client=c, no_cache=True, log=lambda m: None)
    req = c.requests[0]["messages"][0]["content"]
    assert "Constant (non-tensor) arguments, fixed:\n- s = 3.14" in req and "- A: shape [8, 12]" in req
    assert {t.name for t in g.tensors if t.role == "input"} == {"A"}


def test_bf16_is_refused_in_one_line():
    from solar_io.frontends.common.errors import CaptureError

    with pytest.raises(CaptureError, match="bf16/fp8 values.*--frontend torch"):
        capture_file(SOFTMAX, dtype="bf16", client=ReplayClient([]), no_cache=True, log=lambda m: None)


def test_entry_naming_an_importable_module(tmp_path, monkeypatch, capsys):
    from solar_io.frontends.agent import jail

    pkg = tmp_path / "kbpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "softmax.py").write_text(SOFTMAX.read_text())
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("SOLAR_IO_AGENT_REPLAY", str(SOFTMAX_REPLY))
    out = tmp_path / "g.yaml"
    unsafe = [] if jail.status().ok else ["--unsafe-exec"]
    code, err = _cli(capsys, str(tmp_path / "absent.py"), "--frontend", "agent", "--entry", "kbpkg.softmax:Model",
                     "-o", str(out), "--no-cache", *unsafe)
    assert code == 0, err
    assert load(out).producer.source == "softmax.py"
    code, err = _cli(capsys, str(tmp_path / "absent.py"), "--frontend", "agent", "--entry", "kbpkg.nothere:Model")
    assert code == 1 and "cannot find module kbpkg.nothere" in err and len(err.strip().splitlines()) == 1, err
