#!/usr/bin/env bash
# Zero-violation check on a GPU (issue 10): capture -> bound on the H200 spec -> measure with CUDA
# events (the L2 flushed between runs), over the PyTorch corpus and the SOL stress models, in bf16
# and fp32. Writes benchmarks/results/<date>-<gpu>-<dtype>.yaml and prints the summaries.
# Run from the repository root on a machine with one CUDA GPU, after `make venv`:
#   bash benchmarks/gpu_check_bounds.sh [hardware/h200-sxm.yaml]
set -u
SPEC=${1:-hardware/h200-sxm.yaml}
PY=${PY:-.venv/bin/python}
GPU=$($PY -c "import torch; print(torch.cuda.get_device_name().replace(' ', '-'))") || exit 1
DAY=$(date +%Y-%m-%d)
mkdir -p benchmarks/results
status=0
for DT in bf16 fp32; do
  OUT="benchmarks/results/${DAY}-${GPU}-${DT}.yaml"
  echo "== $GPU $DT -> $OUT"
  $PY -m solar_io check-bounds tests/models benchmarks/sol_models --hw "$SPEC" --device cuda --dtype "$DT" \
      --repeats 20 --min-time 0.1s -o "$OUT" || status=$?
done
exit $status
