#!/usr/bin/env bash
# Builds the C++ code with AddressSanitizer and UndefinedBehaviorSanitizer
# into ${KPOOL_ASAN_BUILD_DIR:-build-asan} and runs, under them, the
# differential test, the C API tests (the random driver included) and the
# Python tests (the interpreter preloads the shared ASan runtime).
#
#   scripts/sanitize.sh            # configure once, build, run
#
# Kernels JIT-compiled at run time are not instrumented (the host code that
# validates, calls and owns them is). A finding fails the script.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${KPOOL_ASAN_BUILD_DIR:-$root/build-asan}"
flags="-fsanitize=address,undefined -fno-sanitize-recover=all -shared-libsan -fno-omit-frame-pointer -g"
asan_rt="$(clang-22 -print-file-name=libclang_rt.asan-x86_64.so)"
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DLLVM_USE_LINKER=lld \
    "-DCMAKE_C_FLAGS=$flags" "-DCMAKE_CXX_FLAGS=$flags" \
    "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined -shared-libsan" \
    "-DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=address,undefined -shared-libsan"
fi
ninja -C "$build" -j"${JOBS:-2}" kpool-differential kpool-capi-runtime-test \
  kpool-capi-ir-test kpool-capi-fuzz-test KPoolCAPI
# LeakSanitizer: kernel sets and MLIR's registries live for the whole
# process on purpose (never destroyed); report errors, not those.
# allocator_may_return_null: a huge allocation fails as it does without
# ASan (std::bad_alloc, which the runtime reports), instead of aborting.
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LD_LIBRARY_PATH="$(dirname "$asan_rt")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "== kpool-differential"
"$build/bin/kpool-differential" | tail -2
echo "== kpool-capi-runtime-test"
"$build/bin/kpool-capi-runtime-test" | tail -1
echo "== kpool-capi-ir-test"
"$build/bin/kpool-capi-ir-test" | tail -1
echo "== kpool-capi-fuzz-test"
"$build/bin/kpool-capi-fuzz-test" "${FUZZ_CALLS:-20000}" 5
echo "== python tests"
LD_PRELOAD="$asan_rt" PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$root/python" \
  KPOOL_CAPI_LIB="$build/lib/libKPoolCAPI.so" \
  /usr/bin/python3 -m pytest -q -p no:cacheprovider "$root/python/tests" | tail -2
echo "sanitizers: clean"
