#!/usr/bin/env bash
# Installs what the aarch64 cross build and its tests under qemu need (as root, or through sudo):
# the cross compiler, qemu-user, and the arm64 builds of kvslim's libraries from Debian's
# multiarch packages. Idempotent: does nothing when everything is there.
# Used by scripts/test-arm.sh; see cmake/aarch64-linux-gnu.cmake.
set -euo pipefail
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
host=(g++-aarch64-linux-gnu qemu-user cmake ninja-build pkg-config nlohmann-json3-dev libcli11-dev)
arm=(libc6:arm64 libc6-dev:arm64 libstdc++-12-dev:arm64 libfmt-dev:arm64 libgtest-dev:arm64 libicu-dev:arm64
     libopenblas-dev:arm64 libcpp-httplib-dev:arm64 libssl-dev:arm64 zlib1g-dev:arm64
     libbrotli-dev:arm64)
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $sudo dpkg --add-architecture arm64
fi
missing=()
for p in "${host[@]}" "${arm[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
[ ${#missing[@]} -eq 0 ] && exit 0
# The arm64 package lists come with the first update after the architecture is added.
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
