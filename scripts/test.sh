#!/usr/bin/env bash
# Runs every check of the project on a fresh machine of this kind, installing
# what it needs first: formatting, clippy (warnings denied, native and wasm32),
# the library's wasm32 build without the GPU (the CPU fallback), every native
# test, the GPU kernels' included (on Mesa's lavapipe Vulkan driver where there
# is no GPU), and the browser check of the kernels under WebGPU in headless
# Chromium.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

step "toolchain"
rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
rustup target list --installed | grep -q '^wasm32-unknown-unknown$' || rustup target add wasm32-unknown-unknown

packages=()
ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 || packages+=(mesa-vulkan-drivers libvulkan1)
command -v chromium >/dev/null || packages+=(chromium)
command -v chromedriver >/dev/null || packages+=(chromium-driver)
if [ ${#packages[@]} -gt 0 ]; then
    step "installing ${packages[*]} (lavapipe for the GPU tests, Chromium for the browser check)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}"
fi

WASM_BINDGEN_VERSION=0.2.130 # the same as the wasm-bindgen pin in Cargo.toml
if [ "$(wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen $WASM_BINDGEN_VERSION" ]; then
    step "installing wasm-bindgen-cli $WASM_BINDGEN_VERSION"
    # Without --locked: its own lock file pins a crate version crates.io no
    # longer serves. The version itself is pinned.
    cargo install wasm-bindgen-cli --version "=$WASM_BINDGEN_VERSION"
fi
# wgpu warns without a runtime directory; any private one will do.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (warnings denied), with and without the GPU feature"
cargo clippy --all-targets --locked -- -D warnings
cargo clippy --all-targets --no-default-features --locked -- -D warnings

step "wasm32: clippy with the GPU feature, and the mathematics alone (the CPU fallback)"
cargo clippy --all-targets --target wasm32-unknown-unknown --locked -- -D warnings
cargo check --lib --target wasm32-unknown-unknown --no-default-features --locked

step "cargo test"
log=$(mktemp)
cargo test --locked --all-targets 2>&1 | tee "$log"

step "the GPU kernels under WebGPU in headless Chromium (webdriver.json sets its flags)"
CHROMEDRIVER="$(command -v chromedriver)" \
CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
WASM_BINDGEN_TEST_TIMEOUT=300 \
    cargo test --locked --target wasm32-unknown-unknown --test web_gpu 2>&1 | tee -a "$log"
# One closing line over every test binary.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed;?$/) p += $(i-1); if ($i ~ /^failed;?$/) f += $(i-1) } }
     END { printf "cargo: %d passed, %d failed\n", p, f }' "$log"
rm -f "$log"
