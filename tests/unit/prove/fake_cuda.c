/*
 * A fake libcuda for the mltune-gpu-loop tests: the CUDA driver entry points
 * the helper calls, answering from the key=value file named by
 * $MLTUNE_FAKE_CUDA, read at cuInit (no variable or no file: the defaults).
 * Plain C with no library but libc.
 *
 *   devices=N       cuDeviceGetCount's answer (default 1)
 *   name=TEXT       cuDeviceGetName's answer (default "Fake CUDA GPU")
 *   fail=NAME       that call (cuLaunchKernel, cuMemAlloc, ...) fails
 *   fail_code=N     with this CUresult (default 700, CUDA_ERROR_ILLEGAL_ADDRESS)
 *   sleep_us=N      cuStreamSynchronize sleeps N microseconds
 *   log=PATH        one line per call, its name, appended to PATH
 *
 * Host and device memory are malloc'd: the copy writes the device buffer,
 * the "kernel" increments the int its one parameter points to. Handles,
 * allocations and registrations are checked: an unknown or freed one
 * answers an error, as the driver does.
 */
#define _POSIX_C_SOURCE 200809L /* open(O_CLOEXEC), nanosleep */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;

enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
  CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
};

static const struct {
  CUresult rc;
  const char *name, *text;
} errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "pointer does not correspond to a registered memory region"},
};

static int initialized;
static int ndevices = 1;
static char device_name[128] = "Fake CUDA GPU";
static char fail_name[64];
static CUresult fail_code = CUDA_ERROR_ILLEGAL_ADDRESS;
static long sleep_us;
static char log_path[4096];

/* One object per handle kind; the counts say how many are live. */
static struct CUctx_st { int retained; } contexts[16];
static int current_ctx = -1;
static struct CUstream_st { int live; } stream;
static struct CUmod_st {
  int live;
  const char *image;
} module;
static struct CUfunc_st { int live; } function;

#define MAX_BLOCKS 64
static struct block {
  void *p;
  size_t size;
  int kind; /* 1 device, 2 pinned host, 3 registered */
} blocks[MAX_BLOCKS];

static void log_call(const char *name) {
  char line[128];
  int fd, n;

  if (log_path[0] == '\0')
    return;
  fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return;
  n = snprintf(line, sizeof(line), "%s\n", name);
  if (write(fd, line, (size_t)n) != n) {
    /* a test reading the log finds the line missing */
  }
  close(fd);
}

/* "cuMemAlloc_v2" and "cuMemAlloc" are one call for fail=. */
static int same_call(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);

  if (la > 3 && strcmp(a + la - 3, "_v2") == 0)
    la -= 3;
  if (lb > 3 && strcmp(b + lb - 3, "_v2") == 0)
    lb -= 3;
  return la == lb && strncmp(a, b, la) == 0;
}

/* Logs the call; its configured failure, else 0. */
static CUresult enter(const char *name) {
  log_call(name);
  if (fail_name[0] != '\0' && same_call(fail_name, name))
    return fail_code;
  return CUDA_SUCCESS;
}

static int in_context(void) {
  return initialized && current_ctx >= 0 && contexts[current_ctx].retained > 0;
}

static struct block *find_block(const void *p, int kind) {
  int i;

  for (i = 0; i < MAX_BLOCKS; i++)
    if (blocks[i].p == p && blocks[i].kind == kind && p != NULL)
      return &blocks[i];
  return NULL;
}

static struct block *new_block(void *p, size_t size, int kind) {
  int i;

  for (i = 0; i < MAX_BLOCKS; i++) {
    if (blocks[i].kind == 0) {
      blocks[i].p = p;
      blocks[i].size = size;
      blocks[i].kind = kind;
      return &blocks[i];
    }
  }
  return NULL;
}

static void read_config(void) {
  const char *path = getenv("MLTUNE_FAKE_CUDA");
  char line[4096];
  FILE *f;

  if (!path || !(f = fopen(path, "re")))
    return;
  while (fgets(line, sizeof(line), f)) {
    char *eq = strchr(line, '='), *v;

    line[strcspn(line, "\n")] = '\0';
    if (!eq)
      continue;
    *eq = '\0';
    v = eq + 1;
    if (strcmp(line, "devices") == 0)
      ndevices = atoi(v);
    else if (strcmp(line, "name") == 0)
      snprintf(device_name, sizeof(device_name), "%s", v);
    else if (strcmp(line, "fail") == 0)
      snprintf(fail_name, sizeof(fail_name), "%s", v);
    else if (strcmp(line, "fail_code") == 0)
      fail_code = atoi(v);
    else if (strcmp(line, "sleep_us") == 0)
      sleep_us = atol(v);
    else if (strcmp(line, "log") == 0)
      snprintf(log_path, sizeof(log_path), "%s", v);
  }
  fclose(f);
}

CUresult cuInit(unsigned flags) {
  CUresult rc;

  read_config();
  rc = enter("cuInit");
  if (rc != CUDA_SUCCESS)
    return rc;
  if (flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  initialized = 1;
  return CUDA_SUCCESS;
}

/* cuGetErrorName and cuGetErrorString: the error's name or its text. */
static CUresult error_entry(const char *call, CUresult error, int text, const char **p) {
  size_t i;

  log_call(call);
  for (i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
    if (errors[i].rc == error) {
      *p = text ? errors[i].text : errors[i].name;
      return CUDA_SUCCESS;
    }
  }
  *p = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorName(CUresult error, const char **p) {
  return error_entry("cuGetErrorName", error, 0, p);
}

CUresult cuGetErrorString(CUresult error, const char **p) {
  return error_entry("cuGetErrorString", error, 1, p);
}

CUresult cuDeviceGetCount(int *count) {
  CUresult rc = enter("cuDeviceGetCount");

  if (rc != CUDA_SUCCESS)
    return rc;
  if (!initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  *count = ndevices;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *dev, int ordinal) {
  CUresult rc = enter("cuDeviceGet");

  if (rc != CUDA_SUCCESS)
    return rc;
  if (!initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (ordinal < 0 || ordinal >= ndevices || ordinal >= 16)
    return CUDA_ERROR_INVALID_DEVICE;
  *dev = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
  CUresult rc = enter("cuDeviceGetName");

  if (rc != CUDA_SUCCESS)
    return rc;
  if (!initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (dev < 0 || dev >= ndevices)
    return CUDA_ERROR_INVALID_DEVICE;
  if (!name || len <= 0)
    return CUDA_ERROR_INVALID_VALUE;
  snprintf(name, (size_t)len, "%s", device_name);
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev) {
  CUresult rc = enter("cuDevicePrimaryCtxRetain");

  if (rc != CUDA_SUCCESS)
    return rc;
  if (!initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (dev < 0 || dev >= ndevices || dev >= 16)
    return CUDA_ERROR_INVALID_DEVICE;
  contexts[dev].retained++;
  *ctx = &contexts[dev];
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  CUresult rc = enter("cuDevicePrimaryCtxRelease_v2");

  if (rc != CUDA_SUCCESS)
    return rc;
  if (dev < 0 || dev >= ndevices || dev >= 16)
    return CUDA_ERROR_INVALID_DEVICE;
  if (contexts[dev].retained == 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  contexts[dev].retained--;
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
  CUresult rc = enter("cuCtxSetCurrent");

  if (rc != CUDA_SUCCESS)
    return rc;
  if (!ctx) {
    current_ctx = -1;
    return CUDA_SUCCESS;
  }
  if (ctx < &contexts[0] || ctx >= &contexts[16] || ctx->retained == 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  current_ctx = (int)(ctx - &contexts[0]);
  return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *s, unsigned flags) {
  CUresult rc = enter("cuStreamCreate");

  (void)flags;
  if (rc != CUDA_SUCCESS)
    return rc;
  if (!in_context())
    return CUDA_ERROR_INVALID_CONTEXT;
  stream.live++;
  *s = &stream;
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy_v2(CUstream s) {
  CUresult rc = enter("cuStreamDestroy_v2");

  if (rc != CUDA_SUCCESS)
    return rc;
  if (s != &stream || stream.live == 0)
    return CUDA_ERROR_INVALID_HANDLE;
  stream.live--;
  return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream s) {
  CUresult rc = enter("cuStreamSynchronize");
  struct timespec ts;

  if (rc != CUDA_SUCCESS)
    return rc;
  if (s != &stream || stream.live == 0)
    return CUDA_ERROR_INVALID_HANDLE;
  if (sleep_us > 0) {
    ts.tv_sec = sleep_us / 1000000;
    ts.tv_nsec = (sleep_us % 1000000) * 1000;
    while (nanosleep(&ts, &ts) != 0) {
    }
  }
  return CUDA_SUCCESS;
}

static CUresult alloc(const char *name, void **p, size_t size, int kind) {
  CUresult rc = enter(name);
  void *m;

  if (rc != CUDA_SUCCESS)
    return rc;
  if (!in_context())
    return CUDA_ERROR_INVALID_CONTEXT;
  if (!p || size == 0)
    return CUDA_ERROR_INVALID_VALUE;
  m = malloc(size);
  if (!m)
    return CUDA_ERROR_OUT_OF_MEMORY;
  if (!new_block(m, size, kind)) {
    free(m);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *p = m;
  return CUDA_SUCCESS;
}

static CUresult release(const char *name, void *p, int kind) {
  CUresult rc = enter(name);
  struct block *b;

  if (rc != CUDA_SUCCESS)
    return rc;
  b = find_block(p, kind);
  if (!b)
    return CUDA_ERROR_INVALID_VALUE;
  if (kind != 3)
    free(b->p);
  memset(b, 0, sizeof(*b));
  return CUDA_SUCCESS;
}

CUresult cuMemHostAlloc(void **p, size_t size, unsigned flags) {
  (void)flags;
  return alloc("cuMemHostAlloc", p, size, 2);
}

CUresult cuMemFreeHost(void *p) {
  return release("cuMemFreeHost", p, 2);
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size) {
  void *p = NULL;
  CUresult rc = alloc("cuMemAlloc_v2", &p, size, 1);

  if (rc == CUDA_SUCCESS)
    *dptr = (CUdeviceptr)(uintptr_t)p;
  return rc;
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
  return release("cuMemFree_v2", (void *)(uintptr_t)dptr, 1);
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t size, CUstream s) {
  CUresult rc = enter("cuMemcpyHtoDAsync_v2");
  struct block *b = find_block((void *)(uintptr_t)dst, 1);

  if (rc != CUDA_SUCCESS)
    return rc;
  if (!b || !src || size > b->size)
    return CUDA_ERROR_INVALID_VALUE;
  if (s != &stream || stream.live == 0)
    return CUDA_ERROR_INVALID_HANDLE;
  memcpy(b->p, src, size);
  return CUDA_SUCCESS;
}

CUresult cuMemHostRegister_v2(void *p, size_t size, unsigned flags) {
  CUresult rc = enter("cuMemHostRegister_v2");
  volatile char *c = p;
  size_t i;

  (void)flags;
  if (rc != CUDA_SUCCESS)
    return rc;
  if (!in_context())
    return CUDA_ERROR_INVALID_CONTEXT;
  if (!p || size == 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (find_block(p, 3))
    return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  /* The driver touches every page to pin it; so does this. */
  for (i = 0; i < size; i += 4096)
    c[i] = c[i];
  return new_block(p, size, 3) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuMemHostUnregister(void *p) {
  CUresult rc = enter("cuMemHostUnregister");
  struct block *b = find_block(p, 3);

  if (rc != CUDA_SUCCESS)
    return rc;
  if (!b)
    return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  memset(b, 0, sizeof(*b));
  return CUDA_SUCCESS;
}

CUresult cuModuleLoadData(CUmodule *mod, const void *image) {
  CUresult rc = enter("cuModuleLoadData");

  if (rc != CUDA_SUCCESS)
    return rc;
  if (!in_context())
    return CUDA_ERROR_INVALID_CONTEXT;
  if (!image || !strstr(image, ".version ") || !strstr(image, ".target ") || !strstr(image, ".entry "))
    return CUDA_ERROR_INVALID_IMAGE;
  module.live++;
  module.image = image;
  *mod = &module;
  return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule mod) {
  CUresult rc = enter("cuModuleUnload");

  if (rc != CUDA_SUCCESS)
    return rc;
  if (mod != &module || module.live == 0)
    return CUDA_ERROR_INVALID_HANDLE;
  module.live--;
  function.live = 0;
  return CUDA_SUCCESS;
}

/* The name must be an .entry of the loaded PTX. */
CUresult cuModuleGetFunction(CUfunction *fn, CUmodule mod, const char *name) {
  CUresult rc = enter("cuModuleGetFunction");
  char entry[256];

  if (rc != CUDA_SUCCESS)
    return rc;
  if (mod != &module || module.live == 0)
    return CUDA_ERROR_INVALID_HANDLE;
  snprintf(entry, sizeof(entry), ".entry %s(", name);
  if (!strstr(module.image, entry))
    return CUDA_ERROR_NOT_FOUND;
  function.live = 1;
  *fn = &function;
  return CUDA_SUCCESS;
}

/* The kernel: ++*(int *)param 0, which must be a device allocation. */
CUresult cuLaunchKernel(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, CUstream s, void **params, void **extra) {
  CUresult rc = enter("cuLaunchKernel");
  struct block *b;

  (void)shared;
  if (rc != CUDA_SUCCESS)
    return rc;
  if (fn != &function || !function.live || (s != &stream || stream.live == 0))
    return CUDA_ERROR_INVALID_HANDLE;
  if (gx * gy * gz == 0 || bx * by * bz == 0 || !params || extra)
    return CUDA_ERROR_INVALID_VALUE;
  b = find_block((void *)(uintptr_t) * (CUdeviceptr *)params[0], 1);
  if (!b || b->size < sizeof(int))
    return CUDA_ERROR_ILLEGAL_ADDRESS;
  ++*(int *)b->p;
  return CUDA_SUCCESS;
}
