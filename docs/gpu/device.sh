#!/usr/bin/env bash
# The device side of docs/gpu/carry.sh: runs on the GPU device machine (an NVIDIA H200,
# the CUDA 13 runtime wheels in /opt/torch's venv, no network, no Rust).
#
#   bash .gpu/<k>/device.sh stash       calls 1 … N-1: keep this call's part in /tmp/persist
#   bash .gpu/<N>/device.sh run 'CMD'   the last call: unpack everything, then run CMD;
#                                       another `run` right after it (the machine still
#                                       warm) finds it unpacked and runs its CMD there
#
# CMD runs in a writable copy of the course ($QUEST_ROOT) with:
#   quest           the CUDA build, on PATH (and quest-before, when carry.sh had BEFORE)
#   QUEST_PREBUILT  the prebuilt exercise binaries (quest never calls cargo)
#   QUEST_HOME      a fresh progress file; QUEST_CACHE holds any MODELS carried
#   Q               /tmp/q, where it all lies; OUT, the folder whose files come back
#   python3         the device's, with mlx / mlx-lm 0.32.2 on MLX's CUDA build
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SITE=${SITE:-/opt/torch/.venv/lib/python3.12/site-packages}
mkdir -p /tmp/persist
cp "$HERE"/part-* /tmp/persist/
case ${1:-} in
  stash)
    ls -la /tmp/persist
    exit 0
    ;;
  run) shift ;;
  *)
    echo "usage: device.sh stash | device.sh run 'COMMANDS'" >&2
    exit 2
    ;;
esac
want=$(cat "$HERE/LAST" 2>/dev/null || echo 0)
have=$(ls /tmp/persist/part-* | wc -l)
if [ "$have" != "$want" ]; then
  echo "device.sh: /tmp/persist holds $have of $want parts; the earlier calls' stash did not reach this machine (it went back between calls?): make the calls again, back to back" >&2
  exit 3
fi
Q=/tmp/q
# A later `run` on the same warm machine with the same parts keeps what the first unpacked
# (and the progress file, the kept kernels and the course copy's state with it).
parts=$(cat /tmp/persist/part-* | md5sum | cut -c1-32)
if [ "$(cat "$Q/.unpacked" 2>/dev/null)" = "$parts" ]; then
  echo "device.sh: these parts are unpacked already in $Q (a later call): kept as they are"
else
  rm -rf "$Q"
  mkdir -p "$Q/bin"
  cat /tmp/persist/part-* | tar x -C "$Q"
  python3 -m pip install -q --no-index --no-deps --no-compile "$Q"/wheels/*.whl
  xz -dc "$Q/mlx.tar.xz" | tar x -C "$SITE"
  xz -dc "$Q/libs.tar.xz" | tar x -C "$SITE"
  xz -dc "$Q/bin.tar.xz" | tar x -C "$Q"
  xz -dc "$Q/course.tar.xz" | tar x -C "$Q"
  mv "$Q/quest" "$Q/bin/"
  if [ -e "$Q/quest-before" ]; then mv "$Q/quest-before" "$Q/bin/"; fi
  rm -f "$Q"/*.tar.xz
  if [ -d "$Q/models" ]; then mkdir -p "$Q/cache" && mv "$Q/models" "$Q/cache/"; fi
  echo "$parts" > "$Q/.unpacked"
fi
export PATH="$Q/bin:$PATH" LD_LIBRARY_PATH="$SITE/mlx/lib" Q OUT=${OUT:-/tmp/out}
export QUEST_ROOT="$Q/course" QUEST_PREBUILT="$Q/prebuilt" QUEST_HOME="$Q/home"
export QUEST_CACHE="$Q/cache" CARGO_TARGET_DIR="$Q/target" PYTHONUNBUFFERED=1
mkdir -p "$OUT"
python3 -c 'import mlx.core as mx; print("mlx", mx.__version__, mx.default_device())'
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
cd "$QUEST_ROOT"
bash -c "$*"
