//===- Streams.cpp - the emulated CUDA driver: streams, events, launches -===//
//
// Each stream is a queue of operations (launches, copies, memsets, event
// records and waits) that run when something needs their results: a
// synchronization (stream, event, context), a copy to pageable host memory,
// a free, or the process's exit. So a program that reads results without
// synchronizing sees them missing, as it could on a device, while stream
// order, events and the legacy stream's implicit synchronization hold. A
// launch runs in the PTX executor (Executor.h) with the driver's options.
//
// A launch on a capturing stream becomes a kernel node instead (its
// parameters' bytes copied, as CUDA does; Graphs.cpp holds capture and
// graphs).
//
//===----------------------------------------------------------------------===//

#include "CudaEmu/Driver.h"

#include <algorithm>
#include <chrono>
#include <cstring>

using namespace kpool::emu;
using namespace kpool::emu::driver;

namespace {

/// Every stream, the legacy one first, then by number.
std::vector<std::shared_ptr<Stream>> allStreams() {
  Driver &d = state();
  std::vector<std::shared_ptr<Stream>> all;
  all.push_back(d.legacy);
  for (auto &[h, s] : d.streams)
    all.push_back(s);
  for (auto &[t, s] : d.perThread)
    all.push_back(s);
  std::sort(all.begin() + 1, all.end(),
            [](auto &a, auto &b) { return a->id < b->id; });
  return all;
}

std::shared_ptr<Stream> newStream(unsigned flags, int priority) {
  Driver &d = state();
  auto s = std::make_shared<Stream>();
  s->id = d.nextStreamId++;
  s->flags = flags;
  s->priority = priority;
  s->context = d.primary;
  return s;
}

double nowMilliseconds() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void run(Stream &stream, const Op &op) {
  switch (op.kind) {
  case Op::Kind::Launch:
    execute(stream, *op.launch);
    return;
  case Op::Kind::Copy:
    std::memmove(op.dst, op.snapshot.empty() ? op.src : op.snapshot.data(),
                 op.bytes);
    return;
  case Op::Kind::Set: {
    auto *p = static_cast<uint8_t *>(op.dst);
    for (size_t i = 0; i < op.count; ++i)
      std::memcpy(p + i * op.elementSize, &op.value, op.elementSize);
    return;
  }
  case Op::Kind::Record:
    if (op.event->generation == op.generation) {
      op.event->completed = true;
      op.event->milliseconds = nowMilliseconds();
    }
    return;
  case Op::Kind::Wait:
    return;
  }
}

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// Writes one launch's line to the profile (KPOOL_EMU_PROFILE).
void profileLaunch(int64_t number, const Stream &stream,
                   const KernelLaunch &launch, const LaunchResult &result);

} // namespace

//===----------------------------------------------------------------------===//
// The queues
//===----------------------------------------------------------------------===//

std::shared_ptr<Stream> driver::streamOf(CUstream handle) {
  Driver &d = state();
  if (!handle || handle == CU_STREAM_LEGACY)
    return d.legacy;
  if (handle == CU_STREAM_PER_THREAD) {
    std::shared_ptr<Stream> &s = d.perThread[std::this_thread::get_id()];
    if (!s)
      s = newStream(CU_STREAM_DEFAULT, 0);
    return s;
  }
  auto it = d.streams.find(handle);
  return it == d.streams.end() ? nullptr : it->second;
}

std::shared_ptr<Stream> driver::streamFor(const Entry &entry, CUstream handle,
                                          CUresult *result) {
  bool implicit =
      !handle || handle == CU_STREAM_LEGACY || handle == CU_STREAM_PER_THREAD;
  if (implicit && !hasCurrentContext()) {
    *result = entry.fail(CUDA_ERROR_INVALID_CONTEXT,
                         "the legacy (NULL) or per-thread stream needs a "
                         "current context");
    return nullptr;
  }
  std::shared_ptr<Stream> s = streamOf(handle);
  if (!s)
    *result = entry.fail(CUDA_ERROR_INVALID_HANDLE, "not a stream");
  return s;
}

std::string driver::describe(const Stream &stream) {
  return stream.id ? "stream " + std::to_string(stream.id)
                   : std::string("the legacy stream");
}

uint64_t driver::enqueue(const std::shared_ptr<Stream> &stream, Op op) {
  Driver &d = state();
  // The legacy stream waits for the blocking streams' work before it, and
  // they wait for its.
  if (stream->id == 0) {
    for (const auto &s : allStreams())
      if (s != stream && s->blocking() && s->enqueued > s->done)
        op.after.emplace_back(s, s->enqueued);
  } else if (stream->blocking() && d.legacy->enqueued > d.legacy->done) {
    op.after.emplace_back(d.legacy, d.legacy->enqueued);
  }
  op.seq = ++stream->enqueued;
  stream->pending.push_back(std::move(op));
  return stream->enqueued;
}

CUresult driver::flush(Stream &stream, uint64_t seq) {
  Driver &d = state();
  while (stream.done < seq && !stream.pending.empty()) {
    Op op = std::move(stream.pending.front());
    stream.pending.pop_front();
    for (auto &[other, n] : op.after)
      flush(*other, n);
    if (!d.contextError)
      run(stream, op);
    stream.done = std::max(stream.done, op.seq);
  }
  return d.contextError;
}

CUresult driver::flushAll() {
  for (const auto &s : allStreams())
    flush(*s, s->enqueued);
  return state().contextError;
}

CUresult driver::notCapturing(const Entry &entry, const Stream &stream) {
  if (!stream.capture)
    return CUDA_SUCCESS;
  stream.capture->invalidated = true;
  return entry.fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                    describe(stream) +
                        " is capturing, and the emulated driver captures "
                        "kernel launches only; the capture is invalidated");
}

void driver::execute(Stream &stream, const KernelLaunch &launch) {
  Driver &d = state();
  const std::vector<Param> &params = launch.function->params();
  std::vector<void *> pointers(params.size());
  for (size_t i = 0; i < params.size(); ++i)
    pointers[i] =
        const_cast<uint8_t *>(launch.params.data()) + params[i].offset;
  int64_t number = ++d.launches;
  emu::Options options = d.settings.launch;
  // Each launch its own schedule, reproducible from KPOOL_EMU_SEED.
  options.seed = splitmix(options.seed ^ splitmix(uint64_t(number)));
  LaunchResult result =
      emu::launch(*launch.function, launch.grid, launch.block,
                  launch.dynamicShared, pointers.data(), d.memory, options);
  ++stream.launches;
  ++d.launchesByKernel[launch.function->name()];
  if (!d.settings.profilePath.empty())
    profileLaunch(number, stream, launch, result);
  std::string where = "launch " + std::to_string(number) + " of " +
                      launch.function->name() + " (" + describe(stream) + ")";
  constexpr size_t kShown = 20;
  for (size_t i = 0; i < result.findings.size() && i < kShown; ++i)
    say(where + ": " + result.findings[i].message);
  if (result.findings.size() > kShown)
    say(where + ": " + std::to_string(result.findings.size() - kShown) +
        " more findings not shown");
  // Sanitizer findings (not the error a failed launch reports) make the
  // process fail at exit.
  int64_t sanitizer = 0;
  for (const Finding &f : result.findings)
    sanitizer += f.kind != Finding::Kind::Execution;
  if (sanitizer) {
    ++d.launchesWithFindings;
    d.findings += sanitizer;
  }
  if (!result.completed) {
    ++d.failedLaunches;
    // A memory error is the illegal (or misaligned) address whether or
    // not memcheck reported it.
    CUresult code = result.misaligned       ? CUDA_ERROR_MISALIGNED_ADDRESS
                    : result.illegalAddress ? CUDA_ERROR_ILLEGAL_ADDRESS
                                            : CUDA_ERROR_LAUNCH_FAILED;
    const char *name = nullptr;
    cuGetErrorName(code, &name);
    say(where + " failed: " + name +
        "; the context is unusable from here on, as on a device");
    d.contextError = code;
    // The device's queues die with the context.
    for (const auto &s : allStreams()) {
      s->pending.clear();
      s->done = s->enqueued;
    }
    return;
  }
  if (sanitizer && d.settings.onFinding == OnFinding::Abort) {
    say("KPOOL_EMU_ON_FINDING=abort: aborting at the first finding");
    std::abort();
  }
}

//===----------------------------------------------------------------------===//
// The profile
//===----------------------------------------------------------------------===//

namespace {

std::string countersJson(const Counters &c) {
  auto n = [](uint64_t v) { return std::to_string(v); };
  return "\"threads\":" + n(c.threads) +
         ",\"instructions\":{\"integer\":" + n(c.integer) +
         ",\"integer64\":" + n(c.integer64) + ",\"floating\":" + n(c.floating) +
         ",\"special\":" + n(c.special) + ",\"memory\":" + n(c.memory) +
         ",\"control\":" + n(c.control) + ",\"sync\":" + n(c.sync) +
         "},\"warp_instructions\":" + n(c.warpInstructions) +
         ",\"active_lanes\":" + n(c.activeLanes) +
         ",\"global_load\":{\"sectors\":" + n(c.globalLoadSectors) +
         ",\"lines\":" + n(c.globalLoadLines) +
         ",\"bytes\":" + n(c.globalLoadBytes) +
         "},\"global_store\":{\"sectors\":" + n(c.globalStoreSectors) +
         ",\"lines\":" + n(c.globalStoreLines) +
         ",\"bytes\":" + n(c.globalStoreBytes) + "}";
}

FILE *profileFile() {
  static FILE *f = [] {
    FILE *file = std::fopen(state().settings.profilePath.c_str(), "a");
    if (!file)
      say("KPOOL_EMU_PROFILE: cannot open '" + state().settings.profilePath +
          "' for appending; no profile is written");
    return file;
  }();
  return f;
}

std::string dims(const Dim3 &d) {
  return "[" + std::to_string(d.x) + "," + std::to_string(d.y) + "," +
         std::to_string(d.z) + "]";
}

void profileLaunch(int64_t number, const Stream &stream,
                   const KernelLaunch &launch, const LaunchResult &result) {
  Driver::KernelTotals &totals = state().profile[launch.function->name()];
  ++totals.launches;
  totals.counters += result.counters;
  totals.cpuSeconds += result.cpuSeconds;
  FILE *f = profileFile();
  if (!f)
    return;
  std::fprintf(
      f,
      "{\"emulated\":true,\"record\":\"launch\",\"launch\":%lld,\"kernel\":"
      "\"%s\",\"stream\":%llu,\"grid\":%s,\"block\":%s,\"dynamic_shared\":%u,"
      "\"completed\":%s,\"findings\":%zu,\"cpu_seconds\":%.6f,%s}\n",
      (long long)number, launch.function->name().c_str(),
      (unsigned long long)stream.id, dims(launch.grid).c_str(),
      dims(launch.block).c_str(), launch.dynamicShared,
      result.completed ? "true" : "false", result.findings.size(),
      result.cpuSeconds, countersJson(result.counters).c_str());
}

} // namespace

void driver::writeProfileTotals() {
  Driver &d = state();
  if (d.settings.profilePath.empty() || d.profile.empty())
    return;
  FILE *f = profileFile();
  if (!f)
    return;
  for (const auto &[name, totals] : d.profile)
    std::fprintf(f,
                 "{\"emulated\":true,\"record\":\"kernel\",\"kernel\":\"%s\","
                 "\"launches\":%lld,\"cpu_seconds\":%.6f,%s}\n",
                 name.c_str(), (long long)totals.launches, totals.cpuSeconds,
                 countersJson(totals.counters).c_str());
  std::fflush(f);
}

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

namespace {

std::shared_ptr<Event> needEvent(const Entry &e, CUevent handle,
                                 CUresult *result) {
  auto it = state().events.find(handle);
  if (it == state().events.end()) {
    *result = e.fail(CUDA_ERROR_INVALID_HANDLE, "not an event");
    return nullptr;
  }
  return it->second;
}

CUresult createStream(const Entry &e, CUstream *handle, unsigned flags,
                      int priority) {
  if (!handle)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "phStream is NULL");
  if (flags & ~unsigned(CU_STREAM_NON_BLOCKING))
    return e.fail(CUDA_ERROR_INVALID_VALUE,
                  "flags must be CU_STREAM_DEFAULT or CU_STREAM_NON_BLOCKING");
  std::shared_ptr<Stream> s = newStream(flags, std::clamp(priority, -5, 0));
  *handle = reinterpret_cast<CUstream>(s.get());
  state().streams[s.get()] = std::move(s);
  return CUDA_SUCCESS;
}

} // namespace

extern "C" {

CUresult CUDAAPI cuStreamCreate(CUstream *stream, unsigned int flags) {
  Entry e("cuStreamCreate", Entry::Context);
  return e.failed() ? e.status() : createStream(e, stream, flags, 0);
}

CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *stream,
                                            unsigned int flags, int priority) {
  Entry e("cuStreamCreateWithPriority", Entry::Context);
  return e.failed() ? e.status() : createStream(e, stream, flags, priority);
}

CUresult CUDAAPI cuStreamDestroy(CUstream handle) {
  Entry e("cuStreamDestroy", Entry::Healthy);
  if (e.failed())
    return e.status();
  auto it = state().streams.find(handle);
  if (it == state().streams.end())
    return e.fail(CUDA_ERROR_INVALID_HANDLE, "not a stream you created");
  std::shared_ptr<Stream> s = it->second;
  if (s->capture)
    return e.fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                  describe(*s) + " is capturing");
  // Work already enqueued still completes.
  CUresult r = flush(*s, s->enqueued);
  state().streams.erase(it);
  return r;
}

CUresult CUDAAPI cuStreamSynchronize(CUstream handle) {
  Entry e("cuStreamSynchronize", Entry::Healthy | Entry::NotUnderCapture);
  if (e.failed())
    return e.status();
  CUresult r = CUDA_SUCCESS;
  std::shared_ptr<Stream> s = streamFor(e, handle, &r);
  return s ? flush(*s, s->enqueued) : r;
}

CUresult CUDAAPI cuStreamQuery(CUstream handle) {
  Entry e("cuStreamQuery", Entry::Healthy | Entry::NotUnderCapture);
  if (e.failed())
    return e.status();
  CUresult r = CUDA_SUCCESS;
  std::shared_ptr<Stream> s = streamFor(e, handle, &r);
  // Work completes when asked about: a poll always makes progress.
  return s ? flush(*s, s->enqueued) : r;
}

CUresult CUDAAPI cuStreamWaitEvent(CUstream handle, CUevent event,
                                   unsigned int flags) {
  Entry e("cuStreamWaitEvent", Entry::Healthy);
  if (e.failed())
    return e.status();
  CUresult r = CUDA_SUCCESS;
  std::shared_ptr<Stream> s = streamFor(e, handle, &r);
  if (!s)
    return r;
  std::shared_ptr<Event> ev = needEvent(e, event, &r);
  if (!ev)
    return r;
  if (flags & ~unsigned(CU_EVENT_WAIT_EXTERNAL))
    return e.fail(CUDA_ERROR_INVALID_VALUE, "unknown flags");
  if ((r = notCapturing(e, *s)))
    return r;
  Op op;
  op.kind = Op::Kind::Wait;
  if (ev->recorded)
    op.after.emplace_back(ev->stream, ev->seq);
  enqueue(s, std::move(op));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamGetCtx(CUstream handle, CUcontext *context) {
  Entry e("cuStreamGetCtx", Entry::Init);
  if (e.failed())
    return e.status();
  if (!context)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "pctx is NULL");
  CUresult r = CUDA_SUCCESS;
  std::shared_ptr<Stream> s = streamFor(e, handle, &r);
  if (!s)
    return r;
  *context = s->context;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamGetFlags(CUstream handle, unsigned int *flags) {
  Entry e("cuStreamGetFlags", Entry::Init);
  if (e.failed())
    return e.status();
  CUresult r = CUDA_SUCCESS;
  std::shared_ptr<Stream> s = streamFor(e, handle, &r);
  if (!s || !flags)
    return s ? e.fail(CUDA_ERROR_INVALID_VALUE, "flags is NULL") : r;
  *flags = s->flags;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamGetPriority(CUstream handle, int *priority) {
  Entry e("cuStreamGetPriority", Entry::Init);
  if (e.failed())
    return e.status();
  CUresult r = CUDA_SUCCESS;
  std::shared_ptr<Stream> s = streamFor(e, handle, &r);
  if (!s || !priority)
    return s ? e.fail(CUDA_ERROR_INVALID_VALUE, "priority is NULL") : r;
  *priority = s->priority;
  return CUDA_SUCCESS;
}

//===----------------------------------------------------------------------===//
// Events
//===----------------------------------------------------------------------===//

CUresult CUDAAPI cuEventCreate(CUevent *event, unsigned int flags) {
  Entry e("cuEventCreate", Entry::Context);
  if (e.failed())
    return e.status();
  if (!event)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "phEvent is NULL");
  if (flags & ~unsigned(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
                        CU_EVENT_INTERPROCESS))
    return e.fail(CUDA_ERROR_INVALID_VALUE, "unknown flags");
  auto ev = std::make_shared<Event>();
  ev->flags = flags;
  *event = reinterpret_cast<CUevent>(ev.get());
  state().events[ev.get()] = std::move(ev);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventDestroy(CUevent event) {
  Entry e("cuEventDestroy", Entry::Healthy);
  if (e.failed())
    return e.status();
  if (!state().events.erase(event))
    return e.fail(CUDA_ERROR_INVALID_HANDLE, "not an event");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventRecord(CUevent event, CUstream handle) {
  Entry e("cuEventRecord", Entry::Healthy);
  if (e.failed())
    return e.status();
  CUresult r = CUDA_SUCCESS;
  std::shared_ptr<Event> ev = needEvent(e, event, &r);
  if (!ev)
    return r;
  std::shared_ptr<Stream> s = streamFor(e, handle, &r);
  if (!s)
    return r;
  if ((r = notCapturing(e, *s)))
    return r;
  ++ev->generation;
  ev->recorded = true;
  ev->completed = false;
  ev->stream = s;
  Op op;
  op.kind = Op::Kind::Record;
  op.event = ev;
  op.generation = ev->generation;
  ev->seq = enqueue(s, std::move(op));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventSynchronize(CUevent event) {
  Entry e("cuEventSynchronize", Entry::Healthy | Entry::NotUnderCapture);
  if (e.failed())
    return e.status();
  CUresult r = CUDA_SUCCESS;
  std::shared_ptr<Event> ev = needEvent(e, event, &r);
  if (!ev)
    return r;
  return ev->recorded ? flush(*ev->stream, ev->seq) : CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventQuery(CUevent event) {
  Entry e("cuEventQuery", Entry::Healthy | Entry::NotUnderCapture);
  if (e.failed())
    return e.status();
  CUresult r = CUDA_SUCCESS;
  std::shared_ptr<Event> ev = needEvent(e, event, &r);
  if (!ev)
    return r;
  // As cuStreamQuery: the work completes when asked about.
  return ev->recorded ? flush(*ev->stream, ev->seq) : CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventElapsedTime(float *ms, CUevent start, CUevent end) {
  Entry e("cuEventElapsedTime", Entry::Healthy);
  if (e.failed())
    return e.status();
  if (!ms)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "pMilliseconds is NULL");
  CUresult r = CUDA_SUCCESS;
  std::shared_ptr<Event> a = needEvent(e, start, &r);
  std::shared_ptr<Event> b = a ? needEvent(e, end, &r) : nullptr;
  if (!a || !b)
    return r;
  if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING)
    return e.fail(CUDA_ERROR_INVALID_HANDLE,
                  "an event was created with CU_EVENT_DISABLE_TIMING");
  if (!a->recorded || !b->recorded)
    return e.fail(CUDA_ERROR_INVALID_HANDLE, "an event was never recorded");
  if (!a->completed || !b->completed)
    return CUDA_ERROR_NOT_READY;
  *ms = float(b->milliseconds - a->milliseconds);
  return CUDA_SUCCESS;
}

//===----------------------------------------------------------------------===//
// Launches
//===----------------------------------------------------------------------===//

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridX,
                                unsigned int gridY, unsigned int gridZ,
                                unsigned int blockX, unsigned int blockY,
                                unsigned int blockZ, unsigned int sharedBytes,
                                CUstream handle, void **kernelParams,
                                void **extra) {
  Entry e("cuLaunchKernel", Entry::Healthy);
  if (e.failed())
    return e.status();
  Driver &d = state();
  auto fit = d.functions.find(f);
  if (fit == d.functions.end())
    return e.fail(CUDA_ERROR_INVALID_HANDLE, "not a function");
  const CUfunc_st &func = *fit->second;
  const Function &fn = *func.function;
  auto text = [](unsigned x, unsigned y, unsigned z) {
    return "(" + std::to_string(x) + ", " + std::to_string(y) + ", " +
           std::to_string(z) + ")";
  };
  if (!gridX || !gridY || !gridZ || gridX > 2147483647u || gridY > 65535 ||
      gridZ > 65535)
    return e.fail(CUDA_ERROR_INVALID_VALUE,
                  "kernel " + fn.name() + ": grid " +
                      text(gridX, gridY, gridZ) +
                      " outside [1, 2^31-1] x [1, 65535] x [1, 65535]");
  uint64_t threads = uint64_t(blockX) * blockY * blockZ;
  if (!blockX || !blockY || !blockZ || blockX > 1024 || blockY > 1024 ||
      blockZ > 64 ||
      threads > std::min<uint32_t>(1024, fn.maxThreadsPerBlock()))
    return e.fail(
        CUDA_ERROR_INVALID_VALUE,
        "kernel " + fn.name() + ": block " + text(blockX, blockY, blockZ) +
            " (" + std::to_string(threads) + " threads; the kernel takes " +
            std::to_string(std::min<uint32_t>(1024, fn.maxThreadsPerBlock())) +
            ")");
  if (sharedBytes > unsigned(func.maxDynamicShared))
    return e.fail(CUDA_ERROR_INVALID_VALUE,
                  "kernel " + fn.name() + ": " + std::to_string(sharedBytes) +
                      " bytes of dynamic shared memory, more than the " +
                      std::to_string(func.maxDynamicShared) +
                      " of CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES");
  CUresult r = CUDA_SUCCESS;
  std::shared_ptr<Stream> s = streamFor(e, handle, &r);
  if (!s)
    return r;

  // The parameters' bytes, laid out as the kernel's .param space.
  const std::vector<Param> &params = fn.params();
  size_t total = 0;
  for (const Param &p : params)
    total = std::max<size_t>(total, size_t(p.offset) + p.size);
  auto launch = std::make_shared<KernelLaunch>();
  launch->params.assign(total, 0);
  if (kernelParams && extra)
    return e.fail(CUDA_ERROR_INVALID_VALUE,
                  "kernel " + fn.name() +
                      ": both kernelParams and extra given");
  if (kernelParams) {
    for (size_t i = 0; i < params.size(); ++i) {
      if (!kernelParams[i])
        return e.fail(CUDA_ERROR_INVALID_VALUE,
                      "kernel " + fn.name() + ": kernelParams[" +
                          std::to_string(i) + "] is NULL");
      std::memcpy(launch->params.data() + params[i].offset, kernelParams[i],
                  params[i].size);
    }
  } else if (extra) {
    const void *buffer = nullptr;
    size_t size = 0;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
        buffer = extra[i + 1];
      else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
        size = *static_cast<size_t *>(extra[i + 1]);
      else
        return e.fail(CUDA_ERROR_INVALID_VALUE,
                      "kernel " + fn.name() + ": unknown key in extra");
    }
    if ((!buffer && total) || size < total)
      return e.fail(CUDA_ERROR_INVALID_VALUE,
                    "kernel " + fn.name() + ": extra's buffer holds " +
                        std::to_string(size) + " bytes; the parameters take " +
                        std::to_string(total));
    if (total)
      std::memcpy(launch->params.data(), buffer, total);
  } else if (!params.empty()) {
    return e.fail(CUDA_ERROR_INVALID_VALUE,
                  "kernel " + fn.name() + ": no kernelParams for its " +
                      std::to_string(params.size()) + " parameters");
  }
  launch->module = d.modules.at(func.module);
  launch->function = &fn;
  launch->grid = {gridX, gridY, gridZ};
  launch->block = {blockX, blockY, blockZ};
  launch->dynamicShared = sharedBytes;

  if (s->capture) {
    if (s->capture->invalidated)
      return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    auto node = std::make_unique<CUgraphNode_st>();
    node->graph = s->capture->graph;
    node->launch = std::move(launch);
    s->capture->graph->nodes.push_back(std::move(node));
    return CUDA_SUCCESS;
  }
  Op op;
  op.kind = Op::Kind::Launch;
  op.launch = std::move(launch);
  enqueue(s, std::move(op));
  return CUDA_SUCCESS;
}

} // extern "C"
