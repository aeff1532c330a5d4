// The GPU's timeline of a process, as it ran: every kernel's start and end on the GPU, the
// copies and sets, and (QUEST_TRACE_DRIVER=1) every CUDA driver and runtime call of the
// host (MLX adds a graph's kernel nodes through the driver, launches it through the
// runtime), with the
// correlation id that ties a kernel to the call that launched it (its graph's launch for
// a kernel inside a CUDA graph). Unlike ncu, which serializes kernels and flushes caches
// between them, nothing is replayed: the kernels overlap the host as they do untraced, so
// the gaps between them are the GPU waiting for the host. CUPTI's activity API.
//
// Loaded by the CUDA driver as an injection library (it calls InitializeInjection at
// cuInit); the records go to QUEST_TRACE_OUT (default trace.csv) as they are handed over
// and at exit, one a line, the name last (it may hold commas):
//   k,start_ns,end_ns,stream,correlation,name      a kernel
//   m,start_ns,end_ns,stream,correlation,copy|set  a copy or a set
//   d,start_ns,end_ns,thread,correlation,name      a driver call (QUEST_TRACE_DRIVER=1)
//   r,start_ns,end_ns,thread,correlation,name      a runtime call (QUEST_TRACE_DRIVER=1)
//
// Built by docs/gpu/trace_build.sh (here, CUPTI from PyPI) or by hand, KERNEL_RECORD being the
// newest CUpti_ActivityKernelN the headers declare (MEMCPY_RECORD and MEMSET_RECORD the
// same for copies and sets, left out where not given):
//   nvcc -shared -Xcompiler -fPIC -DKERNEL_RECORD=CUpti_ActivityKernel10 -I$CUPTI/include
//     docs/gpu/cupti_trace.cpp -L$CUPTI/lib64 -lcupti -o libcupti_trace.so
//   CUDA_INJECTION64_PATH=$PWD/libcupti_trace.so QUEST_TRACE_OUT=fit.csv quest fit …
#include <cupti.h>
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#ifndef KERNEL_RECORD
#error "KERNEL_RECORD: the newest CUpti_ActivityKernelN of cupti_activity.h"
#endif

static FILE *out;
static std::mutex out_lock;
static size_t dropped;

static void say(const char *what, CUptiResult r) {
  const char *text = "?";
  cuptiGetResultString(r, &text);
  fprintf(stderr, "cupti_trace: %s: %s\n", what, text);
}
#define CHECK(call)                                                                        \
  do {                                                                                     \
    CUptiResult r_ = (call);                                                               \
    if (r_ != CUPTI_SUCCESS) say(#call, r_);                                               \
  } while (0)

static void CUPTIAPI requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *size = 16u << 20;
  *buffer = static_cast<uint8_t *>(aligned_alloc(8, *size));
  *max_records = 0;
}

static void write_kernel(const KERNEL_RECORD *k) {
  int status = 0;
  char *plain = abi::__cxa_demangle(k->name, nullptr, nullptr, &status);
  fprintf(out, "k,%llu,%llu,%u,%u,%s\n", (unsigned long long)k->start,
          (unsigned long long)k->end, k->streamId, k->correlationId,
          status == 0 && plain ? plain : k->name);
  free(plain);
}

// A copy or a set: the GPU busy moving bytes, as a kernel is.
template <typename Record> static void write_move(const Record *m, const char *what) {
  fprintf(out, "m,%llu,%llu,%u,%u,%s\n", (unsigned long long)m->start, (unsigned long long)m->end,
          m->streamId, m->correlationId, what);
}

static void CUPTIAPI completed(CUcontext context, uint32_t stream, uint8_t *buffer,
                              size_t size, size_t valid) {
  std::lock_guard<std::mutex> guard(out_lock);
  CUpti_Activity *record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      write_kernel(reinterpret_cast<KERNEL_RECORD *>(record));
      break;
#ifdef MEMCPY_RECORD
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      write_move(reinterpret_cast<MEMCPY_RECORD *>(record), "copy");
      break;
#endif
#ifdef MEMSET_RECORD
    case CUPTI_ACTIVITY_KIND_MEMSET:
      write_move(reinterpret_cast<MEMSET_RECORD *>(record), "set");
      break;
#endif
    case CUPTI_ACTIVITY_KIND_DRIVER:
    case CUPTI_ACTIVITY_KIND_RUNTIME: {
      auto *a = reinterpret_cast<CUpti_ActivityAPI *>(record);
      bool driver = record->kind == CUPTI_ACTIVITY_KIND_DRIVER;
      const char *name = nullptr;
      cuptiGetCallbackName(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API,
                           a->cbid, &name);
      fprintf(out, "%c,%llu,%llu,%u,%u,%s\n", driver ? 'd' : 'r', (unsigned long long)a->start,
              (unsigned long long)a->end, a->threadId, a->correlationId, name ? name : "?");
      break;
    }
    default:
      break;
    }
  }
  size_t lost = 0;
  if (cuptiActivityGetNumDroppedRecords(context, stream, &lost) == CUPTI_SUCCESS) dropped += lost;
  free(buffer);
}

static void at_exit() {
  CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  std::lock_guard<std::mutex> guard(out_lock);
  if (dropped) fprintf(stderr, "cupti_trace: %zu records dropped\n", dropped);
  fflush(out);
}

extern "C" int InitializeInjection(void) {
  const char *path = getenv("QUEST_TRACE_OUT");
  out = fopen(path && *path ? path : "trace.csv", "w");
  if (!out) {
    perror("cupti_trace: QUEST_TRACE_OUT");
    return 0;
  }
  CHECK(cuptiActivityRegisterCallbacks(requested, completed));
  CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
#ifdef MEMCPY_RECORD
  CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
#endif
#ifdef MEMSET_RECORD
  CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
#endif
  const char *driver = getenv("QUEST_TRACE_DRIVER");
  if (driver && strcmp(driver, "1") == 0) {
    CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER));
    CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME));
  }
  atexit(at_exit);
  return 1;
}
