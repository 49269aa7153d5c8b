// Build check for the NCCL backend, which the CPU-only CI cannot run: compiling
// and linking this file against NCCL and the CUDA runtime compiles every method
// of NcclCommunicator. `--version` (the ctest) prints the NCCL and CUDA runtime
// versions without touching the CUDA runtime, so it runs without a GPU or driver.
// Without arguments it is a small functional check (one GPU per rank, not run
// in CI): mpiexec -n 2 nccl_compile_check
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "parallel/nccl_communicator.hpp"

namespace {

int print_versions() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) {
    std::fprintf(stderr, "ncclGetVersion failed\n");
    return 1;
  }
  // NCCL_VERSION_CODE: major*1000+minor*100+patch up to 2.8, major*10000+minor*100+patch after.
  const int major = v >= 10000 ? v / 10000 : v / 1000;
  const int minor = v >= 10000 ? (v / 100) % 100 : (v / 100) % 10;
  std::printf("NCCL %d.%d.%d (library, code %d; headers %d.%d.%d)\n", major, minor, v % 100, v, NCCL_MAJOR, NCCL_MINOR,
              NCCL_PATCH);
  std::printf("CUDA runtime %d.%d (compiled against, CUDART_VERSION %d)\n", CUDART_VERSION / 1000,
              (CUDART_VERSION % 1000) / 10, CUDART_VERSION);
  return 0;
}

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

template <class T>
T* to_device(const std::vector<T>& h) {
  T* d = nullptr;
  check_cuda(cudaMalloc(reinterpret_cast<void**>(&d), h.size() * sizeof(T) + 1), "cudaMalloc");
  check_cuda(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  return d;
}

template <class T>
std::vector<T> to_host(const T* d, std::size_t n) {
  std::vector<T> h(n);
  check_cuda(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
  return h;
}

// Every NcclCommunicator method, with results checked. Returns the number of failures.
int exercise(minilst::Communicator& comm, cudaStream_t stream) {
  using minilst::DType;
  const int rank = comm.rank(), size = comm.size();
  int failures = 0;
  auto expect = [&](bool ok, const char* what) {
    if (!ok) {
      std::fprintf(stderr, "rank %d: %s failed\n", rank, what);
      ++failures;
    }
  };
  expect(comm.backend() == "nccl", "backend()");
  if (auto* nc = dynamic_cast<minilst::NcclCommunicator*>(&comm))
    expect(nc->nccl_comm() != nullptr && nc->stream() == stream && nc->mpi_comm() != MPI_COMM_NULL, "accessors");

  // allreduce_sum: sum of rank + 1 over the ranks.
  std::vector<double> h(5, double(rank + 1));
  double* d = to_device(h);
  comm.allreduce_sum(d, h.size(), DType::f64, minilst::CommOp::allreduce);
  for (double x : to_host(d, h.size())) expect(x == size * (size + 1) / 2.0, "allreduce_sum");
  cudaFree(d);

  // alltoallv: rank r sends p + 1 values r * 100 + p to peer p.
  std::vector<std::int64_t> sc(size), sd(size), rc(size), rd(size);
  std::int64_t ns = 0, nr = 0;
  for (int p = 0; p < size; ++p) {
    sc[p] = p + 1, sd[p] = ns, ns += sc[p];
    rc[p] = rank + 1, rd[p] = nr, nr += rc[p];
  }
  std::vector<float> hs(ns);
  for (int p = 0; p < size; ++p)
    for (std::int64_t i = 0; i < sc[p]; ++i) hs[sd[p] + i] = float(rank * 100 + p);
  float* ds = to_device(hs);
  float* dr = to_device(std::vector<float>(nr, -1.f));
  comm.alltoallv(ds, sc, sd, dr, rc, rd, DType::f32, minilst::CommOp::alltoall);
  auto hr = to_host(dr, nr);
  for (int p = 0; p < size; ++p)
    for (std::int64_t i = 0; i < rc[p]; ++i) expect(hr[rd[p] + i] == float(p * 100 + rank), "alltoallv");
  // ialltoallv (head-chunked Ulysses): the same exchange on the communication stream, completed by wait.
  check_cuda(cudaMemset(dr, 0, std::size_t(nr) * sizeof(float)), "cudaMemset");
  auto areq = comm.ialltoallv(ds, sc, sd, dr, rc, rd, DType::f32, minilst::CommOp::alltoall);
  comm.wait(areq);
  expect(!areq, "wait clears the all-to-all's request");
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  hr = to_host(dr, nr);
  for (int p = 0; p < size; ++p)
    for (std::int64_t i = 0; i < rc[p]; ++i) expect(hr[rd[p] + i] == float(p * 100 + rank), "ialltoallv");
  cudaFree(ds);
  cudaFree(dr);

  // A ring hop: send to the next rank, receive from the previous, both posted before the waits.
  std::int64_t* dsend = to_device(std::vector<std::int64_t>(1000, rank));
  std::int64_t* drecv = to_device(std::vector<std::int64_t>(1000, -1));
  auto sreq = comm.isend(dsend, 1000, DType::i64, (rank + 1) % size, 7, minilst::CommOp::ring);
  auto rreq = comm.irecv(drecv, 1000, DType::i64, (rank + size - 1) % size, 7);
  comm.launch(7);  // the hop starts here, as RingHop::start does
  comm.wait(rreq);
  comm.wait(sreq);
  expect(!sreq && !rreq, "wait clears the request");
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");  // the waits are the compute stream's
  for (auto x : to_host(drecv, 1000)) expect(x == (rank + size - 1) % size, "isend/irecv ring");
  cudaFree(dsend);
  cudaFree(drecv);

  // Two tags as in the ring backward pass: a tag-2 send queued with a tag-1 hop is
  // launched only when tag 2 is waited, after the matching receive was posted.
  std::int64_t* d1 = to_device(std::vector<std::int64_t>(2000, 10 + rank));
  std::int64_t* d2 = to_device(std::vector<std::int64_t>(3000, 20 + rank));
  std::int64_t* r1 = to_device(std::vector<std::int64_t>(2000, -1));
  std::int64_t* r2 = to_device(std::vector<std::int64_t>(3000, -1));
  auto s1 = comm.isend(d1, 2000, DType::i64, (rank + 1) % size, 1, minilst::CommOp::ring);
  auto q1 = comm.irecv(r1, 2000, DType::i64, (rank + size - 1) % size, 1);
  auto s2 = comm.isend(d2, 3000, DType::i64, (rank + 1) % size, 2, minilst::CommOp::ring);
  comm.wait(q1);
  comm.wait(s1);
  auto q2 = comm.irecv(r2, 3000, DType::i64, (rank + size - 1) % size, 2);
  comm.wait(q2);
  comm.wait(s2);
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  for (auto x : to_host(r1, 2000)) expect(x == 10 + (rank + size - 1) % size, "two tags: tag 1");
  for (auto x : to_host(r2, 3000)) expect(x == 20 + (rank + size - 1) % size, "two tags: tag 2");
  for (auto* p : {d1, d2, r1, r2}) cudaFree(p);

  comm.barrier();
  auto sent = [&](minilst::CommOp op) { return comm.bytes_sent()[op]; };
  expect(sent(minilst::CommOp::allreduce) == (size > 1 ? 5u * 8 : 0u), "bytes allreduce");
  expect(sent(minilst::CommOp::alltoall) == 2 * std::uint64_t(ns - sc[rank]) * 4, "bytes alltoallv + ialltoallv");
  expect(sent(minilst::CommOp::ring) == (size > 1 ? (1000u + 2000u + 3000u) * 8 : 0u), "bytes ring");
  comm.reset_bytes();
  expect(comm.bytes_sent() == minilst::CommBytes{}, "reset_bytes");
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--version") == 0) return print_versions();

  MPI_Init(&argc, &argv);
  int failures = 0;
  try {
    MPI_Comm node;
    int local = 0, ndev = 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    check_cuda(cudaGetDeviceCount(&ndev), "cudaGetDeviceCount");
    check_cuda(cudaSetDevice(local % ndev), "cudaSetDevice");
    cudaStream_t stream;
    check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
    {
      minilst::NcclCommunicator world(MPI_COMM_WORLD, stream);
      failures += exercise(world, stream);
      auto parity = world.split(world.rank() % 2, world.rank());
      failures += exercise(*parity, stream);
      if (world.rank() == 0)
        std::printf("nccl_compile_check: %d ranks, %s\n", world.size(), failures ? "FAILED" : "all checks passed");
    }
    check_cuda(cudaStreamDestroy(stream), "cudaStreamDestroy");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nccl_compile_check: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
