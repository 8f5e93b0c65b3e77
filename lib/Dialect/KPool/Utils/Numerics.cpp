//===- Numerics.cpp - numeric choices every kpool backend shares ----------===//

#include "kpool/Dialect/KPool/Utils/Numerics.h"

#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;

void mlir::kpool::populateExpApproximationPatterns(
    RewritePatternSet &patterns) {
  populateMathPolynomialApproximationPatterns(patterns, [](StringRef name) {
    name.consume_front("math.");
    return name == "exp";
  });
}

int64_t mlir::kpool::poolRowVectorWidth(int64_t channels, int64_t maxWidth) {
  int64_t width = 1;
  while (width * 2 <= maxWidth && channels > 0 && channels % (width * 2) == 0)
    width *= 2;
  return width;
}
