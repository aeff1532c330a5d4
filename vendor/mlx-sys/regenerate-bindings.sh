#!/usr/bin/env bash
# quest patch: regenerates the committed Linux bindings (src/bindings.rs) from mlx-c's
# headers with bindgen. Needs libclang once (Debian: apt-get install libclang-dev).
#   ./regenerate-bindings.sh          rewrite src/bindings.rs
#   ./regenerate-bindings.sh --check  fail if src/bindings.rs is not what bindgen makes now
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out="$here/src/bindings.rs"
if [ "${1:-}" = "--check" ]; then out=$(mktemp --suffix=.rs); fi
cargo run --quiet --manifest-path "$here/bindgen-tool/Cargo.toml" \
  --target-dir "$here/../../target/bindgen" -- "$out"
if [ "${1:-}" = "--check" ]; then
  diff -u "$here/src/bindings.rs" "$out" && echo "src/bindings.rs is current"
fi
