#!/usr/bin/env bash
# JavaScript-side tests: builds the wasm modules (js/builds.js) into dist/, then runs every
# tests/js/*.test.mjs and tests/browser/*.test.mjs with Node's test runner (one file at a time:
# the machine has 2 cores and the browser tests start Chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build-wasm.sh
node --test --test-concurrency=1 --test-reporter=spec tests/js/ tests/browser/ 2>&1 | tee /tmp/maskattn-node-test.log
status=${PIPESTATUS[0]}
# The plain summary lines scripts/test.sh counts.
grep -E '^ℹ (pass|fail) ' /tmp/maskattn-node-test.log | sed 's/^ℹ /# /'
exit "$status"
