#!/usr/bin/env bash
# Set-up (with what the tests use: setup.sh --tests), build and every test:
# the lit suite (dialect, conversions, pipelines, PTX assembled by ptxas, CPU
# execution, differential tests against the reference, the installed-package
# consumer, the wheel, Python and PyTorch).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh" --tests
"$root/scripts/build.sh"
"$root/scripts/build.sh" check-kpool
