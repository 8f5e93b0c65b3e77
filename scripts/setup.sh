#!/usr/bin/env bash
# Installs what kpool needs on a Debian 12 machine, when it is missing.
# Safe to run repeatedly: it only calls apt-get when a package is absent.
#
#   setup.sh            what building kpool and running the main job need
#   setup.sh --tests    that, and what the test suite uses: PyTorch (the
#                       tests of PyTorch tensors and kpool.torch run rather
#                       than skip) and pip, setuptools, wheel and venv (the
#                       wheel's test builds and installs the package)
#
# Anything beyond that installs only when asked for by name:
#   setup.sh --with <package>...
set -euo pipefail

packages=(
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  clang-22 lld-22 libomp-22-dev
  cmake ninja-build
  python3-numpy python3-pytest
)
while [ $# -gt 0 ]; do
  case "$1" in
    --tests)
      packages+=(python3-torch python3-pip python3-setuptools python3-wheel
                 python3-venv)
      ;;
    --with)
      shift
      while [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; do
        packages+=("$1")
        shift
      done
      continue
      ;;
    *)
      echo "usage: $0 [--tests] [--with <package>...]" >&2
      exit 2
      ;;
  esac
  shift
done

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
echo "setup: LLVM/MLIR $(/usr/lib/llvm-22/bin/llvm-config --version), $(cmake --version | head -1)"
