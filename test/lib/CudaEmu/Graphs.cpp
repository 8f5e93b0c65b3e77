//===- Graphs.cpp - the emulated CUDA driver: stream capture and graphs ---===//
//
// Between cuStreamBeginCapture and cuStreamEndCapture, kernel launches on
// the capturing stream become kernel nodes of the capture's graph
// (cuLaunchKernel, Streams.cpp, copies their parameters) and do not run;
// any call a capture forbids fails with its name (Entry::NotUnderCapture)
// and invalidates the capture. A graph replays its kernel nodes, in capture
// order, on the stream it is launched on.
//
//===----------------------------------------------------------------------===//

#include "CudaEmu/Driver.h"

#include <algorithm>

using namespace kpool::emu;
using namespace kpool::emu::driver;

extern "C" {

//===----------------------------------------------------------------------===//
// Capture
//===----------------------------------------------------------------------===//

CUresult CUDAAPI cuStreamBeginCapture(CUstream handle,
                                      CUstreamCaptureMode mode) {
  Entry e("cuStreamBeginCapture", Entry::Healthy);
  if (e.failed())
    return e.status();
  CUresult r = CUDA_SUCCESS;
  std::shared_ptr<Stream> s = streamFor(e, handle, &r);
  if (!s)
    return r;
  if (s->id == 0)
    return e.fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                  "the legacy (NULL) stream cannot be captured");
  if (int(mode) < 0 || mode > CU_STREAM_CAPTURE_MODE_RELAXED)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "not a capture mode");
  if (s->capture)
    return e.fail(CUDA_ERROR_ILLEGAL_STATE,
                  describe(*s) + " is capturing already");
  Driver &d = state();
  auto capture = std::make_shared<Capture>();
  capture->id = d.nextCaptureId++;
  capture->mode = mode;
  capture->thread = std::this_thread::get_id();
  capture->graph = new CUgraph_st;
  s->capture = capture;
  d.captures.push_back(std::move(capture));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamEndCapture(CUstream handle, CUgraph *graph) {
  Entry e("cuStreamEndCapture", Entry::Healthy);
  if (e.failed())
    return e.status();
  if (!graph)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "phGraph is NULL");
  CUresult r = CUDA_SUCCESS;
  std::shared_ptr<Stream> s = streamFor(e, handle, &r);
  if (!s)
    return r;
  std::shared_ptr<Capture> c = s->capture;
  if (!c)
    return e.fail(CUDA_ERROR_ILLEGAL_STATE, describe(*s) + " is not capturing");
  if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
      c->thread != std::this_thread::get_id())
    return e.fail(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD,
                  "the capture of " + describe(*s) +
                      " was begun on another thread");
  Driver &d = state();
  s->capture.reset();
  d.captures.erase(std::find(d.captures.begin(), d.captures.end(), c));
  *graph = nullptr;
  std::unique_ptr<CUgraph_st> g(c->graph);
  if (c->invalidated)
    return e.fail(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
                  "the capture of " + describe(*s) +
                      " was invalidated by a call it forbids (reported "
                      "above)");
  *graph = g.get();
  d.graphs[g.get()] = std::move(g);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamIsCapturing(CUstream handle,
                                     CUstreamCaptureStatus *status) {
  Entry e("cuStreamIsCapturing", Entry::Healthy);
  if (e.failed())
    return e.status();
  if (!status)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "captureStatus is NULL");
  CUresult r = CUDA_SUCCESS;
  std::shared_ptr<Stream> s = streamFor(e, handle, &r);
  if (!s)
    return r;
  *status = !s->capture               ? CU_STREAM_CAPTURE_STATUS_NONE
            : s->capture->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                      : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamGetCaptureInfo(CUstream handle,
                                        CUstreamCaptureStatus *status,
                                        cuuint64_t *id, CUgraph *graph,
                                        const CUgraphNode **dependencies,
                                        const CUgraphEdgeData **edgeData,
                                        size_t *numDependencies) {
  Entry e("cuStreamGetCaptureInfo", Entry::Healthy);
  if (e.failed())
    return e.status();
  if (!status)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "captureStatus_out is NULL");
  CUresult r = CUDA_SUCCESS;
  std::shared_ptr<Stream> s = streamFor(e, handle, &r);
  if (!s)
    return r;
  const Capture *c = s->capture.get();
  *status = !c               ? CU_STREAM_CAPTURE_STATUS_NONE
            : c->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                             : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  if (id)
    *id = c ? c->id : 0;
  if (graph)
    *graph = c ? c->graph : nullptr;
  // A capture is a chain: the next node depends on the last one.
  static thread_local CUgraphNode last;
  bool chained = c && !c->graph->nodes.empty();
  last = chained ? c->graph->nodes.back().get() : nullptr;
  if (dependencies)
    *dependencies = chained ? &last : nullptr;
  if (edgeData)
    *edgeData = nullptr;
  if (numDependencies)
    *numDependencies = chained ? 1 : 0;
  return CUDA_SUCCESS;
}

//===----------------------------------------------------------------------===//
// Graphs
//===----------------------------------------------------------------------===//

CUresult CUDAAPI cuGraphGetNodes(CUgraph graph, CUgraphNode *nodes,
                                 size_t *numNodes) {
  Entry e("cuGraphGetNodes", Entry::Healthy);
  if (e.failed())
    return e.status();
  if (!numNodes)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "numNodes is NULL");
  auto it = state().graphs.find(graph);
  if (it == state().graphs.end())
    return e.fail(CUDA_ERROR_INVALID_HANDLE, "not a graph");
  const auto &all = it->second->nodes;
  if (nodes) {
    for (size_t i = 0; i < *numNodes; ++i)
      nodes[i] = i < all.size() ? all[i].get() : nullptr;
    *numNodes = std::min(*numNodes, all.size());
  } else {
    *numNodes = all.size();
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType *type) {
  Entry e("cuGraphNodeGetType", Entry::Healthy);
  if (e.failed())
    return e.status();
  if (!type)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "type is NULL");
  for (const auto &[h, g] : state().graphs)
    for (const auto &n : g->nodes)
      if (n.get() == node) {
        *type = CU_GRAPH_NODE_TYPE_KERNEL;
        return CUDA_SUCCESS;
      }
  return e.fail(CUDA_ERROR_INVALID_HANDLE, "not a graph node");
}

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph,
                                             unsigned long long flags) {
  Entry e("cuGraphInstantiateWithFlags", Entry::Context);
  if (e.failed())
    return e.status();
  if (!exec)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "phGraphExec is NULL");
  auto it = state().graphs.find(graph);
  if (it == state().graphs.end())
    return e.fail(CUDA_ERROR_INVALID_HANDLE, "not a graph");
  if (flags &
      ~(unsigned long long)(CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
                            CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY))
    return e.fail(CUDA_ERROR_INVALID_VALUE,
                  "flags " + std::to_string(flags) + " are not emulated");
  auto x = std::make_unique<CUgraphExec_st>();
  for (const auto &n : it->second->nodes)
    x->launches.push_back(n->launch);
  *exec = x.get();
  state().execs[x.get()] = std::move(x);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphLaunch(CUgraphExec exec, CUstream handle) {
  Entry e("cuGraphLaunch", Entry::Healthy);
  if (e.failed())
    return e.status();
  auto it = state().execs.find(exec);
  if (it == state().execs.end())
    return e.fail(CUDA_ERROR_INVALID_HANDLE, "not an instantiated graph");
  CUresult r = CUDA_SUCCESS;
  std::shared_ptr<Stream> s = streamFor(e, handle, &r);
  if (!s)
    return r;
  if ((r = notCapturing(e, *s)))
    return r;
  for (const auto &launch : it->second->launches) {
    Op op;
    op.kind = Op::Kind::Launch;
    op.launch = launch;
    enqueue(s, std::move(op));
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphDestroy(CUgraph graph) {
  Entry e("cuGraphDestroy", Entry::Healthy);
  if (e.failed())
    return e.status();
  if (!state().graphs.erase(graph))
    return e.fail(CUDA_ERROR_INVALID_VALUE, "not a graph");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec exec) {
  Entry e("cuGraphExecDestroy", Entry::Healthy);
  if (e.failed())
    return e.status();
  if (!state().execs.erase(exec))
    return e.fail(CUDA_ERROR_INVALID_VALUE, "not an instantiated graph");
  return CUDA_SUCCESS;
}

} // extern "C"
