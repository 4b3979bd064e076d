"""Command-line options that several commands share, defined once (typer ``Annotated`` aliases).

A command names the alias as the parameter's type and gives its own default in the signature::

    def measure_command(..., warm: Warm = False, repeats: Repeats = 10) -> None: ...

so the flag, its checks (``min=1``) and its help read the same in every command that takes it.
Options whose meaning differs between commands (``--hw``, ``-o``, ``--cache-aware``, ``--dtype`` of a
graph) stay with their command.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..graph import FORMAT_VERSION

# ---------------------------------------------------------------- output
Json = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
OutFolder = Annotated[Path, typer.Option("-o", "--out", help="Output folder (created if needed).")]
Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="Print every file written (default: one line).")]
AllowNewer = Annotated[bool, typer.Option("--allow-newer", help="Rewrite a file of a newer minor format version as "
                                          f"{FORMAT_VERSION}, dropping the fields this solar-io does not know "
                                          "(refused without it).")]

# ---------------------------------------------------------------- the precision policy (bound, sweep)
StrictFp32 = Annotated[bool, typer.Option("--strict-fp32", help="Price fp32 matrix work at IEEE fp32 peaks only. "
                                          "Default: the faster of the fp32 and tf32 matrix peaks (PyTorch runs "
                                          "fp32 convolutions as TF32 on NVIDIA GPUs by default).")]
StrictDequant = Annotated[bool, typer.Option("--strict-dequant", help="Price dequantised operands as written. "
                                             "Default: a contraction whose operands are cast from "
                                             "fp8/fp6/fp4/int8/int4 (and scaled) runs at that low-precision peak, "
                                             "the chain inside its kernel.")]

# ---------------------------------------------------------------- timing a model (measure, check-bounds, report)
Compile = Annotated[bool, typer.Option("--compile", help="PyTorch: time torch.compile(model) instead of eager.")]
Warm = Annotated[bool, typer.Option("--warm", help="Do not flush the cache between timed runs (the SOL assumes "
                                    "operands start in DRAM, so the default flushes).")]
Repeats = Annotated[int, typer.Option("--repeats", min=1, help="Timed runs (at least; per model for folders).")]
MinTime = Annotated[str, typer.Option("--min-time", help="Keep timing (per model) until this much run time has "
                                      "accumulated; 0: exactly --repeats runs.")]
Device = Annotated[str, typer.Option("--device", help="cpu or cuda (CUDA events; the GPU's L2 is flushed).")]
TorchDtype = Annotated[str | None, typer.Option("--dtype", help="PyTorch: cast the model and inputs (bf16, fp16, "
                                                "fp32).")]
Workers = Annotated[int, typer.Option("--jobs", min=1, help="Worker processes for capture and bound (timing is "
                                      "serial).")]

# ---------------------------------------------------------------- a serving step (capture --phase, sweep --phase)
KvCache = Annotated[str, typer.Option("--cache", help="--phase: KV cache kind: dynamic (the step returns the grown "
                                      "cache), static (writes the new entries), paged (a block table of pages).")]
PageSize = Annotated[int, typer.Option("--page-size", help="--phase with --cache paged: positions per page.")]

__all__ = ["AllowNewer", "Compile", "Device", "Json", "KvCache", "MinTime", "OutFolder", "PageSize", "Repeats",
           "StrictDequant", "StrictFp32", "TorchDtype", "Verbose", "Warm", "Workers"]
