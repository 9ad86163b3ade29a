#!/usr/bin/env bash
# Runs every check of the project on a fresh machine of this kind, installing
# what it needs first: formatting, clippy (warnings denied), the library's
# wasm32 build (the CPU fallback runs in the browser), and every test, the GPU
# kernels' included (on Mesa's lavapipe Vulkan driver where there is no GPU).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

step "toolchain"
rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
rustup target list --installed | grep -q '^wasm32-unknown-unknown$' || rustup target add wasm32-unknown-unknown

if ! ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1; then
    step "installing Mesa's Vulkan drivers (lavapipe) for the GPU tests"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mesa-vulkan-drivers libvulkan1
fi
# wgpu warns without a runtime directory; any private one will do.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (warnings denied), with and without the GPU feature"
cargo clippy --all-targets --locked -- -D warnings
cargo clippy --all-targets --no-default-features --locked -- -D warnings

step "the mathematics builds for wasm32-unknown-unknown (no GPU feature)"
cargo check --lib --target wasm32-unknown-unknown --no-default-features --locked

step "cargo test"
log=$(mktemp)
cargo test --locked --all-targets 2>&1 | tee "$log"
# One closing line over every test binary.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed;?$/) p += $(i-1); if ($i ~ /^failed;?$/) f += $(i-1) } }
     END { printf "cargo: %d passed, %d failed\n", p, f }' "$log"
rm -f "$log"
