#include "memory/planner.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#ifdef MINILST_HAVE_GLPK
#include <glpk.h>
#endif

namespace minilst {

namespace {
bool alive_together(const PlanItem& a, const PlanItem& b) { return a.begin < b.end && b.begin < a.end; }
constexpr std::size_t kExactItemLimit = 60;  // larger problems go to greedy

// The placed items by time: the event sequence cut into about sqrt(n) buckets, each
// listing the placed items alive in it, so that finding the placed items alive
// together with a new one looks at its buckets only (not at every placed item).
class PlacedByTime {
 public:
  explicit PlacedByTime(const std::vector<PlanItem>& items) : items_(items), seen_(items.size(), 0) {
    std::int64_t lo = 0, hi = 1;
    for (const auto& it : items) {
      lo = std::min(lo, it.begin);
      hi = std::max(hi, it.end);
    }
    origin_ = lo;
    const auto buckets = std::max<std::int64_t>(1, std::int64_t(std::sqrt(double(items.size()))));
    width_ = std::max<std::int64_t>(1, (hi - lo + buckets - 1) / buckets);
    buckets_.resize(std::size_t((hi - lo) / width_ + 1));
  }
  void add(std::size_t i) {
    all_.push_back(i);
    if (!regular(i)) return irregular_.push_back(i);
    for (auto b = bucket(items_[i].begin); b <= bucket(items_[i].end - 1); ++b) buckets_[b].push_back(i);
  }
  // Calls f(j) once for every placed item j alive together with item i.
  template <class F>
  void alive_with(std::size_t i, F f) {
    ++stamp_;
    const auto visit = [&](std::size_t j) {
      if (seen_[j] != stamp_ && alive_together(items_[i], items_[j])) {
        seen_[j] = stamp_;
        f(j);
      }
    };
    if (!regular(i)) {  // an empty lifetime [b, e), e <= b: compared with every placed item, as alive_together says
      for (const std::size_t j : all_) visit(j);
      return;
    }
    for (auto b = bucket(items_[i].begin); b <= bucket(items_[i].end - 1); ++b)
      for (const std::size_t j : buckets_[b]) visit(j);
    for (const std::size_t j : irregular_) visit(j);
  }

 private:
  bool regular(std::size_t i) const { return items_[i].end > items_[i].begin; }
  std::size_t bucket(std::int64_t t) const { return std::size_t((t - origin_) / width_); }
  const std::vector<PlanItem>& items_;
  std::vector<std::uint64_t> seen_;  // the query stamp that last reported an item
  std::uint64_t stamp_ = 0;
  std::int64_t origin_ = 0, width_ = 1;
  std::vector<std::vector<std::size_t>> buckets_;
  std::vector<std::size_t> all_, irregular_;  // every placed item; those with an empty lifetime
};
}  // namespace

std::uint64_t plan_lower_bound(const std::vector<PlanItem>& items) {
  std::vector<std::pair<std::int64_t, std::int64_t>> events;  // (time, +bytes | -bytes)
  for (const auto& it : items) {
    if (it.bytes == 0 || it.end <= it.begin) continue;
    events.push_back({it.begin, std::int64_t(it.bytes)});
    events.push_back({it.end, -std::int64_t(it.bytes)});
  }
  std::sort(events.begin(), events.end());  // at equal times frees (negative) come first: [begin, end)
  std::int64_t live = 0, best = 0;
  for (const auto& [t, delta] : events) best = std::max(best, live += delta);
  return std::uint64_t(best);
}

Placement plan_greedy(const std::vector<PlanItem>& items) {
  const std::size_t n = items.size();
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const auto& x = items[a];
    const auto& y = items[b];
    if (x.bytes != y.bytes) return x.bytes > y.bytes;
    return x.end - x.begin > y.end - y.begin;
  });
  Placement p;
  p.offsets.assign(n, 0);
  PlacedByTime placed(items);
  for (const std::size_t i : order) {
    const auto& it = items[i];
    if (it.bytes == 0) continue;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> taken;  // [offset, end) of overlapping placed items
    placed.alive_with(i, [&](std::size_t j) { taken.push_back({p.offsets[j], p.offsets[j] + items[j].bytes}); });
    std::sort(taken.begin(), taken.end());
    // Best fit: the smallest gap that holds the item (lowest offset on ties); else above everything.
    std::uint64_t best_offset = 0, best_gap = UINT64_MAX, cursor = 0;
    bool found = false;
    for (const auto& [b, e] : taken) {
      if (b > cursor && b - cursor >= it.bytes && b - cursor < best_gap) {
        best_gap = b - cursor;
        best_offset = cursor;
        found = true;
      }
      cursor = std::max(cursor, e);
    }
    p.offsets[i] = found ? best_offset : cursor;
    placed.add(i);
    p.peak = std::max(p.peak, p.offsets[i] + it.bytes);
  }
  return p;
}

bool plan_is_valid(const std::vector<PlanItem>& items, const Placement& p) {
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (items[i].bytes == 0) continue;
    if (p.offsets[i] + items[i].bytes > p.peak) return false;
    for (std::size_t j = i + 1; j < items.size(); ++j) {
      if (items[j].bytes == 0 || !alive_together(items[i], items[j])) continue;
      const bool apart = p.offsets[i] + items[i].bytes <= p.offsets[j] || p.offsets[j] + items[j].bytes <= p.offsets[i];
      if (!apart) return false;
    }
  }
  return true;
}

bool exact_solver_available() {
#ifdef MINILST_HAVE_GLPK
  return true;
#else
  return false;
#endif
}

Placement plan_exact(const std::vector<PlanItem>& items, double time_limit_s) {
  Placement greedy = plan_greedy(items);
#ifndef MINILST_HAVE_GLPK
  (void)time_limit_s;
  return greedy;
#else
  const std::uint64_t lb = plan_lower_bound(items);
  if (greedy.peak == lb || items.size() > kExactItemLimit) {
    greedy.optimal = greedy.peak == lb;
    return greedy;
  }
  // Work in units of the greatest common divisor of the sizes (small, exact numbers).
  std::uint64_t unit = 0;
  for (const auto& it : items) unit = std::gcd(unit, it.bytes);
  if (unit == 0) return greedy;
  const double M = double(greedy.peak / unit);  // no offset needs to exceed the greedy arena
  std::vector<std::pair<std::size_t, std::size_t>> pairs;
  for (std::size_t i = 0; i < items.size(); ++i)
    for (std::size_t j = i + 1; j < items.size(); ++j)
      if (items[i].bytes && items[j].bytes && alive_together(items[i], items[j])) pairs.push_back({i, j});
  const int n = int(items.size()), np = int(pairs.size());
  glp_prob* lp = glp_create_prob();
  glp_set_obj_dir(lp, GLP_MIN);
  // columns: o_1..o_n, A (the arena), z_1..z_np
  glp_add_cols(lp, n + 1 + np);
  for (int i = 0; i < n; ++i) {
    const double s = double(items[i].bytes / unit);
    glp_set_col_bnds(lp, i + 1, GLP_DB, 0.0, std::max(0.0, M - s));
  }
  glp_set_col_bnds(lp, n + 1, GLP_DB, double(lb / unit), M);
  glp_set_obj_coef(lp, n + 1, 1.0);
  for (int k = 0; k < np; ++k) glp_set_col_kind(lp, n + 2 + k, GLP_BV);
  // rows: A - o_i >= s_i; per pair two disjunctive rows
  glp_add_rows(lp, n + 2 * np);
  std::vector<int> ia{0}, ja{0};
  std::vector<double> ar{0.0};
  const auto add = [&](int row, int col, double v) { ia.push_back(row); ja.push_back(col); ar.push_back(v); };
  for (int i = 0; i < n; ++i) {
    glp_set_row_bnds(lp, i + 1, GLP_LO, double(items[i].bytes / unit), 0.0);
    add(i + 1, n + 1, 1.0);
    add(i + 1, i + 1, -1.0);
  }
  for (int k = 0; k < np; ++k) {
    const auto [i, j] = pairs[k];
    const double si = double(items[i].bytes / unit), sj = double(items[j].bytes / unit);
    const int r1 = n + 1 + 2 * k, r2 = r1 + 1, z = n + 2 + k;
    glp_set_row_bnds(lp, r1, GLP_UP, 0.0, -si);  // o_i - o_j - M z <= -s_i   (i below j when z = 0)
    add(r1, int(i) + 1, 1.0);
    add(r1, int(j) + 1, -1.0);
    add(r1, z, -M);
    glp_set_row_bnds(lp, r2, GLP_UP, 0.0, M - sj);  // o_j - o_i + M z <= M - s_j (j below i when z = 1)
    add(r2, int(j) + 1, 1.0);
    add(r2, int(i) + 1, -1.0);
    add(r2, z, M);
  }
  glp_load_matrix(lp, int(ia.size()) - 1, ia.data(), ja.data(), ar.data());
  glp_iocp parm;
  glp_init_iocp(&parm);
  parm.presolve = GLP_ON;
  parm.msg_lev = GLP_MSG_OFF;
  parm.tm_lim = int(std::max(1.0, time_limit_s * 1000.0));
  Placement exact;
  if (glp_intopt(lp, &parm) == 0 && (glp_mip_status(lp) == GLP_OPT || glp_mip_status(lp) == GLP_FEAS)) {
    exact.offsets.resize(items.size());
    for (int i = 0; i < n; ++i) exact.offsets[i] = std::uint64_t(std::llround(glp_mip_col_val(lp, i + 1))) * unit;
    for (int i = 0; i < n; ++i) exact.peak = std::max(exact.peak, exact.offsets[i] + items[i].bytes);
    exact.optimal = glp_mip_status(lp) == GLP_OPT;
  }
  glp_delete_prob(lp);
  if (exact.offsets.empty() || !plan_is_valid(items, exact) || exact.peak > greedy.peak) return greedy;
  return exact;
#endif
}

namespace {
Placement solve(const std::vector<PlanItem>& items, PlanSolver solver) {
  return solver == PlanSolver::exact ? plan_exact(items, 10.0) : plan_greedy(items);
}
std::uint64_t round_up(std::uint64_t x, std::uint64_t a) { return (x + a - 1) / a * a; }
}  // namespace

ArenaPlan plan_step(const std::vector<TraceBuffer>& buffers, const std::vector<TraceSegment>& segments,
                   PlanSolver solver, std::uint64_t alignment) {
  std::vector<PlanItem> all;
  for (const auto& b : buffers) all.push_back({round_up(b.bytes, alignment), b.begin, b.end});
  ArenaPlan best;
  best.lower_bound_bytes = plan_lower_bound(all);

  // Flat: every buffer one item (greedy is quadratic: long traces are planned bi-level only).
  constexpr std::size_t kFlatLimit = 4000;
  if (all.size() <= kFlatLimit || segments.empty()) {
    const Placement flat = solve(all, solver);
    best.offsets = flat.offsets;
    best.arena_bytes = flat.peak;
    best.method = std::string("flat ") + (solver == PlanSolver::exact ? "exact" : "greedy");
  } else {
    best.arena_bytes = UINT64_MAX;
  }

  // Bi-level: each layer block planned once per shape, then the step with blocks as items.
  if (!segments.empty()) {
    struct Block {
      std::vector<std::size_t> members;  // buffer indices, in allocation order
      std::uint64_t bytes = 0;
      std::vector<std::uint64_t> offsets;
    };
    std::vector<Block> blocks(segments.size());
    for (std::size_t i = 0; i < buffers.size(); ++i)
      if (buffers[i].segment >= 0) blocks[buffers[i].segment].members.push_back(i);
    std::map<std::vector<std::int64_t>, Placement> by_shape;  // signature -> its plan
    std::vector<PlanItem> model;
    std::vector<std::size_t> model_buffer;  // model item -> buffer index, or npos for a block
    std::vector<int> model_block;
    for (std::size_t s = 0; s < segments.size(); ++s) {
      auto& blk = blocks[s];
      if (blk.members.empty()) continue;
      std::vector<PlanItem> local;
      std::vector<std::int64_t> signature{std::int64_t(segments[s].kind == "bwd")};
      for (const std::size_t i : blk.members) {
        local.push_back({all[i].bytes, all[i].begin - segments[s].begin, all[i].end - segments[s].begin});
        signature.insert(signature.end(), {std::int64_t(all[i].bytes), local.back().begin, local.back().end});
      }
      auto it = by_shape.find(signature);
      if (it == by_shape.end()) it = by_shape.emplace(signature, solve(local, solver)).first;
      blk.bytes = it->second.peak;
      blk.offsets = it->second.offsets;
      model.push_back({blk.bytes, segments[s].begin, segments[s].end});
      model_buffer.push_back(SIZE_MAX);
      model_block.push_back(int(s));
    }
    for (std::size_t i = 0; i < buffers.size(); ++i)
      if (buffers[i].segment < 0) {
        model.push_back(all[i]);
        model_buffer.push_back(i);
        model_block.push_back(-1);
      }
    const Placement top = solve(model, solver);
    if (top.peak < best.arena_bytes) {
      std::vector<std::uint64_t> offsets(buffers.size(), 0);
      for (std::size_t m = 0; m < model.size(); ++m) {
        if (model_block[m] < 0) {
          offsets[model_buffer[m]] = top.offsets[m];
          continue;
        }
        const auto& blk = blocks[model_block[m]];
        for (std::size_t k = 0; k < blk.members.size(); ++k) offsets[blk.members[k]] = top.offsets[m] + blk.offsets[k];
      }
      best.offsets = offsets;
      best.arena_bytes = top.peak;
      best.method = std::string("bi-level ") + (solver == PlanSolver::exact ? "exact" : "greedy");
    }
  }
  return best;
}

}  // namespace minilst
