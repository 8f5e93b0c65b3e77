// kpool in a stock mlir-opt (Debian's, the LLVM/MLIR this build uses) as a
// plugin (libKPoolPlugin.so, tools/kpool-plugin): it parses, prints and
// verifies kpool IR, runs kpool's passes and the CPU pipeline, and gives
// the same output as kpool-opt. The GPU pipeline: mlir-opt-plugin-nvvm.mlir.
//
// Parse and print examples/serving_step.mlir: the same text as kpool-opt.
// RUN: mlir-opt --load-dialect-plugin=%kpool_plugin %kpool_src_root/examples/serving_step.mlir -o %t.stock
// RUN: kpool-opt %kpool_src_root/examples/serving_step.mlir -o %t.kpool
// RUN: diff %t.stock %t.kpool
// RUN: FileCheck %s --check-prefix=PARSE --input-file=%t.stock
// PARSE: func.func @serving_step(
// PARSE: kpool.ring_close kpool(4) head_dim(128) ins(
// PARSE: kpool.pool_offsets kpool(4) ins(
// PARSE: kpool.compress kpool(4) head_dim(128) ins(
// PARSE: kpool.seed_tail kpool(4) head_dim(128) ins(
//
// Verify: every verifier and parser diagnostic of the dialect's invalid
// tests, through the plugin.
// RUN: mlir-opt --load-dialect-plugin=%kpool_plugin %kpool_src_root/test/Dialect/KPool/invalid.mlir -split-input-file -verify-diagnostics
// RUN: mlir-opt --load-dialect-plugin=%kpool_plugin %kpool_src_root/test/Dialect/KPool/parse-errors.mlir -split-input-file -verify-diagnostics
//
// Lower with the CPU pipeline (a registered pipeline, options checked):
// the same module as kpool-opt's, and it translates to LLVM IR.
// RUN: mlir-opt --load-dialect-plugin=%kpool_plugin %kpool_src_root/examples/serving_step.mlir --pass-pipeline='builtin.module(kpool-lower-to-llvm{deallocate=false})' -o %t.stock.llvm
// RUN: kpool-opt %kpool_src_root/examples/serving_step.mlir --pass-pipeline='builtin.module(kpool-lower-to-llvm{deallocate=false})' -o %t.kpool.llvm
// RUN: diff %t.stock.llvm %t.kpool.llvm
// RUN: mlir-translate --mlir-to-llvmir %t.stock.llvm | FileCheck %s --check-prefix=IR
// IR: define {{.*}} @serving_step(ptr
//
// Single passes by name. Through a plugin, passes and pipelines are not
// command-line flags (mlir-opt builds its list of pass flags before it loads
// plugins): --pass-pipeline names them.
// RUN: mlir-opt --load-dialect-plugin=%kpool_plugin %kpool_src_root/examples/serving_step.mlir --pass-pipeline='builtin.module(kpool-fuse-step)' | FileCheck %s --check-prefix=FUSE
// FUSE: kpool.step kpool(4) head_dim(128)
// FUSE-NOT: kpool.compress
// RUN: not mlir-opt --load-dialect-plugin=%kpool_plugin %kpool_src_root/examples/serving_step.mlir --kpool-fuse-step 2>&1 | FileCheck %s --check-prefix=FLAG
// FLAG: Unknown command line argument '--kpool-fuse-step'
//
// A diagnostic, not an abort, for the pipeline in the wrong nesting.
// RUN: not mlir-opt --load-dialect-plugin=%kpool_plugin %kpool_src_root/examples/serving_step.mlir --pass-pipeline='builtin.module(func.func(kpool-lower-to-llvm))' 2>&1 | FileCheck %s --check-prefix=NEST
// NEST: error: kpool-lower-to-llvm must be nested in 'builtin.module'
//
// The pass plugin alone registers the passes and pipelines: on IR without
// kpool ops the CPU pipeline lowers the rest.
// RUN: mlir-opt --load-pass-plugin=%kpool_plugin %s --pass-pipeline='builtin.module(kpool-lower-to-llvm)' | FileCheck %s --check-prefix=PASS
// PASS: llvm.func @add_one(
// PASS: llvm.fadd
//
// Both plugins from the one library: registered once.
// RUN: mlir-opt --load-dialect-plugin=%kpool_plugin --load-pass-plugin=%kpool_plugin %kpool_src_root/examples/serving_step.mlir --pass-pipeline='builtin.module(kpool-lower-to-llvm{deallocate=false})' | diff - %t.kpool.llvm

func.func @add_one(%x: f32) -> f32 {
  %one = arith.constant 1.0 : f32
  %r = arith.addf %x, %one : f32
  return %r : f32
}
