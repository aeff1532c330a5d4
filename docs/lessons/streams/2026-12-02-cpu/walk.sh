#!/usr/bin/env bash
# The streams lesson as a learner walks it on the CPU (docs/lessons/walk.sh); the edit is
# docs/gpu/own_edit.py's (the loop handed the default stream, `Stream::new()`).
#   bash docs/lessons/streams/2026-12-02-cpu/walk.sh > docs/lessons/streams/2026-12-02-cpu/walk.txt 2>&1
exec bash "$(dirname "$0")/../../walk.sh" streams shows-here=no why=fences
