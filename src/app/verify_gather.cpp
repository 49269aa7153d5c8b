#include "app/verify_gather.hpp"

#include <climits>
#include <stdexcept>
#include <string>

namespace minilst::verify {

namespace {
// A rank's placement as int64s: d, S_local, S_group, head_first, head_count, head_chunks, q_first,
// q_count, kv_first, kv_count, kv_partial, positions, group positions.
constexpr int kPlacementHeader = 11;
std::vector<std::int64_t> pack(const RankPlacement& p) {
  std::vector<std::int64_t> out{p.replica,   std::int64_t(p.positions.size()), std::int64_t(p.group_positions.size()),
                                p.head_first, p.head_count, p.head_chunks, p.q_first, p.q_count, p.kv_first,
                                p.kv_count, p.kv_partial ? 1 : 0};
  out.insert(out.end(), p.positions.begin(), p.positions.end());
  out.insert(out.end(), p.group_positions.begin(), p.group_positions.end());
  return out;
}
RankPlacement unpack(const std::int64_t* v) {
  RankPlacement p;
  p.replica = int(v[0]);
  const std::int64_t* at = v + kPlacementHeader;
  p.positions.assign(at, at + v[1]);
  p.group_positions.assign(at + v[1], at + v[1] + v[2]);
  p.head_first = int(v[3]);
  p.head_count = int(v[4]);
  p.head_chunks = int(v[5]);
  p.q_first = int(v[6]);
  p.q_count = int(v[7]);
  p.kv_first = int(v[8]);
  p.kv_count = int(v[9]);
  p.kv_partial = v[10] != 0;
  return p;
}

int checked_count(std::size_t n) {
  if (n > std::size_t(INT_MAX))
    throw std::runtime_error("verify: a rank's captured tensors exceed 2^31 values: verify a smaller deck");
  return int(n);
}

// Gathers each rank's vector to rank 0 (displacements in `offsets`, one more than the ranks).
template <class V>
std::vector<V> gather(const std::vector<V>& mine, MPI_Datatype type, std::vector<int>& offsets, MPI_Comm comm) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int n = checked_count(mine.size());
  std::vector<int> counts(size);
  MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm);
  offsets.assign(size + 1, 0);
  for (int r = 0; r < size && rank == 0; ++r) offsets[r + 1] = checked_count(std::size_t(offsets[r]) + counts[r]);
  std::vector<V> all(rank == 0 ? std::size_t(offsets[size]) : 0);
  MPI_Gatherv(mine.data(), n, type, all.data(), counts.data(), offsets.data(), type, 0, comm);
  return all;
}
}  // namespace

StepCapture gather_to_root(const StepCapture& mine, const RankPlacement& where, const CaptureShape& shape, MPI_Comm comm) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int A = shape.micro_per_replica, L = shape.layers;
  if (int(mine.micro.size()) != A)
    throw std::runtime_error("verify: rank " + std::to_string(rank) + " captured " + std::to_string(mine.micro.size()) +
                             " micro-steps of " + std::to_string(A));
  std::vector<double> data;  // [A][L][tensor] row-major, the tensors in Tensor order
  for (const auto& micro : mine.micro)
    for (const auto& layer : micro)
      for (int t = 0; t < kTensors; ++t) data.insert(data.end(), layer[t].begin(), layer[t].end());
  std::vector<int> meta_at, data_at;
  const auto metas = gather(pack(where), MPI_INT64_T, meta_at, comm);
  const auto values = gather(data, MPI_DOUBLE, data_at, comm);
  StepCapture out;
  out.layers = L;
  if (rank != 0) return out;

  const std::int64_t S = shape.seq_len;
  out.micro.assign(std::size_t(A) * shape.replicas, std::vector<LayerTensors>(L));
  for (auto& micro : out.micro)
    for (auto& layer : micro)
      for (int t = 0; t < kTensors; ++t)
        if (t != kLse || shape.lse) layer[t].assign(std::size_t(S * shape.cols(t)), 0.0);
  for (int r = 0; r < size; ++r) {
    const RankPlacement p = unpack(metas.data() + meta_at[r]);
    const double* v = values.data() + data_at[r];
    for (int m = 0; m < A; ++m)
      for (int l = 0; l < L; ++l)
        for (int t = 0; t < kTensors; ++t) {
          if (t == kLse && !shape.lse) continue;
          const bool stats = t == kLse, kv = t == kK || t == kV || t == kDk || t == kDv;
          const auto& rows = stats ? p.group_positions : p.positions;
          const std::int64_t h = shape.head_dim, width = shape.cols(t);
          const std::int64_t first = stats ? p.q_first + p.head_first : (kv ? p.kv_first : p.q_first) * h;
          const int heads = kv ? p.kv_count : p.q_count;  // the slice's (-1: every one)
          const std::int64_t cols = stats ? p.head_count : heads < 0 ? width : heads * h;
          const bool add = p.kv_partial && (t == kDk || t == kDv);  // the copies' partial sums
          auto& g = out.micro.at(std::size_t(p.replica) * A + m)[l][t];
          const int blocks = stats ? p.head_chunks : 1;  // lse: chunk by chunk
          const std::int64_t per = cols / blocks;
          for (int b = 0; b < blocks; ++b)
            for (std::size_t i = 0; i < rows.size(); ++i)
              for (std::int64_t j = 0; j < per; ++j) {
                double& dst = g.at(std::size_t(rows[i] * width + first + b * per + j));
                dst = add ? dst + *v++ : *v++;
              }
        }
    if (v != values.data() + data_at[r + 1])
      throw std::runtime_error("verify: rank " + std::to_string(r) + " sent captured tensors of an unexpected size");
  }
  return out;
}

}  // namespace minilst::verify
