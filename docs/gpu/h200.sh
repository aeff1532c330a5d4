#!/usr/bin/env bash
# quest's GPU benchmark, run on the device machine (an NVIDIA H200 with the CUDA 13
# runtime wheels in /opt/torch's venv, no network, no Rust). docs/benchmarks.md says how
# the pieces are made here and carried: the first call leaves part-aa in /tmp/persist;
# this one brings .gpu/b/{part-ab,quest.xz,mlx-*.whl,mlx_lm-*.whl}.
set -euo pipefail
SITE=/opt/torch/.venv/lib/python3.12/site-packages
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"

# MLX 0.32.2 for CUDA 13: the Python bindings and mlx-lm from their wheels, then the
# stripped mlx-cuda-13 tree (libmlx.so, its headers for run-time kernels, its BLAS) in
# the same site-packages, where libmlx's RPATH finds the nvidia/* runtime libraries.
python3 -m pip install -q --no-index --no-deps --no-compile .gpu/b/mlx-0.32.2-*.whl .gpu/b/mlx_lm-0.32.2-*.whl
cat /tmp/persist/part-aa .gpu/b/part-ab | xz -d | tar x -C "$SITE"
xz -dc .gpu/b/quest.xz > /tmp/quest && chmod +x /tmp/quest
export LD_LIBRARY_PATH="$SITE/mlx/lib" QUEST_ROOT="$PWD"
python3 -c 'import mlx.core as mx; print("mlx", mx.__version__, mx.default_device())'
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

# Rust: the hand loop and the pipelined loop on random 4-bit models of six public shapes,
# interleaved, and the fit of time per token = fixed + bytes / bandwidth.
/tmp/quest fit --shapes all --max-tokens "${TOKENS:-64}" --rounds "${ROUNDS:-5}" 2>&1 | tee "$OUT/rust-fit.txt"
cp target/quest-bench/fit-cuda.json "$OUT/"

# Python: the original lesson's Python hand loop and mlx-lm's generate_step on the same shapes and prompt.
PROMPT=$(python3 -c 'print(",".join(str(1 + (i * 7919) % 1000) for i in range(16)))')
/tmp/quest fit --configs > /tmp/configs.json
for shape in $(python3 -c 'import json; print(" ".join(json.load(open("/tmp/configs.json"))))'); do
  config=$(python3 -c 'import json, sys; print(json.dumps(json.load(open("/tmp/configs.json"))[sys.argv[1]]))' "$shape")
  python3 src/bench/peer.py --config "$config" --prompt-ids "$PROMPT" \
    --max-tokens "${TOKENS:-64}" --rounds "${ROUNDS:-5}" > "/tmp/py-$shape.json"
  python3 - "/tmp/py-$shape.json" "$shape" <<'PY'
import json, statistics, sys
d = json.load(open(sys.argv[1]))["results"]
print(sys.argv[2], {k: round(statistics.median(r["decode_tok_s"] for r in v), 1) for k, v in d.items()})
PY
done 2>&1 | tee "$OUT/python.txt"
python3 -c 'import json, glob, os; print(json.dumps({os.path.basename(f)[3:-5]: json.load(open(f)) for f in glob.glob("/tmp/py-*.json")}))' > "$OUT/py-all.json"

# The context slope: a full-attention model against the Qwen3.5 hybrid, growing context.
/tmp/quest slope 2>&1 | tee "$OUT/rust-slope.txt"
cp target/quest-bench/slope-cuda.json "$OUT/"
