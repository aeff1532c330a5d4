#!/usr/bin/env bash
# Builds docs/gpu/cupti_trace.cpp HERE (g++ and PyPI; the device has no network) against
# CUPTI 13.0 from PyPI, the CUDA 13.0 of the device's driver (580), and leaves in DEST the
# injection library and the libcupti it loads (found beside it: RUNPATH $ORIGIN), for a
# call to carry (measure.sh `steps` reads TRACE_LIB=DEST):
#
#   bash docs/gpu/trace_build.sh .trace
set -euo pipefail
DEST=$(realpath -m -- "${1:?usage: trace_build.sh DEST}")
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
(cd "$WORK" && python3 -m pip download -q --no-deps nvidia-cuda-cupti==13.0.85 \
  nvidia-cuda-crt==13.0.88 nvidia-cuda-runtime==13.0.96)
for w in "$WORK"/*.whl; do unzip -q -o "$w" -d "$WORK/w"; done
I=$WORK/w/nvidia/cu13/include
# The newest record of each kind the headers declare (CUPTI keeps the older ones as
# deprecated; it writes the newest).
newest() { grep -ho "} CUpti_Activity$1[0-9]*;" "$I/cupti_activity.h" | grep -o "CUpti_Activity$1[0-9]*" | sort -V | tail -1; }
mkdir -p "$DEST"
g++ -std=c++17 -O2 -shared -fPIC -Wall -Werror \
  -DKERNEL_RECORD="$(newest Kernel)" -DMEMCPY_RECORD="$(newest Memcpy)" -DMEMSET_RECORD="$(newest Memset)" \
  -I"$I" "$HERE/cupti_trace.cpp" -L"$WORK/w/nvidia/cu13/lib" -l:libcupti.so.13 \
  -Wl,-rpath,'$ORIGIN' -o "$DEST/libcupti_trace.so"
cp "$WORK/w/nvidia/cu13/lib/libcupti.so.13" "$DEST/"
top=$(git -C "$HERE" rev-parse --show-toplevel)
case $DEST in
  "$top"/*) # inside the checkout: kept out of git, as carry.sh keeps its parts
    rel=${DEST#"$top"/}
    exclude=$(cd "$top" && realpath "$(git rev-parse --git-common-dir)")/info/exclude # a worktree's too
    mkdir -p "$(dirname "$exclude")"
    grep -qxF "/$rel/" "$exclude" 2>/dev/null || echo "/$rel/" >> "$exclude" ;;
esac
ls -la "$DEST"
