"""A simple two-level AccelForge architecture for a chip: DRAM, one on-chip buffer, MACs.

``solar-io export accelforge GRAPH --arch CHIP`` writes it next to the workload so that the
pair can be mapped at once. The levels:

- ``MainMemory``: the chip's DRAM, unbounded; holds every tensor that is not an intermediate
  (and may hold intermediates that do not fit on chip). Throughput: DRAM bandwidth.
- ``GlobalBuffer``: one buffer of the chip's on-chip capacity, the largest on-chip level of
  the spec (e.g. the L2 of a GPU) counted over all its instances. Throughput: its bandwidth
  when the spec publishes one, else unbounded.
- ``MAC``: one compute unit; throughput the dense bf16 (else fp16, fp32) matrix peak / 2.

AccelForge counts memory actions per bit (``bits_per_action`` 1), sizes in bits and
throughputs in actions per second. Energies are explicit per-action constants (pJ-scale,
in joules): order-of-magnitude figures for DRAM, SRAM and a 16-bit MAC, meant for relative
comparisons of mappings, not for absolute energy claims.
"""

from __future__ import annotations

from ..hardware.catalog import load_spec
from ..hardware.spec import HardwareSpec
from .common import comment_text, yaml_scalar

DRAM_J_PER_BIT = 4.0e-12
BUFFER_J_PER_BIT = 1.0e-13
MAC_J = 5.0e-13


def onchip_bytes(spec: HardwareSpec) -> float:
    """The largest on-chip level's total capacity in bytes (the DRAM level excluded)."""
    caps = [m.total_capacity for m in spec.memory[1:] if m.total_capacity]
    if not caps:
        raise ValueError(f"hardware {spec.name}: no on-chip memory level with a capacity")
    return max(caps)


def _mac_rate(spec: HardwareSpec) -> float | None:
    for dtype in ("bf16", "fp16", "fp32"):
        peak = spec.peak("matrix", dtype) or spec.peak("vector", dtype)
        if peak:
            return peak / 2.0
    return None


def _num(x: float | None) -> str:
    return "inf" if x is None else yaml_scalar(float(x))


def arch_text(chip: str, buffer_bytes: float | None = None) -> str:
    """The architecture YAML for hardware ``chip`` (a name, alias or spec file)."""
    from .. import __version__

    spec = load_spec(chip)
    cap = onchip_bytes(spec) if buffer_bytes is None else buffer_bytes
    big = max(spec.memory[1:], key=lambda m: m.total_capacity or 0) if len(spec.memory) > 1 else None
    dram_bw = spec.dram_bandwidth
    lines = [
        f"# AccelForge architecture written by solar-io {__version__}",
        f"# chip: {comment_text(spec.full_name)} ({spec.name}); buffer = "
        f"{comment_text(big.level if big else 'on-chip')} capacity {cap:.0f} bytes",
        "# units: sizes in bits, throughputs in actions/s, energies in J per action (1 bit)",
        "arch:",
        "  nodes:",
        "  - !Memory",
        "    name: MainMemory",
        "    size: inf",
        "    leak_power: 0",
        "    area: 0",
        "    tensors: {keep: ~Intermediates, may_keep: All}",
        "    actions:",
        f"    - {{name: read, energy: {_num(DRAM_J_PER_BIT)}, throughput: {_num(dram_bw * 8 if dram_bw else None)}}}",
        f"    - {{name: write, energy: {_num(DRAM_J_PER_BIT)}, throughput: {_num(dram_bw * 8 if dram_bw else None)}}}",
        "  - !Memory",
        "    name: GlobalBuffer",
        f"    size: {int(cap * 8)}",
        "    leak_power: 0",
        "    area: 0",
        "    tensors: {keep: ~MainMemory, may_keep: All}",
        "    actions:",
    ]
    bw = big.bandwidth * 8 if big is not None and big.bandwidth else None
    lines += [f"    - {{name: {a}, energy: {_num(BUFFER_J_PER_BIT)}, throughput: {_num(bw)}}}"
              for a in ("read", "write")]
    lines += [
        "  - !Compute",
        "    name: MAC",
        "    leak_power: 0",
        "    area: 0",
        "    actions:",
        f"    - {{name: compute, energy: {_num(MAC_J)}, throughput: {_num(_mac_rate(spec))}}}",
    ]
    return "\n".join(lines) + "\n"
