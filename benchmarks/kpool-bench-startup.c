/*===- kpool-bench-startup.c - kernel set creation, cold and warm --------===*\
|*                                                                            *|
|* How long a new process waits for a kernel set, through the runtime's C API *|
|* (libKPoolRuntime.so: what Python loads): the first process compiles the    *|
|* configuration with the JIT (opened on demand) and stores it in the disk    *|
|* cache; the next ones load it from there, with no MLIR or LLVM loaded.      *|
|* Each run is a separate process (this program again, --child); the table   *|
|* gives the creation time each measured and the whole process's wall time,  *|
|* in a cache folder of its own (a fresh temporary one unless --cache-dir).  *|
|*                                                                            *|
|*   kpool-bench-startup [--config bf16:128:4] [--target cpu|cuda]           *|
|*                       [--runs N] [--cache-dir DIR]                        *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#define _GNU_SOURCE
#include "kpool-c/Packs.h"
#include "kpool-c/Runtime.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Whether libMLIR.so is in the process. */
static int mlirLoaded(void) {
  return dlopen("libMLIR.so.22.1", RTLD_NOLOAD | RTLD_LAZY) != NULL;
}

static int child(const char *config, int target) {
  char type[8];
  long dim, pool;
  KPoolElementType element;
  KPoolKernelSet *set = NULL;
  KPoolError *error;
  KPoolKernelCacheStatistics stats;
  double start, ms;
  if (sscanf(config, "%7[^:]:%ld:%ld", type, &dim, &pool) != 3)
    return 2;
  element = !strcmp(type, "f16")   ? KPOOL_F16
            : !strcmp(type, "f32") ? KPOOL_F32
                                   : KPOOL_BF16;
  KPoolKernelConfig c = kpoolKernelConfigDefault();
  c.target = target ? KPOOL_TARGET_CUDA : KPOOL_TARGET_CPU;
  c.elementType = element;
  c.headDim = dim;
  c.kpool = pool;
  start = now();
  error = kpoolKernelSetCreate(&c, &set);
  ms = now() - start;
  if (error) {
    fprintf(stderr, "kernel set: %s\n", kpoolErrorMessage(error));
    kpoolErrorDestroy(error);
    return 1;
  }
  kpoolKernelCacheGetStatistics(&stats, NULL);
  printf("%.3f %lld %lld %d\n", ms, (long long)stats.hits,
         (long long)stats.compiled, mlirLoaded());
  kpoolKernelSetDestroy(set);
  return 0;
}

/* Runs this program with --child; its creation time and its process's. */
static int run(const char *self, const char *config, const char *target,
               double *createMs, double *processMs, long *hits, long *compiled,
               int *mlir) {
  int fds[2];
  pid_t pid;
  char out[256] = {0};
  ssize_t n;
  int status;
  double start = now();
  if (pipe(fds) != 0)
    return 1;
  pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    execl(self, self, "--child", config, target, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  n = read(fds[0], out, sizeof out - 1);
  close(fds[0]);
  waitpid(pid, &status, 0);
  *processMs = now() - start;
  if (n <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return 1;
  return sscanf(out, "%lf %ld %ld %d", createMs, hits, compiled, mlir) != 4;
}

static int byValue(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  const char *config = "bf16:128:4", *target = "cpu", *dir = NULL;
  char self[4096], temp[] = "/tmp/kpool-bench-startup-XXXXXX";
  int runs = 5, i;
  ssize_t len;
  double coldCreate, coldProcess, warmCreate[64], warmProcess[64];
  long hits, compiled;
  int mlir;
  if (argc == 4 && !strcmp(argv[1], "--child"))
    return child(argv[2], !strcmp(argv[3], "cuda"));
  for (i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--config") && i + 1 < argc)
      config = argv[++i];
    else if (!strcmp(argv[i], "--target") && i + 1 < argc)
      target = argv[++i];
    else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
      runs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--cache-dir") && i + 1 < argc)
      dir = argv[++i];
    else {
      fprintf(stderr,
              "usage: %s [--config bf16:128:4] [--target cpu|cuda] "
              "[--runs N] [--cache-dir DIR]\n",
              argv[0]);
      return 2;
    }
  }
  if (runs < 1 || runs > 64)
    runs = 5;
  len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0)
    return 1;
  self[len] = 0;
  if (!dir) {
    if (!mkdtemp(temp)) {
      perror("mkdtemp");
      return 1;
    }
    dir = temp;
  }
  setenv("KPOOL_CACHE_DIR", dir, 1);
  unsetenv("KPOOL_DISABLE_CACHE");
  printf("kpool-bench-startup: %s, target %s, kpool %s, cache %s\n", config,
         target, kpoolGetVersion(), dir);
  if (run(self, config, target, &coldCreate, &coldProcess, &hits, &compiled,
          &mlir)) {
    fprintf(stderr, "the first run failed\n");
    return 1;
  }
  printf("  cold (compiles, stores):  kernel set %9.2f ms, process %9.2f ms"
         "  [hits %ld, compiled %ld, MLIR loaded %s]\n",
         coldCreate, coldProcess, hits, compiled, mlir ? "yes" : "no");
  for (i = 0; i < runs; ++i) {
    if (run(self, config, target, &warmCreate[i], &warmProcess[i], &hits,
            &compiled, &mlir)) {
      fprintf(stderr, "a warm run failed\n");
      return 1;
    }
    printf("  warm run %d (cache hit):   kernel set %9.2f ms, process %9.2f ms"
           "  [hits %ld, compiled %ld, MLIR loaded %s]\n",
           i + 1, warmCreate[i], warmProcess[i], hits, compiled,
           mlir ? "yes" : "no");
  }
  qsort(warmCreate, runs, sizeof(double), byValue);
  qsort(warmProcess, runs, sizeof(double), byValue);
  printf("  warm median: kernel set %.2f ms, process %.2f ms (cold %.0fx "
         "slower)\n",
         warmCreate[runs / 2], warmProcess[runs / 2],
         coldCreate / warmCreate[runs / 2]);
  if (dir == temp) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", temp);
    if (system(cmd) != 0)
      fprintf(stderr, "could not remove %s\n", temp);
  }
  return 0;
}
