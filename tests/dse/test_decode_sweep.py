"""A sweep of decode steps over batch and kv_len: the classic decode roofline (issue 18 item 4).

Model: ``examples/models/llama_kv.py`` at its small defaults (fp32; vocabulary 256, width 64, two
layers of 4 query / 2 key-value heads of 16, feed-forward 160), static cache. Per step, by hand:
weights W(B) = 4 * (2 * 43136 + 64 + 64 * 256 + 64 * B) bytes (every weight; the embedding at the
B token rows), cache C(B, L) = 4 * 2 layers * 2 (k, v) * B * 2 heads * 16 * (L + 1) bytes (L cached
positions read, one written).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")


from paths import ROOT

from solar_io.dse.decode import roofline_table, step_traffic  # noqa: E402
from solar_io.dse.sweep import SweepError, run_sweep  # noqa: E402

EXAMPLE = ROOT / "examples" / "models" / "llama_kv.py"


def weights(b: int) -> int:
    return 4 * (2 * 43136 + 64 + 64 * 256 + 64 * b)


def cache(b: int, kv_len: int) -> int:
    return 4 * 2 * 2 * b * 2 * 16 * (kv_len + 1)


def test_decode_sweep_splits_bytes_per_token_into_weights_and_cache():
    r = run_sweep(EXAMPLE, {"batch": [1, 16], "kv_len": [8, 2048]}, ["h100-sxm"], progress=False,
                  step={"phase": "decode", "cache": "static"})
    assert not r.failures and r.step and "bytes_per_token" in r.columns
    fused = {(row["batch"], row["kv_len"]): row for row in r.rows if row["fidelity"] == "fused"}
    assert len(fused) == 4
    for (b, kv), row in fused.items():
        assert row["tokens"] == b
        assert row["weight_bytes"] == weights(b) and row["cache_bytes"] == cache(b, kv)
        assert row["bytes"] >= row["weight_bytes"] + row["cache_bytes"]  # + token ids, logits, inv_freq
        assert row["tokens_per_s"] == pytest.approx(b / row["sol_s"])
    # batch 1, short context: the weights dominate; long context or large batch: the cache
    assert fused[(1, 8)]["dominated_by"] == "weights"
    assert fused[(1, 2048)]["dominated_by"] == "cache" and fused[(16, 2048)]["dominated_by"] == "cache"
    # the weights' bytes per token fall as 1 / batch; the cache's per token stay
    assert fused[(16, 8)]["weight_bytes"] / 16 < fused[(1, 8)]["weight_bytes"] / 4
    assert fused[(16, 2048)]["cache_bytes"] / 16 == fused[(1, 2048)]["cache_bytes"]
    text = roofline_table(r.rows, ["batch", "kv_len"])
    assert text.startswith("decode roofline") and len(text.splitlines()) == 2 + 4


def test_step_traffic_is_none_without_a_step(tmp_path: Path):
    from solar_io.frontends.torch.capture import capture_file

    assert step_traffic(capture_file(EXAMPLE, validate=False)) is None


def test_bad_step_in_a_sweep_fails_once():
    from solar_io.frontends.common.errors import InputSpecError

    with pytest.raises(InputSpecError, match="--kv-len"):
        run_sweep(EXAMPLE, {"batch": [1, 2]}, ["h100-sxm"], progress=False, step={"phase": "decode"})
    with pytest.raises(SweepError, match="no sweepable parameter"):
        run_sweep(EXAMPLE, {"width": [1], "kv_len": [4]}, ["h100-sxm"], progress=False, step={"phase": "decode"})
