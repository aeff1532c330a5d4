#!/usr/bin/env bash
# Builds quest for MLX's CUDA backend HERE (where cargo and PyPI are) and packs what a run
# on the GPU device machine needs (it has neither Rust nor network) into parts small
# enough for the device tool's calls (64 MiB a call, the sent checkout's files included).
#
#   bash docs/gpu/carry.sh DEST [LESSON...]
#
# DEST     a folder inside the checkout the device tool sends (e.g. .gpu, from the
#          checkout's root), ignored by git there: this script adds it to that
#          repository's .git/info/exclude. It is emptied first.
# LESSON   lessons whose exercise binaries to prebuild (default: mlx-path): the exercise as
#          it is in COURSE, the lesson's starting code and the solution, release profile;
#          `none` prebuilds none (for runs of `quest fit` and the Python peers alone).
# COURSE   the course folder (QUEST_ROOT) whose exercises are built, e.g. a copy in
#          which the learner's edit is made (default: this checkout).
# MODELS   real models to carry from quest's cache as well (e.g. `smollm2-135m-instruct`).
# PART_MB  size of each part in MiB; one call carries one DEST/<n>. Default: what a call
#          may carry (64 MiB) less what the checkout sends with it (its tracked and
#          untracked-not-ignored files, weighed now) and 2 MiB to spare.
# BEFORE   another CUDA build of quest (e.g. the last commit's) to carry beside it, on the
#          device's PATH as `quest-before`: an A/B run names it (measure.sh alt's OFF_BIN).
# MLX_PACKED  an existing `tar c mlx | xz` of the same wheel's mlx folder (libmlx.so
#          stripped), to skip packing it again (it takes minutes).
#
# It leaves DEST/1 … DEST/N, each with its parts and a copy of device.sh. Make the N device
# calls back to back (the machine stays warm only 30 s between calls), each naming its
# folder in `carry`:
#   calls 1 … N-1:  bash .gpu/<k>/device.sh stash
#   call N:         bash .gpu/<N>/device.sh run 'bash docs/gpu/measure.sh flow'
# (`.gpu` being DEST relative to the checkout). device.sh says what the command finds there.
set -euo pipefail
DEST=$(realpath -m -- "${1:?usage: carry.sh DEST [LESSON...]}")
shift
LESSONS=${*:-mlx-path}
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
COURSE=${COURSE:-$REPO}
# The device tool sends the checkout's files with every call: the parts get what is left.
SENT_BYTES=$(cd "$REPO" && git ls-files -z --cached --others --exclude-standard \
  | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
PART_MB=${PART_MB:-$(( 64 - 2 - (SENT_BYTES + 1048575) / 1048576 ))}
[ "$PART_MB" -ge 8 ] || { echo "carry.sh: the checkout sends $SENT_BYTES bytes with every call, too much to leave room for parts: remove large untracked files or set PART_MB" >&2; exit 1; }
echo "carry.sh: the checkout sends $(( SENT_BYTES / 1024 )) KiB a call; parts of $PART_MB MiB" >&2
TARGET=$REPO/target/cuda
lock() { if [ -e /tmp/quest-cpu.lock ]; then flock -s /tmp/quest-cpu.lock "$@"; else "$@"; fi; }

# 1. quest for CUDA (release), and the exercises as that quest would build them. A CPU
#    quest drives the prebuild: a CUDA one cannot start without the NVIDIA driver.
(cd "$REPO" && QUEST_MLX=cuda CARGO_TARGET_DIR=$TARGET lock cargo build --release --bin quest)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/payload/prebuilt"
if [ "$LESSONS" != none ]; then
  (cd "$REPO" && lock cargo build --bin quest)
  (cd "$REPO" && QUEST_MLX=cuda CARGO_TARGET_DIR=$TARGET QUEST_ROOT=$COURSE \
    lock "$REPO/target/debug/quest" dev prebuild $LESSONS --release --out "$WORK/payload/prebuilt")
fi

# 2. The payload: quest, the prebuilt exercises (stripped, xz), the course as COURSE has
#    it (lessons, exercises, solutions, the GPU scripts, the Python peer), the MLX tree
#    the build linked (libmlx stripped; its headers stay: MLX compiles CUDA kernels at run
#    time), the mlx and mlx-lm wheels for the Python peers, and any MODELS.
P=$WORK/payload
strip -o "$P/quest" "$TARGET/release/quest"
if [ -n "${BEFORE:-}" ]; then strip -o "$P/quest-before" "$BEFORE"; fi
for f in "$P"/prebuilt/*; do [ -e "$f" ] || continue; case $f in *.txt) ;; *) strip "$f" ;; esac; done
mkdir -p "$WORK/course/docs/gpu" "$WORK/course/src/bench"
tar c -C "$COURSE" lessons exercises solutions | tar x -C "$WORK/course"
cp "$REPO"/docs/gpu/*.sh "$REPO"/docs/gpu/*.py "$REPO"/docs/gpu/*.cu "$WORK/course/docs/gpu/"
cp "$REPO/src/bench/peer.py" "$WORK/course/src/bench/"
tar c -C "$WORK" course | xz -6 > "$P/course.tar.xz"
rm -rf "$WORK/course"
WHEELROOT=$(ls -d "$TARGET"/release/build/mlx-sys-*/out/mlx-cuda-13-0.32.2 | head -1)
if [ -n "${MLX_PACKED:-}" ]; then
  cp "$MLX_PACKED" "$P/mlx.tar.xz"
else
  mkdir -p "$WORK/mlx"
  cp -r "$WHEELROOT/mlx" "$WORK/mlx/"
  rm -rf "$WORK/mlx/mlx/share"
  strip --strip-unneeded "$WORK/mlx/mlx/lib/libmlx.so"
  tar c -C "$WORK/mlx" mlx | xz -6 -T2 > "$P/mlx.tar.xz"
  rm -rf "$WORK/mlx"
fi
# libmlx's own BLAS and LAPACK (its RPATH: ../../mlx_cuda_13.libs).
tar c -C "$WHEELROOT" mlx_cuda_13.libs | xz -6 > "$P/libs.tar.xz"
(cd "$P" && python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --platform manylinux_2_35_x86_64 -d wheels mlx==0.32.2 mlx-lm==0.32.2)
for model in ${MODELS:-}; do
  mkdir -p "$P/models"
  cp -r "${QUEST_CACHE:-$HOME/.cache/quest}/models/$model" "$P/models/"
done
(cd "$P" && tar cf - quest $([ -n "${BEFORE:-}" ] && echo quest-before) prebuilt) | xz -6 > "$WORK/bin.tar.xz"
rm -rf "$P/quest" "$P/quest-before" "$P/prebuilt"
mv "$WORK/bin.tar.xz" "$P/"

# 3. One tar, split in parts; DEST/<n> holds the n-th part and the device-side runner.
rm -rf "$DEST"
mkdir -p "$DEST"
(cd "$P" && tar cf - .) | split -b "${PART_MB}M" -d -a 2 - "$DEST/part-"
n=0
for part in "$DEST"/part-*; do
  n=$((n + 1))
  mkdir -p "$DEST/$n"
  mv "$part" "$DEST/$n/"
  cp "$HERE/device.sh" "$DEST/$n/"
done
echo "$n" > "$DEST/$n/LAST"
top=$(git -C "$DEST/.." rev-parse --show-toplevel 2>/dev/null || true)
if [ -n "$top" ]; then
  rel=${DEST#"$top"/}
  exclude=$(cd "$top" && realpath "$(git rev-parse --git-common-dir)")/info/exclude
  mkdir -p "$(dirname "$exclude")"
  grep -qxF "/$rel/" "$exclude" 2>/dev/null || echo "/$rel/" >> "$exclude"
fi
du -sh "$DEST"/*
echo "carry.sh: $n calls, back to back: carry=[\"${rel:-DEST}/<k>\"], then the last runs device.sh run '…'"
