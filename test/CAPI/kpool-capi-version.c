/*===- kpool-capi-version.c - the version through the C API --------------===*\
|*                                                                            *|
|* kpoolGetVersion() is the version the project declares (lit's            *|
|* %kpool_version, from project(VERSION)), equal to the header's            *|
|* KPOOL_VERSION_STRING and to its parts.                                    *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

// RUN: kpool-capi-version-test | FileCheck %s -DVERSION=%kpool_version

#include "kpool-c/Version.h"

#include <stdio.h>
#include <string.h>

#define STR2(x) #x
#define STR(x) STR2(x)

int main(void) {
  const char *version = kpoolGetVersion();
  // CHECK: library: [[VERSION]]
  printf("library: %s\n", version);
  // CHECK-NEXT: header: same
  printf("header: %s\n",
         strcmp(version, KPOOL_VERSION_STRING) == 0 ? "same" : "different");
  // CHECK-NEXT: parts: same
  printf("parts: %s\n",
         strcmp(KPOOL_VERSION_STRING,
                STR(KPOOL_VERSION_MAJOR) "." STR(KPOOL_VERSION_MINOR) "." STR(
                    KPOOL_VERSION_PATCH)) == 0
             ? "same"
             : "different");
  return 0;
}
