#!/usr/bin/env bash
# Runs the test command on a fresh clone of this repository's HEAD while every
# core is kept busy by a CPU burner that this script starts and stops, and
# prints the wall time: the check that the tests follow progress, not the
# clock, and that the whole run fits CI's 90 minutes on a loaded machine.
#
#   bash scripts/busy-check.sh [burners]     (default: one burner per core)
#
# The clone goes to a temporary folder (its target/ starts empty: a cold
# build); installed tools (Chromium, Trunk, wasm-bindgen-cli) are reused.
# Set BUSY_CHECK_IDLE=1 to run the same cold clone without the burners.
set -euo pipefail
cd "$(dirname "$0")/.."

burners="${1:-$(nproc)}"
if [ "${BUSY_CHECK_IDLE:-0}" = 1 ]; then
    burners=0
fi
clone="$(mktemp -d)/flowplay"
git clone --quiet . "$clone"

pids=()
stop_burners() {
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
}
trap stop_burners EXIT
for _ in $(seq 1 "$burners"); do
    # a busy loop at the tests' own priority: each takes a core's full share
    (while :; do :; done) &
    pids+=("$!")
done
echo "busy-check: $burners CPU burners on $(nproc) cores; test command on a fresh clone in $clone"

start=$SECONDS
status=0
(cd "$clone" && CI=true bash .ci/run) || status=$?
elapsed=$((SECONDS - start))
stop_burners
printf 'busy-check: the test command %s after %dm%02ds with %d burners\n' \
    "$([ "$status" = 0 ] && echo passed || echo "FAILED (exit $status)")" \
    $((elapsed / 60)) $((elapsed % 60)) "$burners"
exit "$status"
