#!/usr/bin/env bash
# Runs every check of the project on a fresh machine of this kind, installing
# what it needs first: formatting, clippy (warnings denied, native and wasm32),
# the library's wasm32 build without the GPU (the CPU fallback), every native
# test (the GPU kernels' on Mesa's lavapipe Vulkan driver where there is no GPU,
# the app's panels through egui's kittest, exported bijx scripts run against
# bijx itself in a Python virtual environment), the browser check of the kernels
# under WebGPU in headless Chromium, and the built page end to end in headless
# Chromium with WebGPU on and off (screenshots in web/artifacts/).
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/tools.sh

step "toolchain"
rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
ensure_wasm_target

# lavapipe (Vulkan on the CPU) for the GPU tests; Chromium and its driver for
# the browser checks; Node.js and npm for the end-to-end tests
ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 || apt_install mesa-vulkan-drivers libvulkan1
ensure_apt chromium:chromium chromedriver:chromium-driver node:nodejs npm:npm
ensure_wasm_bindgen
ensure_trunk
# bijx 1.3.2 with jax and flax, for the exported scripts' round trip
ensure_bijx_venv

# wgpu warns without a runtime directory; any private one will do.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (warnings denied): everything, then the library and the CLI without the GPU"
cargo clippy --all-targets --locked -- -D warnings
# (the library and the tool alone: the tests' dev-dependencies need the GPU anyway)
cargo clippy --lib --bin flowplay --no-default-features --locked -- -D warnings

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
step "the web page: trunk build --release, then end to end in headless Chromium"
cargo fetch --locked
trunk build --release
(cd web && npm ci --no-audit --no-fund && node e2e.mjs) 2>&1 | tee "$log.e2e"
printf 'gzip size of the wasm: %s bytes\n' "$(gzip -9 -c dist/*.wasm | wc -c)"

# One closing line over every test binary.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed;?$/) p += $(i-1); if ($i ~ /^failed;?$/) f += $(i-1) } }
     END { printf "cargo: %d passed, %d failed\n", p, f }' "$log"
printf 'e2e: %d modes passed\n' "$(grep -c ': ok' "$log.e2e")"
rm -f "$log" "$log.e2e"
step "all checks passed"
