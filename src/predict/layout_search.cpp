#include "core/progress.hpp"
#include "predict/layout_search.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "core/range.hpp"
#include "predict/prediction.hpp"

namespace minilst {

std::string LayoutCandidate::name() const {
  const auto& p = deck.parallel;
  std::string s = "D" + std::to_string(plan.data_parallel) + (p.tensor > 1 ? " T" + std::to_string(p.tensor) : "") +
                  " U" + std::to_string(p.ulysses) + " R" + std::to_string(p.ring) + " Z" + std::to_string(p.zero);
  if (const int n = head_chunks(deck.model, p); n > 1) s += " c" + std::to_string(n);  // Ulysses head chunks
  if (plan.options.policy == MemoryPolicy::offload) {
    char b[32];
    std::snprintf(b, sizeof b, " a%.2g", plan.options.offload.alpha);
    s += b;
  }
  const std::int64_t rows = plan.local_tokens / p.tensor;  // the residual rows the MLP and head chunk
  return s + " mlp" + std::to_string(effective_chunks(rows, plan.options.mlp_chunks)) + " head" +
         std::to_string(effective_chunks(rows, plan.options.lm_head_chunks));
}

namespace {
std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

// The decks the search tries: every T x U x R of the ranks (T within a node, the ranks a tensor-
// parallel group's collectives share its links with), ZeRO stage, alpha and chunk setting.
// Layouts the model's shapes cannot split are refused by the plan (counted as refused).
std::vector<Deck> layouts_of(const Deck& deck, int ranks, int ranks_per_node) {
  std::vector<double> alphas{deck.memory.alpha_auto ? 1.0 : deck.options.offload.alpha};
  if (deck.options.policy == MemoryPolicy::offload)
    for (const double x : {0.0, 0.5, 1.0})
      if (std::find(alphas.begin(), alphas.end(), x) == alphas.end()) alphas.push_back(x);
  std::vector<std::pair<ChunkSetting, ChunkSetting>> chunks{{deck.mst.mlp, deck.mst.lm_head}};
  if (!deck.mst.mlp.automatic || !deck.mst.lm_head.automatic) chunks.push_back({ChunkSetting{}, ChunkSetting{}});
  std::vector<Deck> out;
  for (const int T : divisors(ranks)) {
    if (T > std::max(1, ranks_per_node)) continue;
    for (const int U : divisors(ranks / T))
      for (const int R : divisors(ranks / (T * U)))
        for (int zero = 0; zero <= 3; ++zero)
          for (const double alpha : alphas)
            for (const auto& [mlp, head] : chunks) {
              Deck d = deck;
              d.parallel.tensor = T;
              d.parallel.ulysses = U;
              d.parallel.ring = R;
              d.parallel.zero = zero;
              d.options.offload.alpha = alpha;
              d.memory.alpha_auto = false;
              d.mst.mlp = mlp;
              d.mst.lm_head = head;
              out.push_back(std::move(d));
            }
  }
  return out;
}
}  // namespace

LayoutSearch search_layouts(const Deck& deck, int ranks, const Budgets& budgets, const MachineRates& machine, int top,
                            bool plan_arena) {
  LayoutSearch s;
  const std::int64_t S = deck.run.seq_len;
  std::vector<LayoutCandidate> fit;
  std::vector<Deck> layouts = layouts_of(deck, ranks, machine.ranks_per_node);
  for (Deck& d : layouts) {
    ++s.tried;
    progress_stage("layout search: layout " + std::to_string(s.tried) + " of " + std::to_string(layouts.size()) +
                   " at S = " + std::to_string(S));
    std::string why;
    DeckPlan p = plan_deck(d, S, {ranks, false, false}, why);
    if (!why.empty()) {
      ++s.refused;
      continue;
    }
    if (!p.fits(budgets)) {
      ++s.over;
      continue;
    }
    try {
      const StepTime t = price_plan(d, p, machine);
      fit.push_back({std::move(d), std::move(p), t});
    } catch (const std::exception& e) {
      s.missing = e.what();
    }
  }
  s.fit = fit.size();
  const auto bucket = [](const LayoutCandidate& c) { return std::llround(std::log(c.time.tokens_per_s) / std::log(1.005)); };
  std::stable_sort(fit.begin(), fit.end(), [&](const LayoutCandidate& x, const LayoutCandidate& y) {
    const auto bx = bucket(x), by = bucket(y);
    return bx != by ? bx > by : x.plan.device_planned < y.plan.device_planned;
  });
  const auto replanned = [&](LayoutCandidate& c) {  // as a run holds it: the step arena too
    if (!plan_arena || !c.deck.memory.plan) return true;
    std::string why;
    c.plan = plan_deck(c.deck, S, {ranks, true, false}, why);
    return why.empty() && c.plan.fits(budgets);
  };
  std::set<int> degrees;  // tensor-parallel degrees among the ranked
  std::size_t next = 0;
  for (; next < fit.size() && int(s.best.size()) < top; ++next)
    if (replanned(fit[next])) degrees.insert(fit[next].deck.parallel.tensor), s.best.push_back(std::move(fit[next]));
  std::map<int, LayoutCandidate*> by_tensor;
  for (; next < fit.size(); ++next) {
    const int T = fit[next].deck.parallel.tensor;
    if (!degrees.count(T) && !by_tensor.count(T) && replanned(fit[next])) by_tensor[T] = &fit[next];
  }
  for (auto& [T, c] : by_tensor) s.best_by_tensor.push_back(std::move(*c));
  return s;
}

namespace {
LongestRun longest_run_of(const Deck& deck, int ranks, const Budgets& budgets, bool plan_arena, std::string& error) {
  LongestRun r;
  const PlanOptions options{ranks, plan_arena, false};
  // Tensor parallelism splits every sequence piece evenly: lengths in steps of q (check_parallel)
  const ParallelConfig& par = deck.parallel;
  const std::int64_t q = par.tensor > 1 ? std::int64_t(par.sequence_parallel()) * par.tensor *
                                              (par.layout == RingLayout::zigzag && par.ring > 1 ? 2 : 1)
                                        : 1;
  r.lowest = std::max<std::int64_t>(2, 2LL * par.sequence_parallel());
  r.lowest = (r.lowest + q - 1) / q * q;
  r.plan = plan_deck(deck, r.lowest, options, error);
  if (!error.empty()) return r;
  if (!(r.fits = r.plan.fits(budgets))) return r;
  const auto fits_at = [&](std::int64_t S) {
    std::string why;
    progress_stage("longest sequence: planning S = " + std::to_string(S));
    const DeckPlan p = plan_deck(deck, S, options, why);
    if (why.empty()) return p.fits(budgets);
    if (r.bound.empty()) r.bound = "run.seq_len = " + std::to_string(S) + " is refused: " + why;
    return false;
  };
  const std::int64_t limit = (std::int64_t(1) << 40) / q;  // run.seq_len's own limit, in steps of q
  const auto fits_steps = [&](std::int64_t k) { return fits_at(k * q); };
  std::int64_t lo = r.lowest / q, hi = 2 * lo;
  while (hi <= limit && fits_steps(hi)) lo = hi, hi *= 2;
  if (hi > limit) hi = limit + 1;
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (fits_steps(mid) ? lo : hi) = mid;
  }
  r.seq_len = lo * q;
  r.hit_limit = lo == limit;
  lo = r.seq_len;
  r.plan = plan_deck(deck, lo, options, error);
  return r;
}
}  // namespace

LongestRun longest_run(const Deck& deck, int ranks, const Budgets& budgets, bool plan_arena, std::string& error) {
  const ParallelConfig& p = deck.parallel;
  if (p.ulysses <= 1 || p.ulysses_head_chunks != 0) return longest_run_of(deck, ranks, budgets, plan_arena, error);
  // ulysses_head_chunks auto: every valid count, the longest answer (the fewest chunks among equals)
  LongestRun best;
  for (int n = 1; n <= deck.model.heads / p.ulysses; ++n) {
    if (!valid_head_chunks(deck.model, p, n)) continue;
    Deck d = deck;
    d.parallel.ulysses_head_chunks = n;
    std::string why;
    LongestRun r = longest_run_of(d, ranks, budgets, plan_arena, why);
    if (!why.empty()) {
      if (best.lowest == 0) error = why;
      continue;
    }
    r.head_chunks = n;
    if (best.lowest == 0 || (r.fits && (!best.fits || r.seq_len > best.seq_len))) best = std::move(r), error.clear();
  }
  return best;
}

}  // namespace minilst
