#!/usr/bin/env bash
# Installs what kpool needs on a Debian 12 machine, when it is missing.
# Safe to run repeatedly: it only calls apt-get when a package is absent.
set -euo pipefail

packages=(
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  clang-22 lld-22 libomp-22-dev
  cmake ninja-build
  python3-numpy python3-pytest
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian's CPU PyTorch, for the tests of PyTorch tensors and kpool.torch
# (python/tests/test_torch.py, skipped without it): optional, so a machine
# without it still builds and tests everything else.
if ! dpkg-query -W -f='${Status}' python3-torch 2>/dev/null | grep -q "install ok installed"; then
  echo "setup: installing python3-torch (optional)"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  { [ ${#missing[@]} -gt 0 ] || $SUDO apt-get update -qq; } &&
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-torch >/dev/null ||
    echo "setup: python3-torch is not available; the PyTorch tests will be skipped"
fi
echo "setup: LLVM/MLIR $(/usr/lib/llvm-22/bin/llvm-config --version), $(cmake --version | head -1)"
