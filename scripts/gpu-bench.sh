#!/usr/bin/env bash
# Measures Flow Playground on a machine with a real GPU and no network, from
# binaries built beforehand on another machine of the same processor:
#
#   here:   scripts/gpu-bench.sh --build      (builds them into bench-bin/)
#   there:  scripts/gpu-bench.sh [bench-bin] [seconds a figure]
#
# It prints the adapter's name, `flowplay bench --backend gpu` (steps/s and
# compute dispatches a step for the spiral recipes, a coupling flow and the
# phi^4 lab's lattice flows, at several batch sizes, and the density on a
# 512 x 512 grid), the same recipes on the CPU for comparison, and the page's
# frame loop rendered offscreen by wgpu (examples/frame_bench.rs): ms a frame
# and steps/s while training.
#
# Needs there: the Vulkan loader (libvulkan1) and the vendor's Vulkan driver
# (for NVIDIA, the driver's nvidia_icd.json); nothing is downloaded. Where the
# driver's manifest is not in a standard place, point VK_DRIVER_FILES at it.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--build" ]; then
    # Built for speed, not for a small download: no LTO keeps a 2-core build
    # to minutes; the numerics are optimized the same (opt-level 3).
    CARGO_PROFILE_RELEASE_LTO=false \
    CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    CARGO_PROFILE_RELEASE_DEBUG=false \
        cargo build --release --locked --target-dir target/gpu-bench \
        --bin flowplay --example frame_bench
    mkdir -p bench-bin
    cp target/gpu-bench/release/flowplay target/gpu-bench/release/examples/frame_bench bench-bin/
    strip bench-bin/flowplay bench-bin/frame_bench 2>/dev/null || true
    ls -l bench-bin
    exit 0
fi

bin="${1:-bench-bin}"
seconds="${2:-2}"
for b in flowplay frame_bench; do
    [ -x "$bin/$b" ] || { echo "gpu-bench: $bin/$b is missing: run scripts/gpu-bench.sh --build first" >&2; exit 1; }
done
# wgpu warns without a runtime directory; any private one will do.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"

step() { printf '\n== [%dm%02ds] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

step "machine"
date -u
uname -m
nproc
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || echo "no nvidia-smi"

step "flowplay bench --backend gpu (batches 512, 8192, 65536; the lattice recipes at their own)"
"$bin/flowplay" bench --backend gpu --seconds "$seconds" --batch 512,8192,65536
step "the lattice recipes on the GPU at larger batches"
"$bin/flowplay" bench --backend gpu --seconds "$seconds" --only lattice --batch 64,256,1024,4096

step "flowplay bench --backend cpu, all cores (the same recipes, for comparison)"
"$bin/flowplay" bench --backend cpu --seconds "$seconds" --batch 512,8192

step "the page's frame loop, rendered offscreen (examples/frame_bench.rs)"
"$bin/frame_bench" 8

step "done"
