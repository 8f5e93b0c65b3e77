#!/usr/bin/env bash
# Set-up, build and every test: the lit suite (dialect, conversions,
# pipelines, PTX assembled by ptxas, CPU execution, differential tests
# against the reference, the installed-package consumer, Python).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
"$root/scripts/build.sh" check-kpool
