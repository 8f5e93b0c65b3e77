//===- Version.cpp - the kpool version through the C API ------------------===//

#include "kpool-c/Version.h"

const char *kpoolGetVersion(void) { return KPOOL_VERSION_STRING; }
