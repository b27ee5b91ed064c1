#!/usr/bin/env bash
# Cross-builds the kernel, forward-pass and press tests for aarch64 and runs them under
# qemu-user (qemu-aarch64), against the same references as on x86. qemu's default CPU ('max')
# has NEON, dotprod and i8mm, so every aarch64 level runs: tests/test_neon_kernels.cpp compares
# each level with the scalar one in one process, and the kernel tests run once per level
# (KVSLIM_ISA); the forward, KV-cache and press tests (minutes under emulation) run at the best
# level, i8mm (their scalar arithmetic is the same C++ as on x86).
#
#   scripts/test-arm.sh            # install (scripts/install-arm-deps.sh), build, run
#   KVSLIM_ARM_BUILD=dir           # build directory (default: build-arm)
#   KVSLIM_ARM_SKIP_INSTALL=1      # the packages are known to be there
#
# Emulated: this checks correctness only; speeds measured under qemu mean nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${KVSLIM_ARM_BUILD:-build-arm}
[ "${KVSLIM_ARM_SKIP_INSTALL:-0}" = 1 ] || bash scripts/install-arm-deps.sh
cmake -S . -B "$build" -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
      -DKVSLIM_BUILD_BENCHMARKS=OFF -DKVSLIM_LIBRARY_OPT=-O1 >/dev/null
ninja -C "$build" -j"${KVSLIM_JOBS:-2}" kvslim_kernel_tests

# The arm64 loader and libraries are Debian's multiarch ones (/lib/ld-linux-aarch64.so.1,
# /usr/lib/aarch64-linux-gnu), which qemu finds without a prefix. Not QEMU_LD_PREFIX /
# -L /usr/aarch64-linux-gnu (the cross compiler's libc): under Debian 12's qemu 7.2 a process
# started that way hangs at its first std::thread.
unset QEMU_LD_PREFIX
tests=$build/kvslim_kernel_tests
# The kernels' own tests (attention and the element-wise ops among them), at every level.
kernels='IsaKernels.*:*EveryLevel*:Ops*:*/Ops*:*QuantDot*:*Int8Gemm*:Quant*'
# The forward pass, the KV cache and the presses: everything else in the binary, less the
# storage accounting of every press (PressInvariants.KvBytesShrinkWithTheBudget: no arithmetic
# that differs by architecture, and a fifth of this run under emulation).
model="-$kernels:PressInvariants.KvBytesShrinkWithTheBudget/*:*/PressInvariants.KvBytesShrinkWithTheBudget/*"
failed=0
run() {
  local level=$1 filter=$2
  echo "== aarch64 under qemu, KVSLIM_ISA=$level: $filter"
  if ! KVSLIM_ISA=$level qemu-aarch64 "$tests" --gtest_filter="$filter" --gtest_brief=1 </dev/null; then
    echo "FAILED at $level"
    failed=1
  fi
}
for level in scalar neon dotprod i8mm; do run "$level" "$kernels"; done
run i8mm "$model"
exit $failed
