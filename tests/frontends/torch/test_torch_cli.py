"""``solar-io capture``: output to stdout and files, folders, and one-line errors (exit 1)."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

from inprocess import run_main
from paths import ROOT

from solar_io import load, loads  # noqa: E402
from solar_io.cli.main import main  # noqa: E402
from solar_io.frontends.select import detect_frontend  # noqa: E402

MODELS = ROOT / "tests" / "models"


def run(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    try:
        main(["capture", *args])
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def write(tmp_path: Path, name: str, body: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return p


def test_capture_to_stdout(capsys: pytest.CaptureFixture) -> None:
    code, out, err = run(capsys, str(MODELS / "linear_relu.py"))
    assert code == 0, err
    g = loads(out)
    assert g.validation.status == "passed"
    assert [n.op for n in g.nodes] == ["aten.linear", "aten.linear", "aten.relu"]


MEDIANS = ("import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
           "        return torch.median(x, dim=-1)[0], torch.kthvalue(x, 2, dim=-1)[0]\n\n\n"
           "def get_inputs():\n    return [torch.randn(4, 16)]\n")


def test_capture_to_file_lists_opaque_ops(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """median and kthvalue stay opaque on purpose (topk and sort are lowered: rules/select.py)."""
    src, out = tmp_path / "medians.py", tmp_path / "g.yaml"
    src.write_text(MEDIANS)
    code, _, err = run(capsys, str(src), "-o", str(out))
    assert code == 0, err
    assert "2 opaque node(s)" in err and "aten.median" in err and "aten.kthvalue" in err
    assert {n.op for n in load(out).nodes if n.kind == "opaque"} == {"aten.median", "aten.kthvalue"}


def test_strict_fails_on_opaque(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    src = tmp_path / "medians.py"
    src.write_text(MEDIANS)
    code, _, err = run(capsys, str(src), "--strict")
    assert code == 1
    assert err.strip().startswith("error: medians.py: op aten.median (node median): median: a data-dependent "
                                  "selection")
    assert err.strip().endswith("(--strict)") and len(err.strip().splitlines()) == 1


def test_user_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    raises = write(tmp_path, "raises.py", """\
        import torch
        raise RuntimeError("boom")
    """)
    no_inputs = write(tmp_path, "noinputs.py", """\
        import torch
        class Model(torch.nn.Module):
            def forward(self, x):
                return x * 2
    """)
    fwd_raises = write(tmp_path, "fwd.py", """\
        import torch
        class Model(torch.nn.Module):
            def forward(self, x):
                raise ValueError("bad forward")
        def get_inputs():
            return [torch.randn(2)]
    """)
    cases = [
        ([str(raises)], "raises.py: importing the model file raised RuntimeError: boom"),
        ([str(no_inputs)], "noinputs.py: no get_inputs() defined"),
        ([str(no_inputs), "--input", "x=fp33[2]"], "bad --input 'x=fp33[2]': unknown dtype"),
        ([str(no_inputs), "--input", "x[2"], "bad --input 'x[2'"),
        ([str(fwd_raises)], "fwd.py: torch.export failed: ValueError: bad forward"),
        ([str(tmp_path / "missing.py")], "missing.py: no such file"),
        ([str(no_inputs), "--dtype", "int3"], "bad --dtype 'int3'"),
    ]
    for args, msg in cases:
        code, _, err = run(capsys, *args)
        assert code == 1, (args, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and msg in lines[0], (args, err)


def test_input_specs_and_dtype(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    no_inputs = write(tmp_path, "scale.py", """\
        import torch
        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(5, 3)
            def forward(self, x, ids):
                return self.fc(x) + ids.sum()
    """)
    code, out, err = run(capsys, str(no_inputs), "--input", "x=fp32[4,5]", "--input", "ids=int64[4]",
                         "--dtype", "bf16")
    assert code == 0, err
    g = loads(out)
    assert g.tensor_map["x"].dtype == "bf16" and g.tensor_map["ids"].dtype == "int64"
    assert g.validation.status == "passed"


def test_validation_failure_needs_allow_invalid(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    calls = write(tmp_path, "calls.py", """\
        import torch
        CALLS = [0]
        class Model(torch.nn.Module):
            def forward(self, x):
                CALLS[0] += 1  # global state: the capture sees 1, the validation run 2
                return torch.relu(x) * CALLS[0]
        def get_inputs():
            return [torch.randn(4, 4)]
    """)
    out = tmp_path / "calls.yaml"
    code, _, err = run(capsys, str(calls), "-o", str(out))
    assert code == 1 and "validation failed" in err and "eager run differs from what torch.export traced" in err
    assert not out.exists()
    assert len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, str(calls), "-o", str(out), "--allow-invalid")
    assert code == 0, err
    assert load(out).validation.status == "failed"


def test_random_ops_are_replayed(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Random ops are opaque; validation replays the values the eager run drew."""
    vae = write(tmp_path, "vae.py", """\
        import torch
        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = torch.nn.Linear(16, 8)
            def forward(self, x):
                mu, logvar = self.enc(x).chunk(2, -1)
                return mu + torch.randn_like(mu) * torch.exp(0.5 * logvar), x + torch.rand(x.shape)
        def get_inputs():
            return [torch.randn(6, 16)]
    """)
    code, out, err = run(capsys, str(vae))
    assert code == 0, err
    g = loads(out)
    assert g.validation.status == "passed"
    assert {n.op for n in g.nodes if n.kind == "opaque"} == {"aten.randn_like", "aten.rand"}


def test_in_place_samplers_are_replayed(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """In-place samplers (``exponential_``, ``uniform_``, ``geometric_`` ... as PhiMoE's router jitter draws
    them in training mode) reach the graph as their functional ops (``aten.exponential``): replayed too."""
    src = write(tmp_path, "jitter.py", """\
        import torch
        class Model(torch.nn.Module):
            def forward(self, x):
                gumbel = torch.empty_like(x).exponential_().log()
                keep = torch.rand_like(x).uniform_() > 0.75
                tries = torch.empty_like(x).geometric_(0.5)
                return torch.where(keep, x - gumbel, x) * tries
        def get_inputs():
            return [torch.randn(6, 16)]
    """)
    code, out, err = run(capsys, str(src))
    assert code == 0, err
    g = loads(out)
    assert g.validation.status == "passed", g.validation.reason
    assert {n.op for n in g.nodes if n.kind == "opaque"} == {"aten.exponential", "aten.rand_like", "aten.uniform",
                                                             "aten.geometric"}


def test_no_validate_and_budget(capsys: pytest.CaptureFixture) -> None:
    code, out, _ = run(capsys, str(MODELS / "mlp.py"), "--no-validate")
    assert code == 0 and loads(out).validation.status == "skipped"
    code, out, _ = run(capsys, str(MODELS / "mlp.py"), "--validate-budget", "1KiB")
    v = loads(out).validation  # over the budget: validated per distinct node at reduced sizes
    assert code == 0 and v.status == "passed" and v.method == "reference-executor per node"
    assert "needs" in (v.reason or "") and "validated per node at reduced sizes" in (v.reason or "")


def test_entry_function_and_eval(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    src = write(tmp_path, "funcs.py", """\
        import torch
        def attention(q, k):
            return torch.softmax(q @ k.transpose(-1, -2), dim=-1)
        def make():
            return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    """)
    code, out, err = run(capsys, str(src), "--entry", f"{src}:attention", "--input", "q=fp32[2,3,4]",
                         "--input", "k=fp32[2,5,4]")
    assert code == 0, err
    assert loads(out).validation.status == "passed"
    code, out, err = run(capsys, str(src), "--entry", f"{src}:make", "--input", "x=fp32[6,4]", "--eval")
    assert code == 0, err
    assert loads(out).validation.status == "passed"
    code, out, err = run(capsys, "-", "--entry", "torch.nn:GELU", "--input", "x=fp32[4,4]")  # an importable module
    assert code == 0, err
    assert [n.op for n in loads(out).nodes] == ["aten.gelu"]
    src2 = write(tmp_path, "made.py", """\
        import torch
        def attention(q, k):
            return torch.softmax(q @ k.transpose(-1, -2), dim=-1)
        def create_inputs():
            return torch.randn(2, 3, 4), torch.randn(2, 5, 4)
    """)
    code, out, err = run(capsys, str(src2), "--entry", f"{src2}:attention", "--inputs-from", "create_inputs")
    assert code == 0, err
    assert loads(out).validation.status == "passed" and loads(out).rank_sizes.get("D") == 4
    code, out, err = run(capsys, str(src2), "--entry", f"{src2}:attention", "--inputs-from", "nope")
    assert code == 1 and "--inputs-from names 'nope'" in err


def test_folder_capture(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name in ("linear_relu", "softmax", "topk_sort"):
        shutil.copy(MODELS / f"{name}.py", src)
    (src / "broken.py").write_text("import torch\nraise ImportError('nope')\n")
    out = tmp_path / "out"
    code, _, err = run(capsys, str(src), "-o", str(out))
    assert code == 1  # one file failed, the others were still captured
    assert sorted(p.name for p in out.iterdir()) == ["linear_relu.yaml", "softmax.yaml", "topk_sort.yaml"]
    assert "3/4 captured" in err and "broken.py" in err and "nope" in err


def test_detect_frontend(tmp_path: Path) -> None:
    assert detect_frontend(MODELS / "mlp.py") == "torch"
    assert detect_frontend(write(tmp_path, "j.py", "import jax.numpy as jnp\n")) == "jax"
    assert detect_frontend(write(tmp_path, "l.py", "from solar_io.frontends.loopir import kernel\n")) == "loopir"
    with pytest.raises(Exception, match="cannot tell the frontend"):
        detect_frontend(write(tmp_path, "n.py", "x = 1\n"))


CUDA_FILE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16).cuda()
        self.register_buffer("scale", torch.ones(16, device="cuda"))

    def forward(self, q, k, v):
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        return self.proj(o) * self.scale + torch.zeros(16, device=torch.device("cuda:0")) + torch.ones(16).to("cuda")


def get_inputs():
    return [torch.randn(2, 4, 8, 16, device="cuda") for _ in range(3)]


def get_init_inputs():
    return []
'''


def test_a_file_written_for_a_gpu_captures_on_this_cpu(tmp_path):
    """KernelBench's SDPA file makes its inputs with device='cuda': the capture (meta tensors) and
    the validation (CPU) put every tensor the file places on an accelerator on their own device."""
    src = tmp_path / "gpu_model.py"
    src.write_text(CUDA_FILE)
    out = tmp_path / "g.yaml"
    res = run_main("capture", str(src), "-o", str(out))
    assert res.returncode == 0, res.stderr
    g = load(out)
    assert g.validation.status == "passed"
    assert {n.op for n in g.nodes} >= {"aten.scaled_dot_product_attention", "aten.linear"}


def test_data_dependent_branch_is_specialised_or_one_line(cli, tmp_path):
    """A branch on tensor values is captured with the branch the example inputs take (issue 18,
    frontends/torch/specialise.py), recorded in the file; where those values cannot be computed within
    the budget, one line names the call, where it is and what the tensor is computed from."""
    src = tmp_path / "branchy.py"
    src.write_text("import torch\n\n\nclass Model(torch.nn.Module):\n    def __init__(self):\n"
                   "        super().__init__()\n        self.lin = torch.nn.Linear(4, 4)\n\n"
                   "    def forward(self, x):\n"
                   "        if not (self.lin(x) > 0).any():\n            return x\n        return x * 2\n\n\n"
                   "def get_inputs():\n    return [torch.randn(4)]\n")
    out = tmp_path / "g.yaml"
    res = cli("capture", str(src), "-o", str(out))
    assert res.returncode == 0, res.stderr
    (a,) = load(out).assumptions
    assert a.kind == "specialised" and a.subject == "Tensor.bool at branchy.py:10"
    res = cli("capture", str(src), "--validate-budget", "64")
    assert res.returncode == 1 and res.stderr.count("\n") == 1
    assert "branchy.py: value-specialised capture: Tensor.bool (branchy.py:10)" in res.stderr
    assert "weight:lin.weight" in res.stderr and "--validate-budget" in res.stderr
