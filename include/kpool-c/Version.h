/*===- kpool-c/Version.h - the kpool version through the C API ----*- C -*-===*\
|*                                                                            *|
|* The version of the runtime library (libKPoolRuntime.so, which              *|
|* libKPoolCAPI.so depends on) a program runs with, next to the version it    *|
|* was compiled against (KPOOL_VERSION_STRING, kpool/Version.h).              *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef KPOOL_C_VERSION_H
#define KPOOL_C_VERSION_H

#include "kpool/Version.h"

#ifndef KPOOL_CAPI_EXPORTED
#define KPOOL_CAPI_EXPORTED __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/// The library's version, "MAJOR.MINOR.PATCH" (static storage; never NULL).
KPOOL_CAPI_EXPORTED const char *kpoolGetVersion(void);

#ifdef __cplusplus
}
#endif

#endif /* KPOOL_C_VERSION_H */
