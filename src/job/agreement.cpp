#include "job/agreement.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <vector>

#include "core/fnv1a.hpp"

namespace minilst {

namespace {

// A text's fingerprint, compared across ranks.
std::uint64_t fingerprint(const std::string& text) {
  Fnv1a f;
  f.add(text);
  return f.h;
}

struct Comparison {
  std::vector<int> failed;  // ranks that report an error
  int differs = -1;         // the first rank whose text differs from rank 0's (-1: none)
  std::string theirs;       // rank 0 only: that rank's text
};

// Collective: every rank's (error?, fingerprint of text); the differing rank sends its text to rank 0.
Comparison compare(const std::string& text, bool failed_here, MPI_Comm comm) {
  int rank = 0, nranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &nranks);
  const std::uint64_t mine[2] = {failed_here ? 1ull : 0ull, fingerprint(text)};
  std::vector<std::uint64_t> all(2 * std::size_t(nranks));
  MPI_Allgather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, comm);
  Comparison c;
  for (int r = 0; r < nranks; ++r) {
    if (all[2 * r]) c.failed.push_back(r);
    else if (c.differs < 0 && !all[0] && all[2 * r + 1] != all[1]) c.differs = r;
  }
  if (!c.failed.empty() || c.differs < 0) return c;
  if (rank == c.differs) {
    MPI_Send(text.data(), int(text.size()), MPI_CHAR, 0, 0, comm);
  } else if (rank == 0) {
    MPI_Status st;
    MPI_Probe(c.differs, 0, comm, &st);
    int n = 0;
    MPI_Get_count(&st, MPI_CHAR, &n);
    c.theirs.assign(std::size_t(n), '\0');
    MPI_Recv(c.theirs.data(), n, MPI_CHAR, c.differs, 0, comm, MPI_STATUS_IGNORE);
  }
  return c;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, sep);) out.push_back(item);
  return out;
}

// The first differing key of two resolved decks ("  key: value" lines under "section:" lines).
std::string deck_difference(const std::string& ours, const std::string& theirs, int rank) {
  const auto a = split(ours, '\n'), b = split(theirs, '\n');
  std::string section;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (!a[i].empty() && a[i][0] != ' ') section = a[i].substr(0, a[i].find(':'));
    if (a[i] == b[i]) continue;
    const auto value = [](const std::string& l) { return l.substr(std::min(l.size(), l.find(':') + 2)); };
    const auto start = a[i].find_first_not_of(' ');
    const auto key = a[i].substr(start, a[i].find(':') - start);
    return section + "." + key + " = " + value(a[i]) + " on rank 0, " + value(b[i]) + " on rank " + std::to_string(rank);
  }
  return "rank " + std::to_string(rank) + " differs from rank 0";
}

std::string argument_difference(const std::string& ours, const std::string& theirs, int rank) {
  const auto a = split(ours, '\0'), b = split(theirs, '\0');
  const auto quoted = [](const std::vector<std::string>& v, std::size_t i) {
    return i < v.size() ? "'" + v[i] + "'" : std::string("nothing");
  };
  for (std::size_t i = 0; i < std::max(a.size(), b.size()); ++i)
    if (i >= a.size() || i >= b.size() || a[i] != b[i])
      return "argument " + std::to_string(i + 1) + " is " + quoted(a, i) + " on rank 0 and " + quoted(b, i) +
             " on rank " + std::to_string(rank);
  return "rank " + std::to_string(rank) + " differs from rank 0";
}

int rank_of(MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  return rank;
}

}  // namespace

int agree_on_command_line(int argc, char** argv, MPI_Comm comm) {
  std::string args;
  for (int i = 1; i < argc; ++i) args += std::string(argv[i]) + '\0';
  const auto c = compare(args, false, comm);
  if (c.differs < 0) return 0;
  if (rank_of(comm) == 0)
    std::fprintf(stderr, "error: the command line differs between ranks (%s): every rank must run the same command\n",
                 argument_difference(args, c.theirs, c.differs).c_str());
  return 2;
}

int agree_on_deck(const std::string& resolved_yaml, const std::string& error, MPI_Comm comm) {
  int nranks = 1;
  MPI_Comm_size(comm, &nranks);
  const int rank = rank_of(comm);
  const auto c = compare(resolved_yaml, !error.empty(), comm);
  if (int(c.failed.size()) == nranks) {  // the same bad deck everywhere: rank 0 says why
    if (rank == 0) std::fprintf(stderr, "error: %s\n", error.c_str());
    return 2;
  }
  if (!c.failed.empty()) {  // some ranks could not read it: each says why, rank 0 says which
    if (!error.empty()) std::fprintf(stderr, "error (rank %d): %s\n", rank, error.c_str());
    std::string list;
    for (const int r : c.failed) list += (list.empty() ? "" : ", ") + std::to_string(r);
    if (rank == 0)
      std::fprintf(stderr, "error: the deck could not be used on rank(s) %s of %d: every rank must read the same deck\n",
                   list.c_str(), nranks);
    return 2;
  }
  if (c.differs < 0) return 0;
  if (rank == 0)
    std::fprintf(stderr, "error: the deck differs between ranks (%s): every rank must run the same deck\n",
                 deck_difference(resolved_yaml, c.theirs, c.differs).c_str());
  return 2;
}

ResolvedKernels agree_on_kernels(const KernelChoice& request, Precision precision, int head_dim, MPI_Comm comm,
                                 double run_flops) {
  unsigned mine[2] = {runnable_gemm_bf16_paths(), runnable_gemm_fp32_paths()}, common[2] = {0, 0};
  MPI_Allreduce(mine, common, 2, MPI_UNSIGNED, MPI_BAND, comm);
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  ResolvedKernels resolved;
  if (rank == 0) resolved = resolve_kernel_choice(request, precision, head_dim, common[0], common[1], run_flops);
  int parts[4] = {int(resolved.choice.variant), int(resolved.choice.attention), int(resolved.choice.gemm_bf16),
                  int(resolved.choice.gemm_fp32)};
  MPI_Bcast(parts, 4, MPI_INT, 0, comm);
  if (rank != 0) {
    resolved.choice = {KernelVariant(parts[0]), AttentionKernel(parts[1]), GemmPath(parts[2]), GemmPath(parts[3])};
    resolved.gemm_bf16_reason = resolved.gemm_fp32_reason = resolved.attention_reason = "rank 0's resolution";
  }
  return resolved;
}

}  // namespace minilst
