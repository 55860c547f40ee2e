#!/usr/bin/env bash
# JavaScript-side tests: builds the wasm modules (js/builds.js) into dist/, then runs every
# tests/js/*.test.mjs with Node's test runner two files at a time (each file is one single-threaded
# Node process; each works in its own temporary folder and port), then tests/browser/*.test.mjs two
# at a time (each starts its own Chromium and server; they spend most of their time waiting on
# pages: on a 2-core VM 170 s one at a time, 126 s two at a time, 129 s four at a time).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/build-wasm.sh || exit 1
log=/tmp/maskattn-node-test.log
node --test --test-concurrency=2 --test-reporter=spec tests/js/ 2>&1 | tee "$log"
js_status=${PIPESTATUS[0]}
node --test --test-concurrency=2 --test-reporter=spec tests/browser/ 2>&1 | tee -a "$log"
browser_status=${PIPESTATUS[0]}
# The plain summary lines scripts/test.sh counts (one pair per run; it adds them up).
grep -E '^ℹ (pass|fail) ' "$log" | sed 's/^ℹ /# /'
[ "$js_status" -eq 0 ] && [ "$browser_status" -eq 0 ]
