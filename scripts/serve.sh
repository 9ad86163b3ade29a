#!/usr/bin/env bash
# Builds the web page and serves it at http://127.0.0.1:8080 (Ctrl-C stops),
# installing what it needs first: the wasm32 target, wasm-bindgen-cli and Trunk
# at pinned versions. Trunk runs offline (Trunk.toml), so nothing is downloaded
# at build time beyond the crates `cargo fetch` brings.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/tools.sh

ensure_wasm_target
ensure_wasm_bindgen
ensure_trunk
cargo fetch --locked
step "building the page (Trunk, release) and serving it"
echo "Flow Playground: open http://127.0.0.1:8080/ once the build below finishes"
exec trunk serve --release
