"""``--agent-fallback``: opaque nodes of a PyTorch capture handed to the translation loop,
offline (recorded replies). The test op is a custom ``torch.library`` op (a row RMS
scaling, tests/agent_replays/custom_op_torch.py) that no frontend rule lowers."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

import solar_io
from solar_io.frontends.agent import ReplayClient
from solar_io.frontends.agent.fallback import op_program, resolve_opaque
from solar_io.frontends.agent.translate import extract_code

torch = pytest.importorskip("torch")

from agent_fixtures import _isolated, _unjailed_where_no_jail  # noqa: E402, F401  (autouse fixtures)
from paths import TESTS  # noqa: E402

from solar_io.frontends.torch import capture_file  # noqa: E402

HERE = TESTS / "agent_replays"
MODEL = HERE / "custom_op_torch.py"
REPLIES = HERE / "custom_op_torch_mismatch_then_fix.json"




@pytest.fixture(scope="module")
def captured() -> solar_io.Graph:
    return capture_file(MODEL)


def good_code() -> str:
    return extract_code(json.loads(REPLIES.read_text())["replies"][1]["text"])


def test_the_custom_op_is_opaque_with_a_rerunnable_call(captured):
    (op,) = [n for n in captured.nodes if n.kind == "opaque"]
    assert op.op == "solar_test.row_rms_scale" and op.inputs[0].tensor == "linear"
    attrs = dict(op.attrs)
    assert attrs == {"call": "torch.ops.solar_test.row_rms_scale.default(T['linear'], 1e-06)",
                     "results": "row_rms_scale"}
    prog = op_program(captured, op, MODEL.name)
    assert prog.custom and prog.inputs == {"linear": "linear"} and prog.outputs == {"row_rms_scale": "row_rms_scale"}
    assert "def forward(linear):" in prog.text and "rng.standard_normal((4, 8))" in prog.text


def test_fallback_splices_the_translation_in_place_of_the_opaque_node(captured):
    c = ReplayClient(REPLIES)
    logs: list[str] = []
    rep = resolve_opaque(captured, MODEL, client=c, no_cache=True, log=logs.append)
    g = rep.graph
    assert rep.failed == {} and rep.replaced == {"row_rms_scale": 6}
    assert not [n for n in g.nodes if n.kind == "opaque"]
    assert not [i for i in solar_io.validate(g) if i.severity == "error"]
    assert solar_io.loads(solar_io.dumps(g)) == g
    # the request: the op's own program, the file defining the custom op, the shapes; then a repair
    first = c.requests[0]["messages"][0]["content"]
    assert "torch.ops.solar_test.row_rms_scale.default(T['linear'], 1e-06)" in first
    assert "@torch.library.custom_op(\"solar_test::row_rms_scale\"" in first and "shape [4, 8]" in first
    assert "diverges" in c.requests[1]["messages"][-1]["content"]
    assert any("replaced by 6 translated node(s)" in m for m in logs)
    # boundary: the op's input and output keep their names and the graph's ranks
    new = [n for n in g.nodes if dict(n.attrs).get("fallback")]
    assert len(new) == 6 and all(n.op == "solar_test.row_rms_scale" for n in new)
    last = next(n for n in new if n.outputs[0].tensor == "row_rms_scale")
    ranks = captured.tensor_map["linear"].ranks
    assert [str(a) for a in last.inputs][0] == f"linear[{', '.join(ranks)}]"
    assert g.nodes[[n.name for n in g.nodes].index(last.name) + 1].name == "relu"  # in place, in order
    assert "row_rms_scale replaced by LLM translations" in g.validation.reason
    # the spliced work, derived by hand for x[B=4, D=8]: square 32, row sums 4*7, mean scale 4,
    # + eps 4, rsqrt 4 (transcendental), scale 32; bytes (fp32): square 2*32*4, sum (32+4)*4,
    # mean (4+4)*4, +eps (4+4)*4, rsqrt (4+4)*4, scale (32+4+32)*4
    m = solar_io.graph_metrics(g)
    per = [x for x in m.nodes if x.name in {n.name for n in new}]
    assert sum(x.flops_vector for x in per) == 32 + 28 + 4 + 4 + 32
    assert sum(x.transcendental for x in per) == 4 and sum(x.macs for x in per) == 0
    assert sum(x.bytes for x in per) == 4 * (64 + 36 + 8 + 8 + 8 + 68)
    assert m.opaque == ()


def test_the_spliced_graph_computes_the_whole_model(captured):
    """The reference executor runs the spliced graph (no opaque node left) on the model's
    weights and an input; PyTorch eager runs the model itself (with its custom op)."""
    g = resolve_opaque(captured, MODEL, client=ReplayClient(REPLIES), no_cache=True, log=lambda m: None).graph
    import importlib.util

    spec = importlib.util.spec_from_file_location("_fallback_model", MODEL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.manual_seed(3)
    m = mod.Model().eval()
    x = torch.randn(4, 16)
    with torch.no_grad():
        want = m(x).numpy()
    arrays = {"x": x.numpy(), **{k: v.numpy() for k, v in m.state_dict().items()}}
    got = solar_io.execute(g, arrays)
    (out,) = got.values()
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


def test_a_failed_translation_leaves_the_node_opaque_and_reports_it(captured):
    bad = json.loads(REPLIES.read_text())["replies"][0]
    logs: list[str] = []
    rep = resolve_opaque(captured, MODEL, client=ReplayClient([bad]), max_attempts=1, no_cache=True,
                         log=logs.append)
    assert rep.replaced == {} and "no IR program matched the source after 1 attempt" in rep.failed["row_rms_scale"]
    (op,) = [n for n in rep.graph.nodes if n.kind == "opaque"]
    assert op.reason.startswith("no lowering rule; agent fallback failed: ")
    assert [n.name for n in rep.graph.nodes] == [n.name for n in captured.nodes]
    assert any("stays opaque" in m for m in logs)


def test_a_program_whose_outputs_do_not_match_the_boundary_is_not_spliced(captured):
    """The comparison accepts a single output under any name; the splice does not."""
    code = good_code().replace('{"row_rms_scale": row_rms_scale(linear)}', '{"y": row_rms_scale(linear)}')
    rep = resolve_opaque(captured, MODEL, client=ReplayClient([f"```python\n{code}```"]), no_cache=True,
                         log=lambda m: None)
    assert rep.failed == {"row_rms_scale": "the IR program has no output row_rms_scale"}


def test_an_op_without_a_call_record_stays_opaque(captured):
    g = replace(captured, nodes=tuple(replace(n, attrs=()) if n.kind == "opaque" else n for n in captured.nodes))
    rep = resolve_opaque(g, MODEL, client=ReplayClient([]), log=lambda m: None)
    assert rep.failed == {"row_rms_scale": "the frontend recorded no re-runnable call for this op"}


def test_cli_agent_fallback(tmp_path, monkeypatch, capsys):
    from solar_io.cli.main import main

    def run(*args):
        try:
            main(["capture", str(MODEL), *args])
            code = 0
        except SystemExit as e:
            code = int(e.code or 0)
        out = capsys.readouterr()
        return code, out.out, out.err

    code, out, err = run("--agent-fallback")  # no key, no replies: the node stays opaque, reported
    assert code == 0 and "stays opaque: ANTHROPIC_API_KEY is not set" in err
    assert [n.kind for n in solar_io.loads(out).nodes].count("opaque") == 1
    monkeypatch.setenv("SOLAR_IO_AGENT_REPLAY", str(REPLIES))
    dst = tmp_path / "g.yaml"
    code, out, err = run("--agent-fallback", "-o", str(dst))
    assert code == 0, err
    g = solar_io.load(dst)
    assert not [n for n in g.nodes if n.kind == "opaque"] and "opaque node(s), compute unknown" not in err
    assert "replaced by 6 translated node(s)" in err


def test_jax_callback_is_described_run_by_the_frontend_and_spliced():
    """A JAX pure_callback has no call record (its parameters are Python objects): the op is
    described, its golden data come from the JAX frontend's own implementation of the node,
    and the model file goes with the request. The replies name the node's boundary tensors
    with placeholders, filled in from the capture."""
    pytest.importorskip("jax")
    from solar_io.frontends.jax import capture_file as jax_capture

    src = HERE / "callback_jax.py"
    g = jax_capture(src)
    (op,) = [n for n in g.nodes if n.kind == "opaque"]
    data = json.loads((HERE / "callback_jax_op_first_try.json").read_text())
    c = ReplayClient([r["text"].replace("{IN}", op.inputs[0].tensor).replace("{OUT}", op.outputs[0].tensor)
                      for r in data["replies"]])
    rep = resolve_opaque(g, src, client=c, no_cache=True, log=lambda m: None)
    assert rep.failed == {} and rep.replaced == {op.name: 6}
    request = c.requests[0]["messages"][0]["content"]
    assert f"# input  {op.inputs[0].tensor}: fp32[4, 8]" in request and "def _row_rms_scale" in request
    assert "cannot be run here" in c.requests[0]["system"][1]  # golden-data conventions
    m = solar_io.graph_metrics(rep.graph)
    # by hand: x[4, 16] @ w[16, 8] 512 MACs; row RMS: square 32, sums 4*7, mean 4, +eps 4, div 32;
    # ReLU 32; one sqrt per row
    assert (m.macs, m.flops_vector, m.transcendental, m.opaque) == (512, 32 + 28 + 4 + 4 + 32 + 32, 4, ())
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((4, 16)).astype(np.float32), rng.standard_normal((16, 8)).astype(np.float32)
    ins = {t.name: a for t, a in zip([t for t in rep.graph.tensors if t.role == "input"], (x, w), strict=True)}
    (got,) = solar_io.execute(rep.graph, ins).values()
    h = x @ w
    want = np.maximum(h / np.sqrt((h * h).mean(axis=-1, keepdims=True) + 1e-6), 0.0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_random_ops_are_not_sent_to_the_model(tmp_path):
    src = tmp_path / "noise.py"
    src.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
                   "        return x + torch.randn_like(x)\n\n\ndef get_inputs():\n    return [torch.randn(2, 3)]\n")
    g = capture_file(src)
    (op,) = [n for n in g.nodes if n.kind == "opaque"]
    c = ReplayClient([])
    rep = resolve_opaque(g, src, client=c, log=lambda m: None)
    assert rep.failed == {op.name: "a random op: no translation can be checked against its values"}
    assert c.requests == []
