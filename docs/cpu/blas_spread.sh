#!/usr/bin/env bash
# For course authors: how far the golden tests' logits move across OpenBLAS's kernel
# families. quest's OpenBLAS (scipy-openblas32, DYNAMIC_ARCH) picks its kernels for the CPU
# it runs on; another family sums in another order. This forces each family this CPU can
# run with OPENBLAS_CORETYPE (here only: tests and CI never set it), runs the golden tests
# (each prints `golden-diff: NAME D`) and writes, per comparison, the largest difference
# over all families. The tolerances beside the tests are set from that table.
#
#   bash docs/cpu/blas_spread.sh OUT_DIR [FAMILY...]
#
# FAMILY defaults to one of each sgemm kernel generation OpenBLAS has for x86-64 CPUs
# of the last fifteen years: SSE4 (Nehalem), AVX (Sandybridge), AVX2 (Haswell, Zen),
# AVX-512 (SkylakeX, Cooperlake). A family whose instructions this CPU lacks dies by
# SIGILL, and runs.txt says so. The comparisons are the golden tests whose matmuls run on
# the BLAS (dense float32; the quantized layouts run MLX's own kernels).
set -uo pipefail
OUT=${1:?usage: blas_spread.sh OUT_DIR [FAMILY...]}
shift
FAMILIES=${*:-Nehalem Sandybridge Haswell Zen SkylakeX Cooperlake}
FILTERS=${FILTERS:-"golden:: qwen3_5:: batch::smollm2_batches_match_mlx_lm_dense batch::qwen3_5_batches_match_mlx_lm blas::a_matmul_and_an_inverse_through_the_blas"}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
cargo test --no-run --test testsuite 2>/dev/null
{
  echo "# $(date -u +%Y-%m-%d) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs"
  echo "# OPENBLAS_CORETYPE=<family> QUEST_BLAS_THREADS=1 cargo test --test testsuite -- $FILTERS --nocapture --test-threads=1"
} > "$OUT/runs.txt"
for family in $FAMILIES; do
  log="$OUT/$family.log"
  # shellcheck disable=SC2086
  OPENBLAS_CORETYPE=$family QUEST_BLAS_THREADS=1 cargo test -q --test testsuite -- $FILTERS \
    --nocapture --test-threads=1 > "$log" 2>&1
  rc=$?
  chosen=$(grep -m1 -o 'quest-blas-probe:.*' "$log" | cut -d'|' -f2 | xargs)
  echo "$family rc=$rc ran: ${chosen:-?}; $(grep -c 'golden-diff: ' "$log") comparisons; $(grep -m1 '^test result' "$log")" >> "$OUT/runs.txt"
done
# Per comparison: the largest difference over the families, and which family gave it.
for log in "$OUT"/*.log; do
  family=$(basename "$log" .log)
  grep -o 'golden-diff: .*' "$log" | awk -v f="$family" '{print $2, $3, f}'
done | sort -k1,1 -k2,2g | awk '{max[$1]=$2; by[$1]=$3; n[$1]++} END {for (k in max) printf "%-44s %-12s %-12s %d families\n", k, max[k], by[k], n[k]}' | sort > "$OUT/spread.txt"
cat "$OUT/runs.txt" "$OUT/spread.txt"
