#!/usr/bin/env bash
# One short run of the solution: its report (the layers a forward call ran, the bytes a token).
#   BINS=DIR bash docs/lessons/your-model/2026-12-06-by-ops/report.sh > report.json
set -euo pipefail
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
QUEST_MAX_TOKENS=4 QUEST_REPORT="$W/r.json" "$BINS/decoder-solution" > /dev/null 2>&1
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(json.dumps({k: r[k] for k in ['model','backend','layers','weights','weight_bytes_per_token']}, indent=1))" "$W/r.json"
