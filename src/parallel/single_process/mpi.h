// MPI for one process: the part of the MPI interface miniLST calls, for builds
// without an MPI library (cmake -DMINILST_ENABLE_MPI=OFF; the GPU bundle, which
// runs where no MPI is installed). The world is one rank: collectives copy their
// input to their output (or do nothing in place), a split gives a communicator of
// one, and point-to-point messages are sent to oneself through a queue. This header
// stands in for <mpi.h> only in that build (its folder is then on the include
// path); every other build uses the real library. The same idea as PETSc's MPIUNI
// and LAMMPS's STUBS, written here for exactly the calls this program makes.
//
// Buffers may be device memory on CUDA builds (MINILST_SINGLE_PROCESS_CUDA): the
// copies then go through cudaMemcpy with unified addressing.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <vector>

#ifdef MINILST_SINGLE_PROCESS_CUDA
#include <cuda_runtime_api.h>
#endif

#define MINILST_SINGLE_PROCESS_MPI 1

using MPI_Comm = int;
using MPI_Datatype = int;
using MPI_Op = int;
using MPI_Info = int;
using MPI_Request = int;
struct MPI_Status {
  int MPI_SOURCE = 0, MPI_TAG = 0, MPI_ERROR = 0;
  std::size_t bytes = 0;  // what MPI_Get_count reads
};

constexpr MPI_Comm MPI_COMM_NULL = 0, MPI_COMM_WORLD = 1, MPI_COMM_SELF = 2;
constexpr MPI_Info MPI_INFO_NULL = 0;
constexpr MPI_Request MPI_REQUEST_NULL = 0;
constexpr int MPI_SUCCESS = 0, MPI_UNDEFINED = -32766, MPI_COMM_TYPE_SHARED = 1, MPI_ANY_TAG = -1, MPI_ANY_SOURCE = -2;
constexpr int MPI_MAX_LIBRARY_VERSION_STRING = 256;
// Datatypes are their size in bytes (what a one-process copy needs).
constexpr MPI_Datatype MPI_CHAR = 1, MPI_BYTE = 1, MPI_UINT16_T = 2, MPI_INT = int(sizeof(int)), MPI_UNSIGNED = int(sizeof(unsigned)), MPI_FLOAT = 4,
                       MPI_DOUBLE = 8, MPI_INT64_T = 8, MPI_UINT64_T = 8, MPI_UNSIGNED_LONG_LONG = 8;
constexpr MPI_Op MPI_SUM = 1, MPI_MIN = 2, MPI_MAX = 3, MPI_LAND = 4, MPI_LOR = 5, MPI_BAND = 6;
#define MPI_IN_PLACE (reinterpret_cast<void*>(std::intptr_t(-1)))
#define MPI_STATUS_IGNORE (static_cast<MPI_Status*>(nullptr))

namespace minilst::single_process {

[[noreturn]] inline void fail(const char* what);

#ifdef MINILST_SINGLE_PROCESS_CUDA
// Whether p is host memory the CPU reads directly (plain or pinned), not device memory.
inline bool host_memory(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    // CUDA answers for host memory too: an error is a device fault, already reported,
    // after which only host buffers (the rescue's metrics) still move.
    (void)cudaGetLastError();
    return true;
  }
  return a.type == cudaMemoryTypeUnregistered || a.type == cudaMemoryTypeHost;
}
#endif

// Host to host by memcpy (no CUDA stream, so a rescue never waits behind a kernel);
// a device buffer on either side through cudaMemcpy, whose error ends the run.
inline void copy(void* to, const void* from, std::size_t bytes) {
  if (bytes == 0 || to == from) return;
#ifdef MINILST_SINGLE_PROCESS_CUDA
  if (!host_memory(to) || !host_memory(from)) {
    if (cudaMemcpy(to, from, bytes, cudaMemcpyDefault) != cudaSuccess) fail("cudaMemcpy of a collective's buffer");
    return;
  }
#endif
  std::memcpy(to, from, bytes);
}

// A message sent to oneself and not yet received, and a receive posted before its send.
struct Message {
  int tag;
  std::vector<char> data;
};
struct PostedReceive {
  int tag;
  void* buf;
  std::size_t capacity;
  MPI_Request request;
};
struct State {
  std::deque<Message> sent;
  std::vector<PostedReceive> posted;
  std::vector<MPI_Request> incomplete;
  MPI_Request next_request = 1;
  MPI_Comm next_comm = 3;
};
inline State& state() {
  static State s;
  return s;
}

[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "error: %s (this build has no MPI library: one process only)\n", what);
  std::fflush(nullptr);
  std::_Exit(1);
}

inline void deliver(const Message& m, void* buf, std::size_t capacity) {
  if (m.data.size() > capacity) fail("a message to itself is longer than its receive buffer");
  copy(buf, m.data.data(), m.data.size());
}

inline void check_peer(int peer) {
  if (peer != 0 && peer != MPI_ANY_SOURCE) fail("a message to or from a rank other than 0");
}

}  // namespace minilst::single_process

inline int MPI_Init(int*, char***) { return MPI_SUCCESS; }
inline int MPI_Finalize() { return MPI_SUCCESS; }
inline int MPI_Initialized(int* flag) {  // MPI_Init does nothing here: always "initialised"
  *flag = 1;
  return MPI_SUCCESS;
}
inline int MPI_Get_version(int* major, int* minor) {  // the standard these stubs stand in for
  *major = 3;
  *minor = 1;
  return MPI_SUCCESS;
}
inline int MPI_Abort(MPI_Comm, int code) {
  std::fflush(nullptr);
  std::_Exit(code);
}
inline int MPI_Get_library_version(char* version, int* length) {
  const char text[] = "none (single-process build: MINILST_ENABLE_MPI=OFF)";
  std::memcpy(version, text, sizeof text);
  *length = int(sizeof text) - 1;
  return MPI_SUCCESS;
}

inline int MPI_Comm_rank(MPI_Comm, int* rank) {
  *rank = 0;
  return MPI_SUCCESS;
}
inline int MPI_Comm_size(MPI_Comm, int* size) {
  *size = 1;
  return MPI_SUCCESS;
}
inline int MPI_Comm_split(MPI_Comm, int color, int, MPI_Comm* out) {
  *out = color == MPI_UNDEFINED ? MPI_COMM_NULL : minilst::single_process::state().next_comm++;
  return MPI_SUCCESS;
}
inline int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info, MPI_Comm* out) {
  return MPI_Comm_split(comm, type == MPI_UNDEFINED ? MPI_UNDEFINED : 0, key, out);
}
inline int MPI_Comm_free(MPI_Comm* comm) {
  *comm = MPI_COMM_NULL;
  return MPI_SUCCESS;
}
inline int MPI_Barrier(MPI_Comm) { return MPI_SUCCESS; }
inline int MPI_Ibarrier(MPI_Comm, MPI_Request* request) {  // one process: complete at once
  *request = MPI_REQUEST_NULL;
  return MPI_SUCCESS;
}

// Collectives of one rank: the input is the output.
inline int MPI_Bcast(void*, int, MPI_Datatype, int, MPI_Comm) { return MPI_SUCCESS; }
inline int MPI_Allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op, MPI_Comm) {
  if (send != MPI_IN_PLACE) minilst::single_process::copy(recv, send, std::size_t(count) * type);
  return MPI_SUCCESS;
}
inline int MPI_Allgather(const void* send, int count, MPI_Datatype type, void* recv, int, MPI_Datatype, MPI_Comm) {
  if (send != MPI_IN_PLACE) minilst::single_process::copy(recv, send, std::size_t(count) * type);
  return MPI_SUCCESS;
}
inline int MPI_Allgatherv(const void* send, int count, MPI_Datatype type, void* recv, const int*, const int* displs,
                          MPI_Datatype rtype, MPI_Comm) {
  if (send != MPI_IN_PLACE)
    minilst::single_process::copy(static_cast<char*>(recv) + std::size_t(displs[0]) * rtype, send,
                                  std::size_t(count) * type);
  return MPI_SUCCESS;
}
// Gathers to the root, which is this rank: its own block.
inline int MPI_Gather(const void* send, int count, MPI_Datatype type, void* recv, int, MPI_Datatype, int, MPI_Comm) {
  if (send != MPI_IN_PLACE) minilst::single_process::copy(recv, send, std::size_t(count) * type);
  return MPI_SUCCESS;
}
inline int MPI_Gatherv(const void* send, int count, MPI_Datatype type, void* recv, const int*, const int* displs,
                       MPI_Datatype rtype, int, MPI_Comm) {
  if (send != MPI_IN_PLACE)
    minilst::single_process::copy(static_cast<char*>(recv) + std::size_t(displs[0]) * rtype, send,
                                  std::size_t(count) * type);
  return MPI_SUCCESS;
}
inline double MPI_Wtime() {  // seconds on a monotonic clock, as MPI's
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
inline int MPI_Iallgather(const void* send, int count, MPI_Datatype type, void* recv, int rcount, MPI_Datatype rtype,
                          MPI_Comm comm, MPI_Request* request) {
  *request = MPI_REQUEST_NULL;
  return MPI_Allgather(send, count, type, recv, rcount, rtype, comm);
}
inline int MPI_Ireduce_scatter_block(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op, MPI_Comm,
                                     MPI_Request* request) {
  *request = MPI_REQUEST_NULL;
  if (send != MPI_IN_PLACE) minilst::single_process::copy(recv, send, std::size_t(count) * type);
  return MPI_SUCCESS;
}
inline int MPI_Alltoallv(const void* send, const int* scounts, const int* sdispls, MPI_Datatype stype, void* recv,
                         const int*, const int* rdispls, MPI_Datatype rtype, MPI_Comm) {
  if (send != MPI_IN_PLACE)
    minilst::single_process::copy(static_cast<char*>(recv) + std::size_t(rdispls[0]) * rtype,
                                  static_cast<const char*>(send) + std::size_t(sdispls[0]) * stype,
                                  std::size_t(scounts[0]) * stype);
  return MPI_SUCCESS;
}
inline int MPI_Ialltoallv(const void* send, const int* scounts, const int* sdispls, MPI_Datatype stype, void* recv,
                          const int* rcounts, const int* rdispls, MPI_Datatype rtype, MPI_Comm comm,
                          MPI_Request* request) {
  *request = MPI_REQUEST_NULL;
  return MPI_Alltoallv(send, scounts, sdispls, stype, recv, rcounts, rdispls, rtype, comm);
}

// Messages to oneself: a send completes at once (the data is kept until received);
// a receive completes when a send of its tag has come.
inline int MPI_Send(const void* buf, int count, MPI_Datatype type, int peer, int tag, MPI_Comm) {
  namespace sp = minilst::single_process;
  sp::check_peer(peer);
  const std::size_t bytes = std::size_t(count) * type;
  auto& s = sp::state();
  for (auto it = s.posted.begin(); it != s.posted.end(); ++it) {
    if (it->tag != tag && it->tag != MPI_ANY_TAG) continue;
    sp::Message m{tag, std::vector<char>(bytes)};
    sp::copy(m.data.data(), buf, bytes);
    sp::deliver(m, it->buf, it->capacity);
    s.incomplete.erase(std::remove(s.incomplete.begin(), s.incomplete.end(), it->request), s.incomplete.end());
    s.posted.erase(it);
    return MPI_SUCCESS;
  }
  sp::Message m{tag, std::vector<char>(bytes)};
  sp::copy(m.data.data(), buf, bytes);
  s.sent.push_back(std::move(m));
  return MPI_SUCCESS;
}
inline int MPI_Isend(const void* buf, int count, MPI_Datatype type, int peer, int tag, MPI_Comm comm,
                     MPI_Request* request) {
  *request = MPI_REQUEST_NULL;
  return MPI_Send(buf, count, type, peer, tag, comm);
}
inline int MPI_Irecv(void* buf, int count, MPI_Datatype type, int peer, int tag, MPI_Comm, MPI_Request* request) {
  namespace sp = minilst::single_process;
  sp::check_peer(peer);
  auto& s = sp::state();
  const std::size_t capacity = std::size_t(count) * type;
  for (auto it = s.sent.begin(); it != s.sent.end(); ++it) {
    if (it->tag != tag && tag != MPI_ANY_TAG) continue;
    sp::deliver(*it, buf, capacity);
    s.sent.erase(it);
    *request = MPI_REQUEST_NULL;
    return MPI_SUCCESS;
  }
  *request = s.next_request++;
  s.posted.push_back({tag, buf, capacity, *request});
  s.incomplete.push_back(*request);
  return MPI_SUCCESS;
}
inline int MPI_Test(MPI_Request* request, int* done, MPI_Status*) {
  const auto& open = minilst::single_process::state().incomplete;
  *done = std::find(open.begin(), open.end(), *request) == open.end();
  if (*done) *request = MPI_REQUEST_NULL;
  return MPI_SUCCESS;
}
inline int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  int done = 0;
  MPI_Test(request, &done, status);
  if (!done) minilst::single_process::fail("waiting for a message to itself that was never sent");
  return MPI_SUCCESS;
}
inline int MPI_Probe(int peer, int tag, MPI_Comm, MPI_Status* status) {
  namespace sp = minilst::single_process;
  sp::check_peer(peer);
  for (const auto& m : sp::state().sent)
    if (m.tag == tag || tag == MPI_ANY_TAG) {
      if (status) *status = MPI_Status{0, m.tag, MPI_SUCCESS, m.data.size()};
      return MPI_SUCCESS;
    }
  sp::fail("probing for a message to itself that was never sent");
}
inline int MPI_Recv(void* buf, int count, MPI_Datatype type, int peer, int tag, MPI_Comm comm, MPI_Status* status) {
  MPI_Request request;
  MPI_Irecv(buf, count, type, peer, tag, comm, &request);
  if (status) *status = MPI_Status{0, tag, MPI_SUCCESS, std::size_t(count) * type};
  return MPI_Wait(&request, MPI_STATUS_IGNORE);
}
inline int MPI_Get_count(const MPI_Status* status, MPI_Datatype type, int* count) {
  *count = int(status->bytes / std::size_t(type));
  return MPI_SUCCESS;
}
