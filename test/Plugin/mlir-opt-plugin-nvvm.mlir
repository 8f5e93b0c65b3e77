// REQUIRES: ptxas
// The GPU pipeline in a stock mlir-opt through the plugin: Debian's
// mlir-opt registers the GPU dialects' LLVM IR translations that
// gpu-module-to-binary needs, so kpool-lower-to-nvvm runs as in kpool-opt:
// the same PTX, which ptxas assembles (static level: no GPU here).
//
// RUN: mlir-opt --load-dialect-plugin=%kpool_plugin %kpool_src_root/examples/serving_step.mlir --pass-pipeline='builtin.module(kpool-lower-to-nvvm{format=isa})' -o %t.stock
// RUN: %python %kpool_src_root/utils/extract-ptx.py %t.stock --ptxas %ptxas --no-extern | FileCheck %s
// RUN: kpool-opt %kpool_src_root/examples/serving_step.mlir --pass-pipeline='builtin.module(kpool-lower-to-nvvm{format=isa})' -o %t.kpool
// RUN: %python %kpool_src_root/utils/extract-ptx.py %t.stock -o %t.stock.ptx
// RUN: %python %kpool_src_root/utils/extract-ptx.py %t.kpool -o %t.kpool.ptx
// RUN: diff %t.stock.ptx %t.kpool.ptx
// CHECK: @serving_step_kpool_step: ptxas ok
// CHECK-NOT: error
