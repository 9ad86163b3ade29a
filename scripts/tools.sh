# Installs, at pinned versions, the tools the project's two commands need.
# Sourced by scripts/serve.sh and scripts/test.sh; each function skips what is
# already there at the right version.

WASM_BINDGEN_VERSION=0.2.130 # the same as the wasm-bindgen pin in Cargo.toml
TRUNK_VERSION=0.21.14        # 0.22 needs a newer rustc than this toolchain

# Each step prints the minutes and seconds since the script began, so a slow
# phase shows in the log (a measurement, never a limit).
step() { printf '\n== [%dm%02ds] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

ensure_wasm_target() {
    rustup target list --installed | grep -q '^wasm32-unknown-unknown$' \
        || rustup target add wasm32-unknown-unknown
}

# The tools only drive the build, so they are built for a quick install rather
# than for their own speed: Trunk's release profile (fat LTO, one codegen unit)
# alone took 10-16 minutes here.
quick_install() {
    CARGO_PROFILE_RELEASE_LTO=false \
    CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    CARGO_PROFILE_RELEASE_OPT_LEVEL=1 \
    CARGO_PROFILE_RELEASE_DEBUG=false \
        cargo install "$@"
}

ensure_wasm_bindgen() {
    if [ "$(wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen $WASM_BINDGEN_VERSION" ]; then
        step "installing wasm-bindgen-cli $WASM_BINDGEN_VERSION"
        # Without --locked: its own lock file pins a crate version crates.io no
        # longer serves. The version itself is pinned.
        quick_install wasm-bindgen-cli --version "=$WASM_BINDGEN_VERSION"
    fi
}

ensure_trunk() {
    if [ "$(trunk --version 2>/dev/null)" != "trunk $TRUNK_VERSION" ]; then
        step "installing trunk $TRUNK_VERSION (a few minutes on a cold machine)"
        quick_install trunk --version "=$TRUNK_VERSION" --locked
    fi
}

apt_install() {
    step "installing $*"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
}

# apt packages given as "command:package" pairs, installed when the command is missing.
ensure_apt() {
    local missing=()
    for pair in "$@"; do
        command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        apt_install "${missing[@]}"
    fi
}

# Python with the authors' JAX library, for the test that runs exported bijx
# scripts (tests/bijx_export.rs). The same pins as PIP_INSTALL in
# src/run/bijx_script.rs (a test checks they agree).
BIJX_PACKAGES="bijx==1.3.2 jax==0.10.2 jaxlib==0.10.2 flax==0.12.8"
BIJX_VENV=target/venv-bijx

ensure_bijx_venv() {
    if ! "$BIJX_VENV/bin/python" -c "import bijx, jax, flax; assert (bijx.__version__, jax.__version__, flax.__version__) == ('1.3.2', '0.10.2', '0.12.8')" 2>/dev/null; then
        step "installing $BIJX_PACKAGES in $BIJX_VENV"
        ensure_apt python3:python3
        python3 -m venv "$BIJX_VENV" 2>/dev/null || { apt_install python3-venv; python3 -m venv "$BIJX_VENV"; }
        "$BIJX_VENV/bin/pip" install --quiet --disable-pip-version-check $BIJX_PACKAGES
    fi
    export BIJX_PYTHON="$PWD/$BIJX_VENV/bin/python"
}
