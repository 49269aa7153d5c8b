#include "model/memory_model.hpp"

#include <algorithm>
#include <stdexcept>

#include "memory/activation_store.hpp"
#include "model/lm_head.hpp"
#include "model/mlp_block.hpp"
#include "model/parameters.hpp"

namespace minilst {

using u64 = std::uint64_t;

OffloadLayerBytes offload_layer_bytes(const ModelConfig& c, std::int64_t seq_len, std::size_t T, std::size_t A) {
  const double S = double(seq_len), d = c.hidden, H = c.heads, Hh = H * c.head_dim(),
               Gh = double(c.kv_heads) * c.head_dim();
  return {S * d * T, S * Hh * T + S * H * A, S * (Hh + 2 * Gh + d) * T};
}

std::uint64_t predict_host_offload(const ModelConfig& c, MemoryPolicy policy, double alpha, std::int64_t seq_len,
                                   std::size_t T, std::size_t A) {
  if (!uses_host_memory(policy)) return 0;
  const u64 S = u64(seq_len), d = c.hidden, L = c.layers, H = c.heads;
  const u64 Hh = H * c.head_dim(), Gh = u64(c.kv_heads) * c.head_dim();
  u64 bytes = (L >= 1 ? L - 1 : 0) * S * d * T;            // layers 0..L-2: their x's buffer is reused
  if (policy == MemoryPolicy::offload) {
    const u64 r = u64(offload_host_rows(alpha, seq_len));  // layers 0..L-3: their saved buffers are reused
    bytes += (L >= 2 ? L - 2 : 0) * (S * Hh * T + S * H * A + r * (Hh + 2 * Gh + d) * T);
  }
  return bytes;
}

namespace {

// The allocation sequence, replayed: current and high-water bytes per category
// (the tracker's rules), and the step buffers' trace (the step arena's rules).
class Sim {
 public:
  int alloc(MemCategory c, u64 bytes, const std::string& key) {
    const int h = int(live_.size());
    live_.push_back({c, bytes, true, -1});
    cur_[int(c)] += bytes;
    high_[int(c)] = std::max(high_[int(c)], cur_[int(c)]);
    if (is_device(c)) {
      device_ += bytes;
      device_high_ = std::max(device_high_, device_);
    }
    if (in_step_ && (c == MemCategory::activations || c == MemCategory::workspace || c == MemCategory::comm)) {
      live_[h].trace = int(trace_.size());
      trace_.push_back({scoped(key), bytes, clock_++, -1, segment_});
    }
    return h;
  }
  void free(int h) {
    auto& b = live_.at(h);
    if (!b.alive) throw std::logic_error("memory model: a buffer freed twice");
    b.alive = false;
    cur_[int(b.c)] -= b.bytes;
    if (is_device(b.c)) device_ -= b.bytes;
    if (b.trace >= 0) {
      auto& t = trace_[b.trace];
      t.end = clock_++;
      if (t.segment != segment_) t.segment = -1;
    }
  }
  void begin_step() { in_step_ = true; }
  void begin_segment(const std::string& kind) {
    segment_ = int(segments_.size());
    segments_.push_back({kind, clock_++, 0});
  }
  void end_segment() {
    segments_[segment_].end = clock_++;
    for (const auto& b : live_)
      if (b.alive && b.trace >= 0 && trace_[b.trace].segment == segment_) trace_[b.trace].segment = -1;
    segment_ = -1;
  }
  void push_scope(const std::string& s) { scopes_.push_back(s); }
  void pop_scope() { scopes_.pop_back(); }

  MemoryPrediction result() const {
    MemoryPrediction p;
    for (int c = 0; c < kNumMemCategories; ++c) p.bytes[category_name(MemCategory(c))] = high_[c];
    p.bytes["device_total"] = device_high_;
    p.trace = trace_;
    p.segments = segments_;
    return p;
  }

 private:
  struct Buffer {
    MemCategory c;
    u64 bytes;
    bool alive;
    int trace;
  };
  std::string scoped(const std::string& key) const {
    std::string s;
    for (const auto& n : scopes_) s += n + "/";
    return s + key;
  }
  std::vector<Buffer> live_;
  u64 cur_[kNumMemCategories] = {}, high_[kNumMemCategories] = {}, device_ = 0, device_high_ = 0;
  bool in_step_ = false;
  std::vector<TraceBuffer> trace_;
  std::vector<TraceSegment> segments_;
  int segment_ = -1;
  std::int64_t clock_ = 0;
  std::vector<std::string> scopes_;
};

struct Scope {  // MemScope's twin
  Sim& sim;
  bool segment;
  Scope(Sim& s, const std::string& name, const char* kind = nullptr) : sim(s), segment(kind != nullptr) {
    sim.push_scope(name);
    if (segment) sim.begin_segment(kind);
  }
  ~Scope() {
    if (segment) sim.end_segment();
    sim.pop_scope();
  }
};

const auto ACT = MemCategory::activations;
const auto WS = MemCategory::workspace;
const auto COMM = MemCategory::comm;

// ---- attention strategies (src/attention/) ----

// What one strategy of the layout does, on this rank.
struct AttentionGeometry {
  int U = 1, R = 1;
  std::int64_t S_local = 0;             // the layer's tokens
  std::vector<std::int64_t> member_rows;  // Ulysses: rows of each member
  std::int64_t group_rows = 0;          // Ulysses: rows after the all-to-all
  int q_me = 0, kv_me = 0;              // heads after the all-to-all
  std::vector<int> q_count, kv_count;   // per member
  std::vector<std::int64_t> block_rows; // ring: rows of each ring member's block
  int me_ring = 0;
  RingVariant variant = RingVariant::flash;
};

struct Shapes {
  u64 T, A, h;
};

// Ring attention on Sq = block_rows[me] rows with Hl query and Gl kv heads.
void sim_ring_forward(Sim& sim, const AttentionGeometry& g, const Shapes& s, int Hl, int Gl) {
  const u64 Sq = u64(g.block_rows[g.me_ring]), Hh = u64(Hl) * s.h, Gh = u64(Gl) * s.h;
  u64 max_rows = 0, S = 0;
  for (auto r : g.block_rows) {
    max_rows = std::max<u64>(max_rows, u64(r));
    S += u64(r);
  }
  if (g.variant == RingVariant::rsa) {
    const int scores = sim.alloc(WS, u64(Hl) * Sq * S * s.A, "rsa_scores");
    const int a = sim.alloc(COMM, max_rows * Gh * s.T, "rsa_block_a"), b = sim.alloc(COMM, max_rows * Gh * s.T, "rsa_block_b");
    const int acc = sim.alloc(WS, Sq * Hh * s.A, "rsa_o_acc");
    for (int x : {acc, b, a, scores}) sim.free(x);
    return;
  }
  const int a = sim.alloc(COMM, 2 * max_rows * Gh * s.T, "ring_kv_a"), b = sim.alloc(COMM, 2 * max_rows * Gh * s.T, "ring_kv_b");
  const int acc = sim.alloc(WS, Sq * Hh * s.A, "ring_o_acc"), blk = sim.alloc(WS, Sq * Hh * s.T, "ring_o_block");
  const int lse = sim.alloc(WS, Sq * u64(Hl) * s.A, "ring_lse_block");
  for (int x : {lse, blk, acc, b, a}) sim.free(x);
}

void sim_ring_backward(Sim& sim, const AttentionGeometry& g, const Shapes& s, int Hl, int Gl) {
  const u64 Sq = u64(g.block_rows[g.me_ring]), Gh = u64(Gl) * s.h;
  u64 max_rows = 0;
  for (auto r : g.block_rows) max_rows = std::max<u64>(max_rows, u64(r));
  const u64 max_n = 2 * max_rows * Gh * s.T;
  const int delta = sim.alloc(WS, Sq * u64(Hl) * s.A, "attn_delta");
  const int a = sim.alloc(COMM, max_n, "ring_kv_a"), b = sim.alloc(COMM, max_n, "ring_kv_b");
  const int in = sim.alloc(COMM, max_n, "ring_dkv_in"), out = sim.alloc(COMM, max_n, "ring_dkv_out");
  const int grad = sim.alloc(WS, max_n, "ring_dkv_block");
  for (int x : {grad, out, in, b, a, delta}) sim.free(x);
}

void sim_local_backward(Sim& sim, u64 rows, u64 heads, const Shapes& s) {
  sim.free(sim.alloc(WS, rows * heads * s.A, "attn_delta"));
}

// Ulysses' all-to-alls around the inner strategy (local, or the ring: the hybrid).
int sim_scatter(Sim& sim, const AttentionGeometry& g, const Shapes& s, bool kv, const char* label) {
  const auto& count = kv ? g.kv_count : g.q_count;
  u64 total = 0;
  for (int c : count) total += u64(g.S_local) * u64(c) * s.h;
  const int send = sim.alloc(COMM, total * s.T, "ulysses_send");
  const int y = sim.alloc(COMM, u64(g.group_rows) * u64(kv ? g.kv_me : g.q_me) * s.h * s.T, label);
  sim.free(send);
  return y;
}
void sim_gather(Sim& sim, const AttentionGeometry& g, const Shapes& s, bool kv) {
  const auto& count = kv ? g.kv_count : g.q_count;
  u64 total = 0;
  for (int c : count) total += u64(g.S_local) * u64(c) * s.h;
  sim.free(sim.alloc(COMM, total * s.T, "ulysses_recv"));
}

void sim_attention_forward(Sim& sim, const AttentionGeometry& g, const Shapes& s, int H, int G) {
  if (g.U == 1) {
    if (g.R > 1) sim_ring_forward(sim, g, s, H, G);
    return;  // local: nothing beyond the saved statistics
  }
  const int qg = sim_scatter(sim, g, s, false, "ulysses_q"), kg = sim_scatter(sim, g, s, true, "ulysses_k"),
            vg = sim_scatter(sim, g, s, true, "ulysses_v");
  const int og = sim.alloc(COMM, u64(g.group_rows) * u64(g.q_me) * s.h * s.T, "ulysses_o");
  if (g.R > 1) sim_ring_forward(sim, g, s, g.q_me, g.kv_me);
  sim_gather(sim, g, s, false);
  for (int x : {og, vg, kg, qg}) sim.free(x);
}

void sim_attention_backward(Sim& sim, const AttentionGeometry& g, const Shapes& s, int H, int G) {
  if (g.U == 1) {
    if (g.R > 1)
      sim_ring_backward(sim, g, s, H, G);
    else
      sim_local_backward(sim, u64(g.S_local), u64(H), s);
    return;
  }
  const int d_og = sim_scatter(sim, g, s, false, "ulysses_do"), og = sim_scatter(sim, g, s, false, "ulysses_o"),
            qg = sim_scatter(sim, g, s, false, "ulysses_q"), kg = sim_scatter(sim, g, s, true, "ulysses_k"),
            vg = sim_scatter(sim, g, s, true, "ulysses_v");
  const u64 rows = u64(g.group_rows);
  const int dqg = sim.alloc(COMM, rows * u64(g.q_me) * s.h * s.T, "ulysses_dq");
  const int dkg = sim.alloc(COMM, rows * u64(g.kv_me) * s.h * s.T, "ulysses_dk");
  const int dvg = sim.alloc(COMM, rows * u64(g.kv_me) * s.h * s.T, "ulysses_dv");
  if (g.R > 1)
    sim_ring_backward(sim, g, s, g.q_me, g.kv_me);
  else
    sim_local_backward(sim, rows, u64(g.q_me), s);
  for (int x : {d_og, og, qg}) sim.free(x);
  sim_gather(sim, g, s, false);
  sim_gather(sim, g, s, true);
  sim_gather(sim, g, s, true);
  for (int x : {dvg, dkg, dqg, vg, kg}) sim.free(x);
}

// ---- the model (model.cpp, decoder_layer.cpp, mlp_block.cpp, lm_head.cpp) ----

struct ModelSim {
  const ModelConfig& c;
  const ModelOptions& o;
  AttentionGeometry g;
  Shapes s;
  u64 S, d, Hh, Gh, I, V;
  Extent2 stats;
  double host_alpha;
  Sim& sim;

  // The activation store's buffers (activation_store.cpp), slot by slot.
  StorePlan plan;
  int L;
  std::vector<int> x_buf, x_layer;        // handle (-1: none), resident layer
  struct Saved { std::vector<int> h; int layer = -1; };
  std::vector<Saved> saved;
  std::vector<bool> host_x, host_saved;   // host buffers made (kept across steps)
  std::int64_t host_rows_alloc = -1;
  std::vector<std::int64_t> host_rows_of;

  int x_index(int l) const { return l % plan.x_buffers; }
  int saved_index(int l) const { return plan.saved_buffers ? l % plan.saved_buffers : 0; }
  std::int64_t rows_now() const {
    return o.policy == MemoryPolicy::offload ? offload_host_rows(o.offload.alpha, std::int64_t(S)) : 0;
  }
  void x_view(int l) {
    auto& b = x_buf[x_index(l)];
    if (b < 0) b = sim.alloc(ACT, S * d * s.T, "x" + std::to_string(x_index(l)));
  }
  void saved_set(int l) {
    auto& z = saved[saved_index(l)];
    if (!z.h.empty()) return;
    const std::string n = std::to_string(saved_index(l));
    z.h = {sim.alloc(ACT, S * Hh * s.T, "q" + n), sim.alloc(ACT, S * Gh * s.T, "k" + n),
           sim.alloc(ACT, S * Gh * s.T, "v" + n), sim.alloc(ACT, S * Hh * s.T, "o" + n),
           sim.alloc(ACT, u64(stats.rows) * u64(stats.cols) * s.A, "lse" + n), sim.alloc(ACT, S * d * s.T, "y" + n)};
    if (o.policy == MemoryPolicy::vanilla)  // the MLP's input, gate, up, activation
      for (u64 cols : {d, I, I, I}) z.h.push_back(sim.alloc(ACT, S * cols * s.T, "mlp" + n));
  }
  void free_saved(int i) {
    auto& z = saved[i];
    for (int k = int(z.h.size()) - 1; k >= 0; --k) sim.free(z.h[k]);
    z.h.clear();
    z.layer = -1;
  }
  // Host copies: x first, then o, lse and the token rows (grown when alpha grows).
  void host(int l, bool x_only) {
    const auto H = MemCategory::host_offload;
    if (!host_x[l]) {
      sim.alloc(H, S * d * s.T, "host_x");
      host_x[l] = true;
    }
    const std::int64_t r = offload_host_rows(host_alpha, std::int64_t(S));
    if (x_only || host_rows_of[l] >= r) return;
    if (!host_saved[l]) {
      sim.alloc(H, S * Hh * s.T, "host_o");
      sim.alloc(H, u64(stats.rows) * u64(stats.cols) * s.A, "host_lse");
      host_saved[l] = true;
    }
    sim.alloc(H, u64(r) * (Hh + 2 * Gh + d) * s.T, "host_qkvy");  // q, k, v, y rows (one sum: same high-water)
    host_rows_of[l] = r;
  }

  void project(u64 rows) { sim.free(sim.alloc(WS, rows * d * s.T, "attn_in")); }
  void attention_block() {
    project(S);
    sim_attention_forward(sim, g, s, c.heads, c.kv_heads);
  }

  void mlp_forward() {
    if (o.policy == MemoryPolicy::vanilla) return;  // into the saved set
    const int M = effective_chunks(std::int64_t(S), o.mlp_chunks);
    for (int ch = 0; ch < M; ++ch) {
      const u64 C = u64(chunk_range(std::int64_t(S), M, ch).size());
      const int b = sim.alloc(WS, C * d * s.T, "mlp_in"), gt = sim.alloc(WS, C * I * s.T, "mlp_gate"),
                u = sim.alloc(WS, C * I * s.T, "mlp_up");
      for (int x : {u, gt, b}) sim.free(x);
    }
  }
  void mlp_backward() {
    if (o.policy == MemoryPolicy::vanilla) return;  // from the saved set
    const int M = effective_chunks(std::int64_t(S), o.mlp_chunks);
    for (int ch = 0; ch < M; ++ch) {
      const u64 C = u64(chunk_range(std::int64_t(S), M, ch).size());
      const int b = sim.alloc(WS, C * d * s.T, "mlp_in"), gt = sim.alloc(WS, C * I * s.T, "mlp_gate"),
                u = sim.alloc(WS, C * I * s.T, "mlp_up"), m = sim.alloc(WS, C * I * s.T, "mlp_act");
      for (int x : {m, u, gt, b}) sim.free(x);
    }
  }
  void head() {
    const int M = effective_chunks(std::int64_t(S), o.lm_head_chunks);
    for (int ch = 0; ch < M; ++ch) {
      const u64 C = u64(chunk_range(std::int64_t(S), M, ch).size());
      const int f = sim.alloc(WS, C * d * s.T, "head_in"), lg = sim.alloc(WS, C * V * s.T, "logits");
      if (o.policy == MemoryPolicy::vanilla) sim.free(sim.alloc(WS, C * V * s.T, "logits_grad"));
      for (int x : {lg, f}) sim.free(x);
    }
  }
  void layer_backward() {
    const int dy = sim.alloc(WS, S * d * s.T, "y_grad");
    mlp_backward();
    const int d_o = sim.alloc(WS, S * Hh * s.T, "o_grad");
    const int dq = sim.alloc(WS, S * Hh * s.T, "q_grad"), dk = sim.alloc(WS, S * Gh * s.T, "k_grad"),
              dv = sim.alloc(WS, S * Gh * s.T, "v_grad");
    sim_attention_backward(sim, g, s, c.heads, c.kv_heads);
    sim.free(d_o);
    const int an = sim.alloc(WS, S * d * s.T, "attn_in");
    for (int x : {an, dv, dk, dq, dy}) sim.free(x);
  }

  // ActivationStore: input, forward_begin/end, head_end, backward_begin/end.
  void input(int l) {
    auto& layer = x_layer[x_index(l)];
    if (layer != l) layer = l;
    x_view(l);
  }
  void forward_begin(int l) {
    if (plan.host && plan.x_reused(l, L)) host(l, true);
    auto& z = saved[saved_index(l)];
    if (z.layer != l) z.layer = l;
    x_view(l);
    saved_set(l);
  }
  void forward_end(int l) {
    if (plan.saved_buffers == 0)
      free_saved(0);
    else if (plan.host && plan.saved_reused(l, L))
      host(l, false);
  }
  void head_end() {
    if (L < plan.x_buffers) {
      sim.free(x_buf[x_index(L)]);
      x_buf[x_index(L)] = -1;
      x_layer[x_index(L)] = -1;
    }
  }
  void fetch(int l) {
    if (x_layer[x_index(l)] != l) {
      x_view(l);
      host(l, true);
      x_layer[x_index(l)] = l;
    }
    if (plan.saved_buffers == 0) return;
    auto& z = saved[saved_index(l)];
    if (z.layer == l) return;
    host(l, false);
    saved_set(l);
    z.layer = l;
  }
  void backward_begin(int l) {
    fetch(l);
    if (l > 0) fetch(l - 1);
    x_view(l);
    saved_set(l);
    if (plan.saved_buffers == 0) {
      attention_block();
      saved[0].layer = l;
    } else if (rows_now() < std::int64_t(S) && saved_recomputes(l)) {
      project(S - u64(rows_now()));  // token-wise recompute of the rows not in host memory
    }
  }
  std::vector<bool> restored;  // offload: layer l's saved set came back from host (rows to recompute)
  bool saved_recomputes(int l) const { return restored[l]; }
  void backward_end(int l) {
    if (plan.saved_buffers == 0 || l < plan.saved_buffers) free_saved(saved_index(l));
    if (l < plan.x_buffers) {
      sim.free(x_buf[x_index(l)]);
      x_buf[x_index(l)] = -1;
      x_layer[x_index(l)] = -1;
    }
  }

  void micro_step() {
    const int tokens = sim.alloc(WS, 8 * S, "tokens"), labels = sim.alloc(WS, 8 * S, "labels");
    const int dx = sim.alloc(WS, S * d * s.T, "x_grad");
    input(0);
    std::fill(restored.begin(), restored.end(), false);
    for (int l = 0; l < L; ++l) {
      Scope scope(sim, "L" + std::to_string(l) + ".fwd", "fwd");
      forward_begin(l);
      attention_block();
      input(l + 1);
      mlp_forward();
      forward_end(l);
    }
    {
      Scope scope(sim, "head");
      input(L);
      head();
    }
    head_end();
    const int dx_in = sim.alloc(WS, S * d * s.T, "x_grad_in");
    for (int l = L - 1; l >= 0; --l) {
      Scope scope(sim, "L" + std::to_string(l) + ".bwd", "bwd");
      // which saved sets come back from host: those whose buffer was reused (offload)
      if (plan.saved_buffers > 0 && plan.host) restored[l] = plan.saved_reused(l, L);
      backward_begin(l);
      layer_backward();
      backward_end(l);
    }
    for (int x : {dx_in, dx, labels, tokens}) sim.free(x);
  }
};

AttentionGeometry geometry(const ModelConfig& c, const ParallelConfig& par, const SequenceLayout& layout, int sp) {
  AttentionGeometry g;
  g.U = par.ulysses;
  g.R = par.ring;
  g.variant = par.variant;
  g.S_local = layout.tokens(sp);
  const int r = sp / g.U, u = sp % g.U;
  g.me_ring = r;
  for (int b = 0; b < g.R; ++b) g.block_rows.push_back(layout.group_tokens(b));
  if (g.U > 1) {
    for (int m = 0; m < g.U; ++m) {
      g.member_rows.push_back(layout.tokens(r * g.U + m));
      g.q_count.push_back(c.heads / g.U);
      g.kv_count.push_back(c.kv_heads % g.U == 0 ? c.kv_heads / g.U : 1);
    }
    g.group_rows = g.block_rows[r];
    g.q_me = g.q_count[u];
    g.kv_me = g.kv_count[u];
  }
  return g;
}

}  // namespace

MemoryPrediction predict_rank_memory(const ModelConfig& c, const ModelOptions& o, const ParallelConfig& par,
                                     const SequenceLayout& layout, int sp, int grad_accum, std::size_t T,
                                     std::size_t A, double host_alpha) {
  Sim sim;
  const u64 P = parameter_count(c);
  // Persistent (trainer.cpp, parameters.cpp, the strategy's constructor).
  sim.alloc(MemCategory::weights, P * T, "params");
  sim.alloc(MemCategory::gradients, P * T, "grads");
  sim.alloc(MemCategory::optimizer, P * T, "adam_m");
  sim.alloc(MemCategory::optimizer, P * T, "adam_v");
  const AttentionGeometry g = geometry(c, par, layout, sp);
  sim.alloc(WS, 8 * u64(g.S_local), "positions");
  if (g.R > 1)
    for (auto rows : g.block_rows) sim.alloc(WS, 8 * u64(rows), "ring_positions");
  else if (g.U > 1)
    sim.alloc(WS, 8 * u64(g.group_rows), "attn_positions");

  const u64 h = u64(c.head_dim());
  ModelSim m{c, o, g, Shapes{T, A, h}, u64(g.S_local), u64(c.hidden), u64(c.heads) * h, u64(c.kv_heads) * h,
             u64(c.intermediate), u64(c.vocab), {}, host_alpha, sim, store_plan(o.policy, c.layers), c.layers};
  m.stats = g.U > 1 ? Extent2{g.group_rows, g.q_me} : Extent2{g.S_local, c.heads};
  m.x_buf.assign(m.plan.x_buffers, -1);
  m.x_layer.assign(m.plan.x_buffers, -1);
  m.saved.assign(std::max(1, m.plan.saved_buffers), {});
  m.host_x.assign(c.layers, false);
  m.host_saved.assign(c.layers, false);
  m.host_rows_of.assign(c.layers, -1);
  m.restored.assign(c.layers, false);
  sim.begin_step();
  for (int a = 0; a < grad_accum; ++a) m.micro_step();
  return sim.result();
}

std::map<std::string, std::uint64_t> predict_memory(const ModelConfig& c, const ModelOptions& o, std::int64_t seq_len,
                                                    std::size_t T, std::size_t A) {
  const SequenceLayout layout(seq_len, 1, 1, RingLayout::contiguous, false);
  return predict_rank_memory(c, o, ParallelConfig{}, layout, 0, 1, T, A, o.offload.alpha).bytes;
}

}  // namespace minilst
