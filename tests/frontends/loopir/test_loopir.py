"""Affine Loop IR: restriction checks, binding errors, builtins, tracing rules, capture errors.

Programs are written to temporary files (kernels need their source) and captured with
``capture_file``; every error a user can cause is one LoopIRError line naming the file
and line. Numerical checks run without numba (``jit=False``) unless they test numba.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import solar_io
from solar_io.errors import SolarIOError
from solar_io.frontends.loopir import LoopIRError, capture_file

HEADER = """\
from solar_io.frontends.loopir import *  # noqa: F403
B = Dim("B", 3, parallel=True)
N = Dim("N", 5)
M = Dim("M", 4)
"""


def program(tmp_path: Path, body: str, name: str = "prog.py") -> Path:
    p = tmp_path / name
    p.write_text(HEADER + textwrap.dedent(body))
    return p


def line_of(path: Path, needle: str) -> int:
    return next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if needle in ln)


def capture_error(path: Path, **kw) -> str:
    with pytest.raises(LoopIRError) as e:
        capture_file(path, jit=False, **kw)
    assert isinstance(e.value, SolarIOError)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


COPY = """
@kernel
def k(x: Tensor("B,N"), y: Out("B,N")):
    for b in B:
        for n in N:
{body}

def model(x: Tensor("B,N")):
    return k(x)
"""

VIOLATIONS = {
    "data-dependent branch": ("            if x[b, n] > 0:\n                y[b, n] = x[b, n]",
                              "if x[b, n] > 0", "data-dependent branching"),
    "conditional expression": ("            y[b, n] = x[b, n] if x[b, n] > 0 else 0.0", "y[b, n] = x",
                               "use where(c, x, y)"),
    "non-affine index (product)": ("            y[b, n] = x[b, n * n]", "y[b, n] = x", "product of loop variables"),
    "non-affine index (tensor)": ("            y[b, n] = x[b, x[b, n]]", "y[b, n] = x", "use the gather builtin"),
    "unknown builtin": ("            y[b, n] = softplus(x[b, n])", "softplus", "unknown builtin softplus"),
    "loop var as value": ("            y[b, n] = x[b, n] * n", "y[b, n] = x", "loop variable n used as a value"),
    "store to input": ("            x[b, n] = 1.0", "x[b, n] = 1.0", "read-only"),
    "scalar accumulator": ("            t = 0.0\n            t += x[b, n]\n            y[b, n] = t", "t += x",
                           "accumulate into a tensor element"),
    "floor division": ("            y[b, n] = x[b, n // 2]", "y[b, n] = x", "non-affine index"),
    "while loop": ("            while True:\n                y[b, n] = 1.0", "while True", "while loops"),
    "wrong store index": ("            y[n, b] = x[b, n]", "y[n, b]", "in that order"),
    "self read": ("            y[b, n] = y[b, n] - x[b, n]", "y[b, n] = y", "reads y itself"),
}


@pytest.mark.parametrize("case", sorted(VIOLATIONS))
def test_restriction_violations_name_the_line(tmp_path, case):
    body, needle, expect = VIOLATIONS[case]
    p = program(tmp_path, COPY.format(body=body))
    msg = capture_error(p)
    assert msg.startswith(f"prog.py:{line_of(p, needle)}: kernel k: "), msg
    assert expect in msg, msg


@pytest.mark.parametrize("src, needle, expect", [
    ("""
@kernel
def k(x: Tensor("B,N"), y: Out("B")):
    for b in B:
        for n in N:
            y[b] = x[b, n]
def model(x: Tensor("B,N")):
    return k(x)
""", "y[b] = x", "leaves loop dim N out"),
    ("""
@kernel
def k(x: Tensor("B,N"), y: Out("B,N")):
    for b in B:
        y[b, 0] = x[b, 0]
        for n in N:
            y[b, n] = x[b, n]
def model(x: Tensor("B,N")):
    return k(x)
""", "for n in N", "perfectly nested"),
    ("""
@kernel
def k(x: Tensor("B,N"), t: Temp("B"), y: Out("B,N")):
    for b in B:
        for n in N:
            t[b] += x[b, n]
            y[b, n] = x[b, n] / t[b]
def model(x: Tensor("B,N")):
    return k(x)
""", "y[b, n] = x[b, n] / t[b]", "read it in a later nest"),
    ("""
@kernel
def k(x: Tensor("B,N"), y: Out("B,N")):
    for b in B:
        for n in N:
            y[b, n] = x[b, n]
    for b in B:
        for n in N:
            y[b, n] = x[b, n] + 1.0
def model(x: Tensor("B,N")):
    return k(x)
""", "y[b, n] = x[b, n] + 1.0", "written twice"),
    ("""
@kernel
def k(x: Tensor("B,N"), y: Out("B,N")):
    for b in B:
        for b2 in B:
            y[b, b2] = x[b, b2]
def model(x: Tensor("B,N")):
    return k(x)
""", "for b2 in B", "looped over twice"),
    ("""
@kernel
def k(x: Tensor("B,N"), y: Out("B,N")):
    for b in range(3):
        for n in N:
            y[b, n] = x[b, n]
def model(x: Tensor("B,N")):
    return k(x)
""", "for b in range(3)", "loops run over Dim objects"),
    ("""
@kernel
def k(x, y: Out("B,N")):
    for b in B:
        for n in N:
            y[b, n] = 1.0
def model(x: Tensor("B,N")):
    return k(x)
""", "def k(x", "needs an annotation"),
])
def test_structure_violations(tmp_path, src, needle, expect):
    p = program(tmp_path, src)
    msg = capture_error(p)
    assert msg.startswith(f"prog.py:{line_of(p, needle)}:"), msg
    assert expect in msg, msg


def test_out_of_bounds_read_needs_fill(tmp_path):
    src = """
@kernel
def shift(x: Tensor("B,N"), y: Out("B,N")):
    for b in B:
        for n in N:
            y[b, n] = x[b, n + 1]
def model(x: Tensor("B,N")):
    return shift(x)
"""
    p = program(tmp_path, src)
    msg = capture_error(p)
    assert f"prog.py:{line_of(p, 'return shift')}: kernel shift:" in msg
    assert f"prog.py:{line_of(p, 'y[b, n] = x')}: index N + 1 of x dim 1 (N=5) spans [1, 5]" in msg
    assert "declare fill=" in msg
    p.write_text(p.read_text().replace('x: Tensor("B,N"), y', 'x: Tensor("B,N", fill=-1.0), y'))
    g = capture_file(p, jit=False)
    assert g.validation.status == "passed"
    (node,) = g.nodes
    assert node.pad == (("x", (("N", 0, 1),)),) and node.fill == -1.0
    assert str(node.inputs[0]) == "x[B, N + 1]"


@pytest.mark.parametrize("call, expect", [
    ("k(x, x)", "takes 1 arguments, got 2"),
    ("k(x, N=7)", "dim N is 7 from keyword but 5 from x"),
    ("k(1.0)", "x must be a tensor"),
    ("k(x, Z='a')", "unknown argument Z='a'"),
])
def test_call_errors_name_the_call(tmp_path, call, expect):
    src = f"""
@kernel
def k(x: Tensor("B,N"), y: Out("B,N")):
    for b in B:
        for n in N:
            y[b, n] = x[b, n]
def model(x: Tensor("B,N")):
    return {call}
"""
    p = program(tmp_path, src)
    msg = capture_error(p)
    assert msg.startswith(f"prog.py:{line_of(p, 'return ' + call)}: kernel k: "), msg
    assert expect in msg, msg


@pytest.mark.parametrize("src, expect", [
    ("def model(x: Tensor('B,N')):\n    raise ValueError('boom')\n", "tracing model raised ValueError: boom"),
    ("def model(x):\n    return x\n", "needs a Tensor('dims', ...) annotation"),
    ("x = 1 / 0\n", "loading the program raised ZeroDivisionError"),
    ("def model(x: Tensor('B,N')):\n    return x\n", "return computed tensors only"),
    ("def model(x: Tensor('B,N')):\n    return 3\n", "must return a tensor"),
    ("def model(x: Tensor('B,Z')):\n    return x\n", "dim Z of model parameter x has no size"),
    ("def model(x: Tensor('B,N')):\n    if x:\n        pass\n", "no truth value"),
    ("y = (\n", "syntax error"),
    ("X = 1\n", "defines no model"),
])
def test_program_errors(tmp_path, src, expect):
    msg = capture_error(program(tmp_path, src))
    assert msg.startswith("prog.py"), msg
    assert expect in msg, msg


def test_model_error_names_program_line(tmp_path):
    p = program(tmp_path, "def model(x: Tensor('B,N')):\n    y = 1\n    raise KeyError('k')\n")
    assert capture_error(p).startswith(f"prog.py:{line_of(p, 'raise KeyError')}: tracing model raised KeyError")


# ---------------------------------------------------------------------------- lifting rules

REDUCTIONS = """
@kernel
def k(x: Tensor("B,N"), w: Tensor("N,M"), s: Out("B"), mx: Out("B"), pr: Out("B"), mm: Out("B,M"),
      e: Out("B,N"), c: Out("B,N")):
    for b in B:
        for n in N:
            s[b] += exp(x[b, n] - 1.5)
            mx[b] = max(mx[b], x[b, n] * 2.0)
            pr[b] *= x[b, n]
            e[b, n] = where(x[b, n] > 0.0, sigmoid(x[b, n]), -x[b, n])
            c[b, n] = x[b, n]
    for b in B:
        for m in M:
            for n in N:
                mm[b, m] += x[b, n] * w[n, m] * 0.5

def model(x: Tensor("B,N"), w: Tensor("N,M", role="weight")):
    s, mx, pr, mm, e, c = k(x, w)
    return {"s": s, "mx": mx, "pr": pr, "mm": mm, "e": e, "c": c}
"""


def test_lifting_rules_and_counts(tmp_path):
    g = capture_file(program(tmp_path, REDUCTIONS), jit=False)
    assert g.validation.status == "passed", g.validation.reason
    by_out = {n.outputs[0].tensor: n for n in g.nodes}
    summary = {t: (n.kind, n.map, n.reduce, n.movement, [str(a) for a in n.inputs]) for t, n in by_out.items()}
    assert summary["k.s.t0"] == ("einsum", "sub", "none", None, ["x[B, N]", "const.fp32.1.5[]"])
    assert summary["s"] == ("einsum", "exp", "add", None, ["k.s.t0[B, N]"])
    assert summary["mx"] == ("einsum", "mul", "max", None, ["x[B, N]", "const.fp32.2.0[]"])
    assert summary["pr"] == ("einsum", "identity", "mul", None, ["x[B, N]"])
    assert summary["mm"] == ("einsum", "mul", "add", None, ["x[B, N]", "w[N, M]", "const.fp32.0.5[]"])
    assert summary["c"] == ("data_movement", None, None, "copy", ["x[B, N]"])
    assert by_out["k.e.t0"].map == "gt" and g.tensor_map["k.e.t0"].dtype == "bool"
    assert summary["e"][1:3] == ("where", "none")
    B, N, M = 3, 5, 4
    m = {n.name: solar_io.node_metrics(g, n) for n in g.nodes}
    assert m["s"].transcendental == B * N and m["s"].flops_vector == B * N - B
    assert m["mx"].flops_vector == B * N + (B * N - B)
    assert m["mm"].macs == B * M * N and m["mm"].flops_vector == B * M * N  # the third factor
    assert m["c"].flops == 0
    assert m["k.e.t1"].transcendental == B * N  # sigmoid


def test_hoisting_uses_only_the_dims_an_expression_reads(tmp_path):
    src = """
@kernel
def k(x: Tensor("B,N"), a: Tensor("B"), y: Out("B,N")):
    for b in B:
        for n in N:
            y[b, n] = x[b, n] * exp(a[b] * 2.0)
def model(x: Tensor("B,N"), a: Tensor("B")):
    return k(x, a)
"""
    g = capture_file(program(tmp_path, src), jit=False)
    spaces = {n.name: n.space for n in g.nodes}
    assert spaces == {"k.y.t0": ("B",), "k.y.t1": ("B",), "k.y": ("B", "N")}


def test_builtins_execute_like_numpy_and_lift(tmp_path):
    src = """
@kernel
def double(x: Tensor("B,N"), y: Out("B,N")):
    for b in B:
        for n in N:
            y[b, n] = x[b, n] * 2.0

def model(x: Tensor("B,N"), ids: Tensor("M", dtype="int64"), t: Tensor("N,B")):
    y = double(x)
    r = reshape(y, "N,B")
    tr = transpose(y, "N,B")
    sl = slice(y, "N", 1, 5, 2, as_dim="N2")
    se = select(y, "B", 2)
    g = gather(y, ids, "B")
    st = stack([tr, t], "L")
    ca = concat([tr, t], "N")
    cs = cast(y, "fp64")
    return {"r": double(reshape(r, "B,N")), "sl": sl, "se": se, "g": g, "st": st, "ca": ca, "cs": cs}

def get_inputs(rng):
    return {"ids": np.array([2, 0, 0, 1])}
"""
    p = program(tmp_path, "import numpy as np\n" + src)
    g = capture_file(p, jit=False)
    assert g.validation.status == "passed", g.validation.reason
    kinds = {n.op: (n.kind, n.movement, n.view) for n in g.nodes}
    assert kinds["loopir.reshape"] == ("data_movement", "reshape", True)
    assert kinds["loopir.transpose"] == ("data_movement", "copy", False)
    assert kinds["loopir.gather"] == ("data_movement", "copy", False)
    assert kinds["loopir.concat"] == ("data_movement", "concat", False)
    assert kinds["loopir.cast"][0] == "einsum"
    sl = next(n for n in g.nodes if n.op == "loopir.slice")
    assert str(sl.inputs[0]) == "double.y[B, 2*N2 + 1]"
    ga = next(n for n in g.nodes if n.op == "loopir.gather")
    assert [str(a) for a in ga.inputs] == ["double.y[@ids, N]", "ids[M]"]
    assert g.shape("st") == (2, 5, 3) and g.shape("ca") == (10, 3) and g.tensor_map["cs"].dtype == "fp64"
    m = solar_io.graph_metrics(g)
    assert all(solar_io.node_metrics(g, n).flops == 0 for n in g.nodes if n.kind == "data_movement")
    assert m.macs == 0


def test_rank_names_follow_data_and_stay_distinct(tmp_path):
    src = """
@kernel
def mm(a: Tensor("B,N"), b: Tensor("N,M"), c: Out("B,M")):
    for i in B:
        for j in M:
            for k in N:
                c[i, j] += a[i, k] * b[k, j]

def model(x: Tensor("B,N"), w1: Tensor("N,M", role="weight"), w2: Tensor("M,B", role="weight")):
    return mm(mm(x, w1), w2)
"""
    g = capture_file(program(tmp_path, src), jit=False)
    assert g.validation.status == "passed"
    second = g.nodes[1]
    assert second.space == ("B", "B_3", "M") or len(set(second.space)) == 3
    assert dict(g.ranks)["B"] == 3


def test_capture_is_deterministic_and_round_trips(tmp_path):
    p = program(tmp_path, REDUCTIONS)
    a, b = capture_file(p, jit=False), capture_file(p, jit=False)
    assert solar_io.dumps(a) == solar_io.dumps(b)
    assert solar_io.loads(solar_io.dumps(a)) == a
    assert a.producer.frontend == "loopir" and a.producer.source == "prog.py"
    assert a.producer.source_sha256 and len(a.producer.source_sha256) == 64
    assert str(tmp_path) not in solar_io.dumps(a)
    v = a.validation
    assert (v.method, v.seed, v.rtol) == ("reference-executor", 0, 1e-3) and "pure Python" in v.reference


def test_validation_failure_is_recorded_or_raised(tmp_path, monkeypatch):
    from solar_io.frontends.loopir import verify

    p = program(tmp_path, REDUCTIONS)
    real = verify.execute

    def wrong(g, inputs, **kw):
        out = real(g, inputs, **kw)
        out["s"] = out["s"] + 1.0
        return out

    monkeypatch.setattr(verify, "execute", wrong)
    g = capture_file(p, jit=False)
    assert g.validation.status == "failed" and "output s differs" in g.validation.reason
    with pytest.raises(LoopIRError, match="validation failed: output s differs"):
        capture_file(p, jit=False, strict=True)
    g = capture_file(p, validate=False)
    assert g.validation.status == "skipped"


def test_dead_results_are_dropped(tmp_path):
    src = """
@kernel
def two(x: Tensor("B,N"), y: Out("B,N"), z: Out("B,N")):
    for b in B:
        for n in N:
            y[b, n] = exp(x[b, n])
            z[b, n] = x[b, n] * 3.0
def model(x: Tensor("B,N")):
    y, z = two(x)
    return {"z": z}
"""
    g = capture_file(program(tmp_path, src), jit=False)
    assert [n.name for n in g.nodes] == ["z"]
    assert solar_io.graph_metrics(g).transcendental == 0


def test_kernel_runs_directly_on_numpy(tmp_path):
    p = program(tmp_path, REDUCTIONS)
    from solar_io.frontends.loopir.capture import load_program
    from solar_io.frontends.loopir.state import using

    mod = load_program(p)
    x = np.arange(15, dtype=np.float32).reshape(3, 5) / 10
    w = np.ones((5, 4), dtype=np.float32)
    with using(jit=False):
        s, mx, pr, mm, e, c = mod.k(x, w)
    np.testing.assert_allclose(s.numpy(), np.exp(x - 1.5).sum(1), rtol=1e-6)
    np.testing.assert_allclose(mx.numpy(), (2 * x).max(1))
    np.testing.assert_allclose(mm.numpy(), 0.5 * x @ w, rtol=1e-6)


def test_import_and_lift_without_numba(tmp_path):
    p = program(tmp_path, REDUCTIONS)
    code = f"""
import sys
sys.modules["numba"] = None  # importing numba now fails
from solar_io.frontends.loopir import capture_file, LoopIRError
g = capture_file({str(p)!r}, validate=False)
assert g.validation.status == "skipped" and len(g.nodes) > 3
g = capture_file({str(p)!r}, jit=False)
assert g.validation.status == "passed"
try:
    capture_file({str(p)!r}, jit=True)
except LoopIRError as e:
    print("ERR", e)
import warnings
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    g = capture_file({str(p)!r})  # default: falls back to plain Python
print("REF", g.validation.reference, g.validation.status, [str(x.message) for x in w])
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "needs numba" in r.stdout and "--no-jit" in r.stdout
    assert "REF loopir program, pure Python (no jit) passed" in r.stdout and "numba is not installed" in r.stdout


def test_scalar_output_and_prange_codegen(tmp_path):
    src = """
@kernel
def total(x: Tensor("B,N"), s: Out("")):
    for b in B:
        for n in N:
            s[()] += x[b, n]

@kernel
def rowsum(x: Tensor("B,N"), s: Out("B")):
    for b in B:
        for n in N:
            s[b] += x[b, n]

def model(x: Tensor("B,N")):
    return {"s": total(x), "r": rowsum(x)}
"""
    pytest.importorskip("numba")
    p = program(tmp_path, src)
    g = capture_file(p, jit=True)
    assert g.validation.status == "passed", g.validation.reason
    assert g.shape("s") == () and str(g.nodes[0].outputs[0]) == "s[]"
    from solar_io.frontends.loopir.capture import load_program
    from solar_io.frontends.loopir.codegen import generate

    mod = load_program(p)
    src_total, par_total = generate(mod.total.ir)
    src_row, par_row = generate(mod.rowsum.ir)
    assert not par_total and "prange" not in src_total  # B is reduced: no parallel loop over it
    assert par_row and "for i_B in prange(n_B):" in src_row


MATMUL = """
@kernel
def mm(a: Tensor("B,N"), w: Tensor("N,M"), c: Out("B,M")):
    for b in B:
        for m in M:
            for n in N:
                c[b, m] += a[b, n] * w[n, m]

def model(x: Tensor("B,N"), w: Tensor("N,M", role="weight")):
    return {"y": mm(x, w)}
"""


def test_reduced_validation_records_reduced_ranks(tmp_path):
    src = MATMUL
    p = program(tmp_path, src)
    g = capture_file(p, jit=False, validate_sizes={"N": 2, "M": 3})
    assert g.validation.status == "passed"
    assert g.validation.reduced_ranks == (("N", 2), ("M", 3)) and dict(g.ranks) == {"B": 3, "N": 5, "M": 4}
    assert solar_io.loads(solar_io.dumps(g)) == g
    g = capture_file(p, jit=False, validate_sizes={"N": 9})
    assert g.validation.status == "skipped" and "larger than the graph's" in g.validation.reason
    g = capture_file(p, jit=False, validate_budget=64)
    assert g.validation.status == "skipped" and "over the budget" in g.validation.reason
    g = capture_file(p, jit=False, sizes={"N": 7})
    assert dict(g.ranks)["N"] == 7 and g.validation.status == "passed"


def test_opaque_builtin(tmp_path):
    src = """
@kernel
def double(x: Tensor("B,N"), y: Out("B,N")):
    for b in B:
        for n in N:
            y[b, n] = x[b, n] * 2.0

def top2(a):
    return np.sort(a, axis=1)[:, ::-1][:, :2].copy()

def model(x: Tensor("B,N")):
    return {"t": double(opaque(top2, [double(x)], "B,K", K=2, reason="top-k selection has no einsum form"))}
"""
    g = capture_file(program(tmp_path, "import numpy as np\n" + src), jit=False)
    assert g.validation.status == "passed", g.validation.reason
    op = next(n for n in g.nodes if n.kind == "opaque")
    assert op.op == "loopir.opaque.top2" and op.reason.startswith("top-k") and g.shape(op.outputs[0].tensor) == (3, 2)
    assert solar_io.graph_metrics(g).opaque == (op.name,)


def test_attribute_builtins_module_constants_and_folding(tmp_path):
    src = """
import math
import numpy as np
STRIDE = 2
SCALE = 0.5

@kernel
def k(x: Tensor("B,N"), y: Out("B,M")):
    for b in B:
        for m in M:
            y[b, m] = math.exp(x[b, STRIDE * m - 2]) * np.tanh(x[b, m]) * (1.0 / 4) + SCALE * math.pi

def model(x: Tensor("B,N", fill=0.0)):
    return k(x)
"""
    p = program(tmp_path, src)
    p.write_text(p.read_text().replace('x: Tensor("B,N"), y', 'x: Tensor("B,N", fill=0.0), y'))
    g = capture_file(p, jit=False)
    assert g.validation.status == "passed", g.validation.reason
    ops = [(n.map, [str(a) for a in n.inputs]) for n in g.nodes]
    assert ("exp", ["x[B, 2*M - 2]"]) in ops and ("tanh", ["x[B, M]"]) in ops
    assert any("const.fp32.0.25[]" in ins for _, ins in ops)  # 1.0 / 4 folded
    assert any(f"const.fp32.{0.5 * 3.141592653589793!r}[]" in ins for _, ins in ops)
    assert g.nodes[0].pad == (("x", (("N", 2, 0),)),)


def test_constant_with_value_is_an_immediate(tmp_path):
    src = """
@kernel
def k(x: Tensor("B,N"), z: Tensor("B,N"), y: Out("B,N")):
    for b in B:
        for n in N:
            y[b, n] = x[b, n] + z[b, n]

def model(x: Tensor("B,N"), z: Tensor("B,N", role="constant", value=3.0)):
    return k(x, z)
"""
    g = capture_file(program(tmp_path, src), jit=False)
    assert g.validation.status == "passed"
    assert g.tensor_map["z"].value == 3.0
    assert solar_io.graph_metrics(g).bytes == 2 * 15 * 4
    bad = program(tmp_path, src.replace('role="constant", value', 'value'))
    assert capture_error(bad) == (f"prog.py:{line_of(bad, 'def model')}: only role='constant' tensors have a "
                                  "value (got role 'input')")


def test_scalar_store_outside_loops(tmp_path):
    """A store of scalar tensors between nests is a nest of no loops (space [])."""
    src = """
@kernel
def mean(x: Tensor("B,N"), total: Temp(""), y: Out("")):
    for b in B:
        for n in N:
            total[()] += x[b, n]
    y[()] = total[()] * (1 / 15)

def model(x: Tensor("B,N")):
    return {"y": mean(x)}
"""
    p = program(tmp_path, src)
    g = capture_file(p, jit=False)
    assert g.validation.status == "passed", g.validation.reason
    last = g.nodes[-1]
    assert (last.space, last.map, last.reduce, str(last.outputs[0])) == ((), "mul", "none", "y[]")
    m = solar_io.graph_metrics(g)
    assert m.flops_vector == (15 - 1) + 1  # 14 adds of the sum, one scale
    x = np.arange(15, dtype=np.float32).reshape(3, 5)
    from solar_io.frontends.loopir.capture import load_program

    y = load_program(p).mean(x)  # the kernel executed directly (numba when installed)
    assert float(y.numpy()) == pytest.approx(x.mean())
    bad = program(tmp_path, src.replace("    y[()] = total[()] * (1 / 15)", "    z = total[()]"))
    assert "found assign statement" in capture_error(bad)


def test_gather_with_a_shared_dim_picks_per_row(tmp_path):
    """gather(table[B, C], ids[B], "C") -> [B]: row b picks table[b, ids[b]] (take_along_dim)."""
    src = """
C = Dim("C", 7)

@kernel
def neg(x: Tensor("B,M"), y: Out("B,M")):
    for b in B:
        for m in M:
            y[b, m] = -x[b, m]

def model(t: Tensor("B,C"), ids: Tensor("B,M", dtype="int64")):
    return {"y": neg(gather(t, ids, "C"))}

def get_inputs(rng):
    return {"ids": rng.integers(0, 7, size=(3, 4))}
"""
    p = program(tmp_path, src)
    g = capture_file(p, jit=False)
    assert g.validation.status == "passed", g.validation.reason
    gat = g.nodes[0]
    assert [str(a) for a in gat.inputs] == ["t[B, @ids]", "ids[B, M]"] and g.shape("gather.y") == (3, 4)
    # executed: the program's result equals numpy's take_along_axis on the same inputs
    from solar_io.frontends.loopir import Value, gather

    rng = np.random.default_rng(1)
    t, ids = rng.standard_normal((3, 7)), rng.integers(0, 7, size=(3, 4))
    got = gather(Value(("B", "C"), t.shape, "fp64", data=t), Value(("B", "M"), ids.shape, "int64", data=ids), "C")
    assert got.dims == ("B", "M") and np.array_equal(got.data, np.take_along_axis(t, ids, axis=1))
    bad = program(tmp_path, src.replace('ids: Tensor("B,M"', 'ids: Tensor("B,C"'))
    assert "must not have the gathered dim C" in capture_error(bad)


def test_opaque_results_with_their_own_dtypes(tmp_path):
    src = """
K = Dim("K", 2)

def top(a):
    idx = np.argsort(-a, axis=1, kind="stable")[:, :2]
    return np.take_along_axis(a, idx, axis=1), idx

@kernel
def pick(x: Tensor("B,N"), v: Tensor("B,K"), y: Out("B,K")):
    for b in B:
        for k in K:
            y[b, k] = v[b, k] * 2.0

def model(x: Tensor("B,N")):
    v, i = opaque(top, [x], ["B,K", "B,K"], reason="top-k", dtype=["fp32", "int64"])
    return {"y": pick(x, v), "i": i}
"""
    g = capture_file(program(tmp_path, "import numpy as np\n" + src), jit=False)
    assert g.validation.status == "passed", g.validation.reason
    op = next(n for n in g.nodes if n.kind == "opaque")
    assert [g.tensor_map[a.tensor].dtype for a in op.outputs] == ["fp32", "int64"]
    bad = program(tmp_path, "import numpy as np\n" + src.replace('dtype=["fp32", "int64"]', 'dtype=["fp32"]'))
    assert "2 results but 1 dtypes" in capture_error(bad)


def test_module_level_sizes_follow_overrides_and_validate_sizes(tmp_path):
    """The program is imported under the overrides, so module-level size() constants follow
    them; a reduced-size validation re-imports it at the validation sizes."""
    src = """
INV_N = 1.0 / size(N)

@kernel
def mean(x: Tensor("B,N"), y: Out("B")):
    for b in B:
        for n in N:
            y[b] += x[b, n]

@kernel
def scale(s: Tensor("B"), y: Out("B")):
    for b in B:
        y[b] = s[b] * INV_N

def model(x: Tensor("B,N")):
    return {"y": scale(mean(x))}
"""
    p = program(tmp_path, src)

    def inv_n(g):
        return next(t.value for t in g.tensors if t.value is not None)

    assert inv_n(capture_file(p, validate=False)) == pytest.approx(1 / 5)
    g = capture_file(p, jit=False, sizes={"N": 8}, validate_sizes={"N": 2})
    assert inv_n(g) == pytest.approx(1 / 8) and g.validation.status == "passed", g.validation.reason
    assert g.validation.reduced_ranks == (("N", 2),)


def cli_capture(capsys, *args: str) -> tuple[int, str, str]:
    from solar_io.cli.main import main

    try:
        main(["capture", *args])
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_no_jit_sizes_and_validate_sizes(tmp_path, capsys):
    src = MATMUL
    p = program(tmp_path, src)
    code, out, err = cli_capture(capsys, str(p), "--no-jit", "--sizes", "N=64,M=32", "--validate-sizes", "N=4, M=2")
    assert code == 0, err
    g = solar_io.loads(out)
    assert dict(g.ranks) == {"B": 3, "N": 64, "M": 32}
    assert g.validation.status == "passed" and "pure Python" in g.validation.reference
    assert g.validation.reduced_ranks == (("N", 4), ("M", 2))
    for args, expect in [
            (["--sizes", "N=0"], "bad --sizes 'N=0'"),
            (["--validate-sizes", "N:4"], "bad --validate-sizes 'N:4'"),
            (["--sizes", "Q=4"], "prog.py: sizes name dim Q, which the program does not declare (its Dims: B, M, N)"),
            (["--validate-sizes", "N=2,N=3"], "each name once")]:
        code, out, err = cli_capture(capsys, str(p), *args)
        assert code == 1 and out == "" and expect in err and len(err.strip().splitlines()) == 1, err
    torch_src = tmp_path / "t.py"
    torch_src.write_text("import torch\n")
    code, _, err = cli_capture(capsys, str(torch_src), "--no-jit")
    assert code == 1 and "t.py: --no-jit applies to loop-IR programs only (this is a torch source)" in err


def test_int_parameter_as_an_index(tmp_path):
    """An ``int`` parameter in an index is a constant of each call: lifted into the access,
    bounds-checked with the call's value, passed to the compiled kernel."""
    src = """
@kernel
def pick(x: Tensor("B,N"), t: int, y: Out("B")):
    for b in B:
        y[b] = x[b, t + 1] * 2.0

def model(x: Tensor("B,N")):
    return {"a": pick(x, 0), "b": pick(x, 3)}
"""
    p = program(tmp_path, src)
    g = capture_file(p, jit=False)
    assert g.validation.status == "passed", g.validation.reason
    assert [str(n.inputs[0]) for n in g.nodes] == ["x[B, 1]", "x[B, 4]"]
    from solar_io.frontends.loopir.capture import load_program

    mod = load_program(p)
    x = np.arange(15, dtype=np.float32).reshape(3, 5)
    assert np.array_equal(mod.pick(x, 2).numpy(), 2 * x[:, 3])
    assert mod.pick.ir.index_params == ("t",)
    bad = program(tmp_path, src.replace("pick(x, 3)", "pick(x, 4)"))
    assert f"kernel pick: prog.py:{line_of(bad, 'x[b, t + 1]')}: index 5 of x dim 1 (N=5) spans [5, 5], outside " \
        "[0, 4]" in capture_error(bad)
    bad = program(tmp_path, src.replace("pick(x, 3)", "pick(x, 1.5)"))
    assert "t is an int parameter used as an index, got 1.5" in capture_error(bad)


def test_scan_builtin_lifts_to_one_scan_node_and_executes_like_numpy(tmp_path):
    """scan(x, dim, op): one einsum, map identity, reduce op, ``scan: dim``; counted as a
    sequential scan (n - 1 combines per row along dim); executed with numpy's accumulate."""
    src = """
def model(x: Tensor("B,N")):
    return {"s": scan(x, "N"), "p": scan(x, "N", op="mul"), "hi": scan(x, "B", op="max"),
            "lo": scan(x, "N", op="min")}
"""
    g = capture_file(program(tmp_path, src), jit=False)
    assert g.validation.status == "passed", g.validation.reason
    by_out = {n.outputs[0].tensor: n for n in g.nodes}
    summary = {t: (n.kind, n.map, n.reduce, n.scan, [str(a) for a in n.inputs], str(n.outputs[0]))
               for t, n in by_out.items()}
    assert summary == {
        "s": ("einsum", "identity", "add", "N", ["x[B, N]"], "s[B, N]"),
        "p": ("einsum", "identity", "mul", "N", ["x[B, N]"], "p[B, N]"),
        "hi": ("einsum", "identity", "max", "B", ["x[B, N]"], "hi[B, N]"),
        "lo": ("einsum", "identity", "min", "N", ["x[B, N]"], "lo[B, N]"),
    }
    B, N = 3, 5
    m = {n.name: solar_io.node_metrics(g, n) for n in g.nodes}
    for t in ("s", "p", "lo"):  # along N: N - 1 combines in each of the B rows
        assert (m[t].flops_vector, m[t].macs, m[t].transcendental, m[t].bytes) == (B * (N - 1), 0, 0, 2 * B * N * 4)
    assert m["hi"].flops_vector == N * (B - 1)
    from solar_io.frontends.loopir import Value, scan

    x = np.random.default_rng(2).standard_normal((B, N)).astype(np.float32)
    v = Value(("B", "N"), x.shape, "fp32", data=x)
    assert np.allclose(scan(v, "N").data, np.cumsum(x, axis=1), rtol=1e-6)
    assert np.allclose(scan(v, "N", op="mul").data, np.cumprod(x, axis=1), rtol=1e-6)
    assert np.array_equal(scan(v, "B", op="max").data, np.maximum.accumulate(x, axis=0))
    assert np.array_equal(scan(v, "N", op="min").data, np.minimum.accumulate(x, axis=1))
    assert scan(v, "N").data.dtype == np.float32 and scan(v, "N").dims == ("B", "N")
    bad = program(tmp_path, src.replace('op="mul"', 'op="sub"'))
    assert "scan op must be one of add, mul, max, min, got 'sub'" in capture_error(bad)
    bad = program(tmp_path, src.replace('scan(x, "B", op="max")', 'scan(x, "M", op="max")'))
    assert "has dims B,N, not M" in capture_error(bad)


SCATTER = """
V = Dim("V", 6)

def model(init: Tensor("V,N"), ids: Tensor("M", dtype="int64"), src: Tensor("M,N"),
          ids2: Tensor("M,N", dtype="int64"), z: Tensor("V", role="constant", value=0.0),
          ones: Tensor("M", role="constant", value=1.0)):
    return {"y": scatter_add(init, ids, src, "V"), "h": scatter_add(init, ids2, src, "V"),
            "count": scatter_add(z, ids, ones, "V")}

def get_inputs(rng):
    return {"ids": np.array([1, 4, 1, 0]), "ids2": rng.integers(0, 6, size=(4, 5))}
"""


def test_scatter_add_builtin_lifts_to_a_scatter_and_executes_like_numpy(tmp_path):
    """scatter_add(init, ids, src, dim): one einsum over src's space writing ``y[@ids, ..]``
    from ``init`` (format 1.1 scatter); repeated ids accumulate (validated against the
    reference executor, and executed against numpy's add.at)."""
    g = capture_file(program(tmp_path, "import numpy as np\n" + SCATTER), jit=False)
    assert g.validation.status == "passed", g.validation.reason
    by_out = {n.outputs[0].tensor: n for n in g.nodes}
    summary = {t: (n.kind, n.map, n.reduce, n.init, n.space, [str(a) for a in n.inputs], str(n.outputs[0]))
               for t, n in by_out.items()}
    assert summary == {
        "y": ("einsum", "identity", "add", "init", ("M", "N"), ["init[@ids, N]", "src[M, N]", "ids[M]"],
              "y[@ids, N]"),
        "h": ("einsum", "identity", "add", "init", ("M", "N"), ["init[@ids2, N]", "src[M, N]", "ids2[M, N]"],
              "h[@ids2, N]"),
        "count": ("einsum", "identity", "add", "z", ("M",), ["z[@ids]", "ones[M]", "ids[M]"], "count[@ids]"),
    }
    assert g.shape("y") == g.shape("h") == (6, 5) and g.shape("count") == (6,)
    M, N = 4, 5
    m = {n.name: solar_io.node_metrics(g, n) for n in g.nodes}
    assert all(m[t].macs == 0 and m[t].transcendental == 0 for t in m)
    # every point of src combines into the element it selects: M*N (M) adds
    assert (m["y"].flops_vector, m["h"].flops_vector, m["count"].flops_vector) == (M * N, M * N, M)
    # bytes: y and h are new outputs (format 1.5: none updates init in place), written whole (V*N), with
    # all of init read (a combine reads the selected elements, the copy the rest), src, the ids (int64);
    # count: z and ones are immediates, all V elements written
    V = 6
    assert m["y"].bytes == 4 * V * N * 2 + 4 * M * N + 8 * M
    assert m["h"].bytes == 4 * V * N * 2 + 4 * M * N + 8 * M * N
    assert m["count"].bytes == 4 * V + 8 * M
    from solar_io.frontends.loopir import Value, scatter_add

    rng = np.random.default_rng(3)
    init, s = rng.standard_normal((6, N)), rng.standard_normal((M, N))
    ids, ids2 = np.array([1, 4, 1, 0]), rng.integers(0, 6, size=(M, N))
    got = scatter_add(Value(("V", "N"), init.shape, "fp64", data=init), Value(("M",), ids.shape, "int64", data=ids),
                      Value(("M", "N"), s.shape, "fp64", data=s), "V")
    want = init.copy()
    np.add.at(want, ids, s)
    assert got.dims == ("V", "N") and np.allclose(got.data, want) and not np.allclose(want, init)
    assert np.allclose(got.data[1], init[1] + s[0] + s[2])  # a repeated id accumulates both rows
    got2 = scatter_add(Value(("V", "N"), init.shape, "fp64", data=init),
                       Value(("M", "N"), ids2.shape, "int64", data=ids2), Value(("M", "N"), s.shape, "fp64", data=s),
                       "V")
    want2 = init.copy()
    for i in range(M):
        for j in range(N):
            want2[ids2[i, j], j] += s[i, j]
    assert np.allclose(got2.data, want2)


@pytest.mark.parametrize("old, new, expect", [
    ('scatter_add(init, ids, src, "V")', 'scatter_add(init, ids, init, "V")',
     "scatter_add's source must have dims M,N of sizes [4, 5] (init's with V replaced by the ids' own dims), "
     "got V,N [6, 5]"),
    ('ids: Tensor("M", dtype="int64")', 'ids: Tensor("M")', "scatter_add's ids must have an integer dtype, got fp32"),
    ('scatter_add(init, ids2, src, "V")', 'scatter_add(init, ids2, src, "N")',
     "scatter_add's ids must not have the scattered dim N"),
    ('np.array([1, 4, 1, 0])', 'np.array([1, 6, 1, 0])', "scatter_add ids hold values in [0, 6], outside dim V"),
])
def test_scatter_add_errors(tmp_path, old, new, expect):
    p = program(tmp_path, "import numpy as np\n" + SCATTER.replace(old, new))
    msg = capture_error(p)
    assert msg.startswith("prog.py:") and expect in msg


def test_spec_scan_and_scatter_snippets_run_and_count_as_stated(tmp_path):
    """SPEC.md section 5's scan and scatter_add snippets capture, validate and count as its
    text says (sizes chosen here: the snippets declare none)."""
    import re

    from solar_io.frontends.loopir import SPEC_PATH

    sec = SPEC_PATH.read_text().split("## 5. Builtins outside kernels")[1].split("## 6.")[0]
    snippets = re.findall(r"```python\n(.*?)```", sec, re.S)
    assert len(snippets) == 2 and "scan(" in snippets[0] and "scatter_add(" in snippets[1]
    head = "import numpy as np\nfrom solar_io.frontends.loopir import *  # noqa: F403\n"
    Bs, Ss, Ds = 2, 7, 5
    p = tmp_path / "scan_snippet.py"
    p.write_text(head + f'B, S, D = Dim("B", {Bs}), Dim("S", {Ss}), Dim("D", {Ds})\n' + snippets[0])
    g = capture_file(p, jit=False)
    assert g.validation.status == "passed", g.validation.reason
    assert [(n.reduce, n.scan) for n in g.nodes] == [("add", "S"), ("max", "D")]
    m = [solar_io.node_metrics(g, n) for n in g.nodes]
    assert [x.flops_vector for x in m] == [Bs * Ds * (Ss - 1), Bs * Ss * (Ds - 1)]
    assert [x.bytes for x in m] == [2 * 4 * Bs * Ss * Ds] * 2
    Es, Hs, Ns = 9, 3, 4
    p = tmp_path / "scatter_snippet.py"
    p.write_text(head + f'E, H, N = Dim("E", {Es}), Dim("H", {Hs}), Dim("N", {Ns})\n' + snippets[1]
                 + f"\ndef get_inputs(rng):\n    return {{'dst': rng.integers(0, {Ns}, size={Es})}}\n")
    g = capture_file(p, jit=False)
    assert g.validation.status == "passed", g.validation.reason
    (n,) = g.nodes
    assert (str(n.outputs[0]), n.init, n.space) == ("agg[@dst, H]", "zeros", ("E", "H"))
    m = solar_io.node_metrics(g, n)
    # msg and dst read, E*H elements of agg written (at most N*H: E > N here), zeros is an immediate
    assert (m.flops_vector, m.bytes) == (Es * Hs, 4 * Es * Hs + 8 * Es + 4 * min(Es, Ns) * Hs)


def test_scatter_init_that_is_also_an_output_keeps_its_name(tmp_path):
    """A returned tensor is renamed to its key; a scatter that starts from it names it so
    in ``init`` too (the graph stays valid and validates)."""
    src = """
V = Dim("V", 6)

@kernel
def neg(x: Tensor("V,N"), y: Out("V,N")):
    for v in V:
        for n in N:
            y[v, n] = -x[v, n]

def model(x: Tensor("V,N"), ids: Tensor("M", dtype="int64"), s: Tensor("M,N")):
    a = neg(x)
    return {"a": a, "y": scatter_add(a, ids, s, "V")}

def get_inputs(rng):
    return {"ids": np.array([5, 0, 5, 2])}
"""
    g = capture_file(program(tmp_path, "import numpy as np\n" + src), jit=False)
    assert g.validation.status == "passed", g.validation.reason
    sc = g.node_map["y"]
    assert sc.init == "a" and [str(x) for x in sc.inputs] == ["a[@ids, N]", "s[M, N]", "ids[M]"]
    assert g.tensor_map["a"].role == "output"


def test_generated_declarations_are_constants_without_a_value():
    """``Tensor(..., generated=True)``: only a constant without a value, and only a boolean."""
    from solar_io.frontends.loopir import LoopIRError, Tensor

    assert Tensor("S,T", dtype="bool", role="constant", generated=True).generated is True
    for bad in (dict(role="input", generated=True), dict(role="constant", value=1.0, generated=True),
                dict(role="constant", generated="yes")):
        with pytest.raises(LoopIRError):
            Tensor("S,T", **bad)
