//===- kpool-opt.cpp - mlir-opt with the kpool dialect --------------------===//

#include "kpool/InitAll.h"
#include "kpool/Tools/Version.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::kpool::setToolVersionPrinter("kpool-opt");
  mlir::registerAllPasses();
  mlir::kpool::registerAllPasses();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // gpu-module-to-binary needs the LLVM IR translations of the GPU dialects.
  mlir::registerAllGPUToLLVMIRTranslations(registry);
  mlir::kpool::registerAllDialects(registry);

  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "kpool optimizer driver\n", registry));
}
