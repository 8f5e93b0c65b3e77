//===- Runtime.h - the kpool runtime's C++ API, all of it -------*- C++ -*-===//
//
// An umbrella: includes the runtime's headers. Prefer the one you need.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_RUNTIME_RUNTIME_H
#define KPOOL_RUNTIME_RUNTIME_H

#include "kpool/ABI/KernelABI.h"
#include "kpool/ABI/StatusWord.h"
#include "kpool/ABI/View.h"
#include "kpool/Runtime/KernelSet.h"
#include "kpool/Runtime/PoolStore.h"
#include "kpool/Runtime/Status.h"

#endif // KPOOL_RUNTIME_RUNTIME_H
