#include "attention/attention_geometry.hpp"

#include <string>

namespace minilst {

std::string AttentionGeometry::name() const {
  const std::string ring = R() > 1 ? std::string(parallel.variant == RingVariant::flash ? "ring" : "ring-rsa") + "(" +
                                         name_of(parallel.layout) + ")"
                                   : "";
  if (U() > 1 && R() > 1)
    return std::string("hybrid ulysses") + (head_chunks > 1 ? "(" + std::to_string(head_chunks) + " head chunks)" : "") +
           " x " + ring;
  if (U() > 1 && head_chunks > 1) return "ulysses(" + std::to_string(head_chunks) + " head chunks)";
  if (U() > 1) return "ulysses";
  if (R() > 1) return ring;
  return "local";
}

HeadRange AttentionGeometry::chunk_heads(int member, bool kv, int c) const {
  if (!kv) {
    const HeadRange all = ulysses_q_heads(member, U(), heads);
    const int n = all.count / head_chunks;
    return {all.first + c * n, n};
  }
  const HeadRange all = ulysses_kv_heads(member, U(), kv_heads);
  if (all.count % head_chunks != 0) return all;  // one kv head: every chunk reads it
  const int n = all.count / head_chunks;
  return {all.first + c * n, n};
}

AttentionGeometry AttentionGeometry::chunk() const {
  if (head_chunks == 1) return *this;
  AttentionGeometry g = *this;
  g.chunk_q = chunk_q_heads();
  g.chunk_kv = chunk_kv_heads();
  g.head_chunks = 1;
  return g;
}

AttentionGeometry attention_geometry(const ModelConfig& cfg, const ParallelConfig& par, const SequenceLayout& layout,
                                     int sp) {
  AttentionGeometry g;
  g.parallel = par;
  g.heads = cfg.heads;
  g.kv_heads = cfg.kv_heads;
  g.head_dim = cfg.head_dim();
  g.me_ulysses = sp % par.ulysses;
  g.me_ring = sp / par.ulysses;
  g.local_rows = layout.tokens(sp);
  g.head_chunks = head_chunks(cfg, par);
  for (int r = 0; r < par.ring; ++r) g.block_rows.push_back(layout.group_tokens(r));
  if (par.ulysses > 1)
    for (int u = 0; u < par.ulysses; ++u) g.member_rows.push_back(layout.tokens(g.me_ring * par.ulysses + u));
  return g;
}

}  // namespace minilst
