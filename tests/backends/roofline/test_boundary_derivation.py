"""One derivation per number: ``info``, ``bound``, reports, diffs and what-ifs print the same
boundary bytes, MACs and FLOPs (``GraphMetrics``, :func:`solar_io.views.boundary_bytes`).

The model has the structure of KernelBench level 3 ``49_Mamba2ReturnFinalState`` (written here at
tiny sizes, not copied): the input and both live parameters are read only through views
(reshape, permute), the output is a view (``select``) of a computed tensor, and a parameter (C)
feeds only a value that is never returned. ``info`` used to print a mask constant's 9 B "at the
boundary" for it (views counted as moving nothing) while ``bound`` priced the real boundary.
"""

from __future__ import annotations

import re
import textwrap
import warnings
from pathlib import Path

import pytest
import yaml

torch = pytest.importorskip("torch")

from solar_io import dump, graph_metrics  # noqa: E402
from solar_io.cli.main import main  # noqa: E402
from solar_io.dse.diff import totals  # noqa: E402
from solar_io.dse.whatif import prepare  # noqa: E402
from solar_io.frontends.torch.capture import capture_source  # noqa: E402
from solar_io.frontends.torch.loader import load_source  # noqa: E402
from solar_io.hardware import load_spec  # noqa: E402
from solar_io.reports.corpus import CaseOptions, prepare_case  # noqa: E402

BATCH, LENGTH, HEADS, D_HEAD, D_STATE, BLOCK = 2, 8, 2, 4, 3, 4
CHUNKS = LENGTH // BLOCK
FP32 = 4

MODEL = f'''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, batch, length, heads, d_head, d_state, block):
        super().__init__()
        self.block = block
        self.A = nn.Parameter(torch.randn(batch, length, heads))
        self.B = nn.Parameter(torch.randn(batch, length, heads, d_state))
        self.C = nn.Parameter(torch.randn(batch, length, heads, d_state))

    def segsum(self, x):
        t = x.size(-1)
        cs = torch.cumsum(x, dim=-1)
        seg = cs[..., :, None] - cs[..., None, :]
        mask = torch.tril(torch.ones(t, t, device=x.device, dtype=bool), diagonal=0)
        return seg.masked_fill(~mask, -torch.inf)

    def forward(self, X):
        b, l, h = self.A.shape
        c = l // self.block
        Xb = X.reshape(b, c, self.block, h, -1)
        Ab = self.A.reshape(b, c, self.block, h).permute(0, 3, 1, 2)
        Bb = self.B.reshape(b, c, self.block, h, -1)
        Cb = self.C.reshape(b, c, self.block, h, -1)
        A_cumsum = torch.cumsum(Ab, dim=-1)
        L = torch.exp(self.segsum(Ab))
        Y_diag = torch.einsum("bclhn,bcshn,bhcls,bcshp->bclhp", Cb, Bb, L, Xb)  # never returned
        decay = torch.exp(A_cumsum[:, :, :, -1:] - A_cumsum)
        states = torch.einsum("bclhn,bhcl,bclhp->bchpn", Bb, decay, Xb)
        states = torch.cat([torch.zeros_like(states[:, :1]), states], dim=1)
        decay_chunk = torch.exp(self.segsum(F.pad(A_cumsum[:, :, :, -1], (1, 0))))
        new_states = torch.einsum("bhzc,bchpn->bzhpn", decay_chunk, states)
        del Y_diag
        return new_states[:, -1]


def get_inputs():
    return [torch.rand({BATCH}, {LENGTH}, {HEADS}, {D_HEAD})]


def get_init_inputs():
    return [{BATCH}, {LENGTH}, {HEADS}, {D_HEAD}, {D_STATE}, {BLOCK}]
'''

#: By hand: x, A and B read once each (only through views) and the returned final state written once
#: (b, h, p, n). C, the ones/zeros (immediates) and the triangular mask of the tril (a generated
#: constant: made where it is used) move nothing: the returned value never depends on C.
HAND_BOUNDARY = FP32 * (BATCH * LENGTH * HEADS * D_HEAD + BATCH * LENGTH * HEADS + BATCH * LENGTH * HEADS * D_STATE
                        + BATCH * HEADS * D_HEAD * D_STATE)
#: MACs by hand: states (b c l h p n, a three-operand product: one MAC per point and one extra
#: multiply) and new_states (b z h p n over c + 1 chunks) at the one z the output selects (``[:, -1]``:
#: the other c chunks' states are never read, ``live_work``).
HAND_MACS = BATCH * CHUNKS * BLOCK * HEADS * D_HEAD * D_STATE + BATCH * 1 * HEADS * D_HEAD * D_STATE * (CHUNKS + 1)


def _cli(capsys: pytest.CaptureFixture, *args: str) -> str:
    try:
        main(list(args))
    except SystemExit as e:
        assert not e.code, capsys.readouterr().err
    return capsys.readouterr().out


@pytest.fixture(scope="module")
def mamba(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("mamba")
    src = folder / "mini_mamba.py"
    src.write_text(textwrap.dedent(MODEL))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = capture_source(load_source(src), validate=True).graph
    assert g.validation.status == "passed", g.validation.reason
    out = folder / "mini_mamba.yaml"
    dump(g, out)
    return src, out


def test_info_and_bound_print_one_boundary_equal_to_the_hand_count(mamba, capsys) -> None:
    src, graph = mamba
    info = _cli(capsys, "info", str(graph))
    fields = dict(re.findall(r"^(\w[\w.]*):\s+(\S+)", info, re.M))
    doc = yaml.safe_load(_cli(capsys, "bound", str(graph), "--hw", "h100-pcie", "--no-cache-aware", "-f", "yaml"))
    rep = doc["reports"][0]
    assert float(fields["boundary"]) == rep["totals"]["boundary_bytes"] == rep["fidelities"]["fused"]["bytes"]
    assert float(fields["boundary"]) == HAND_BOUNDARY
    assert int(fields["MACs"]) == rep["totals"]["macs"] == HAND_MACS
    assert float(fields["FLOPs"]) == rep["totals"]["flops_matrix"] + rep["totals"]["flops_vector"]


def test_reports_diffs_and_whatifs_read_the_same_boundary(mamba) -> None:
    src, graph = mamba
    from solar_io import load

    g = load(graph)
    assert graph_metrics(g).boundary_bytes == HAND_BOUNDARY
    assert totals(g).boundary_bytes == HAND_BOUNDARY  # solar-io diff
    assert prepare(g, "h100-pcie").boundary_bytes == pytest.approx(HAND_BOUNDARY, rel=1e-12)  # sweep --vary
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        case = prepare_case(src, load_spec("h100-pcie"), CaseOptions(cache_aware=False))  # report, check-bounds
    assert case.status == "ready", case.reason
    assert case.bytes_boundary == HAND_BOUNDARY and case.macs == HAND_MACS
