#include "predict/layout_search.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/range.hpp"
#include "predict/prediction.hpp"

namespace minilst {

std::string LayoutCandidate::name() const {
  const auto& p = deck.parallel;
  std::string s = "D" + std::to_string(plan.data_parallel) + " U" + std::to_string(p.ulysses) + " R" + std::to_string(p.ring) +
                  " Z" + std::to_string(p.zero);
  if (const int n = head_chunks(deck.model, p); n > 1) s += " c" + std::to_string(n);  // Ulysses head chunks
  if (plan.options.policy == MemoryPolicy::offload) {
    char b[32];
    std::snprintf(b, sizeof b, " a%.2g", plan.options.offload.alpha);
    s += b;
  }
  return s + " mlp" + std::to_string(effective_chunks(plan.local_tokens, plan.options.mlp_chunks)) + " head" +
         std::to_string(effective_chunks(plan.local_tokens, plan.options.lm_head_chunks));
}

namespace {
std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

// The decks the search tries: every U x R of the ranks, ZeRO stage, alpha and chunk setting.
std::vector<Deck> layouts_of(const Deck& deck, int ranks) {
  std::vector<double> alphas{deck.memory.alpha_auto ? 1.0 : deck.options.offload.alpha};
  if (deck.options.policy == MemoryPolicy::offload)
    for (const double x : {0.0, 0.5, 1.0})
      if (std::find(alphas.begin(), alphas.end(), x) == alphas.end()) alphas.push_back(x);
  std::vector<std::pair<ChunkSetting, ChunkSetting>> chunks{{deck.mst.mlp, deck.mst.lm_head}};
  if (!deck.mst.mlp.automatic || !deck.mst.lm_head.automatic) chunks.push_back({ChunkSetting{}, ChunkSetting{}});
  std::vector<Deck> out;
  for (const int U : divisors(ranks))
    for (const int R : divisors(ranks / U))
      for (int zero = 0; zero <= 3; ++zero)
        for (const double alpha : alphas)
          for (const auto& [mlp, head] : chunks) {
            Deck d = deck;
            d.parallel.ulysses = U;
            d.parallel.ring = R;
            d.parallel.zero = zero;
            d.options.offload.alpha = alpha;
            d.memory.alpha_auto = false;
            d.mst.mlp = mlp;
            d.mst.lm_head = head;
            out.push_back(std::move(d));
          }
  return out;
}
}  // namespace

LayoutSearch search_layouts(const Deck& deck, int ranks, const Budgets& budgets, const MachineRates& machine, int top,
                            bool plan_arena) {
  LayoutSearch s;
  const std::int64_t S = deck.run.seq_len;
  std::vector<LayoutCandidate> fit;
  for (Deck& d : layouts_of(deck, ranks)) {
    ++s.tried;
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
  for (auto& c : fit) {
    if (int(s.best.size()) >= top) break;
    if (plan_arena && c.deck.memory.plan) {  // as a run holds it: the step arena too
      std::string why;
      c.plan = plan_deck(c.deck, S, {ranks, true, false}, why);
      if (!why.empty() || !c.plan.fits(budgets)) continue;
    }
    s.best.push_back(std::move(c));
  }
  return s;
}

namespace {
LongestRun longest_run_of(const Deck& deck, int ranks, const Budgets& budgets, bool plan_arena, std::string& error) {
  LongestRun r;
  const PlanOptions options{ranks, plan_arena, false};
  r.lowest = std::max<std::int64_t>(2, 2LL * deck.parallel.sequence_parallel());
  r.plan = plan_deck(deck, r.lowest, options, error);
  if (!error.empty()) return r;
  if (!(r.fits = r.plan.fits(budgets))) return r;
  const auto fits_at = [&](std::int64_t S) {
    std::string why;
    const DeckPlan p = plan_deck(deck, S, options, why);
    if (why.empty()) return p.fits(budgets);
    if (r.bound.empty()) r.bound = "run.seq_len = " + std::to_string(S) + " is refused: " + why;
    return false;
  };
  const std::int64_t limit = std::int64_t(1) << 40;  // run.seq_len's own limit
  std::int64_t lo = r.lowest, hi = 2 * r.lowest;
  while (hi <= limit && fits_at(hi)) lo = hi, hi *= 2;
  if (hi > limit) hi = limit + 1;
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (fits_at(mid) ? lo : hi) = mid;
  }
  r.seq_len = lo;
  r.hit_limit = lo == limit;
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
