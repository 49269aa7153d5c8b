#include "results/tier.hpp"

#include "minilst_shipped_decks.hpp"  // generated: kShippedProblems

namespace minilst {

TierCheck check_tier(const std::string& claimed, const std::string& problem_digest, bool source_modified) {
  TierCheck t;
  t.claimed = claimed;
  for (const auto& p : kShippedProblems)
    if (*p.deck && problem_digest == p.digest) t.shipped_deck = p.deck;
  const auto refuse = [&t](const std::string& why) { t.reasons += (t.reasons.empty() ? "" : "; ") + why; };
  // Every tier runs a shipped problem: the target problems and their reference answers.
  if (t.shipped_deck.empty()) refuse("the deck's problem " + problem_digest + " is no shipped deck's");
  // Baseline and ported build the published source; source changes are the optimized tier's.
  if (claimed != "optimized" && source_modified) refuse("built from a modified source tree (git_dirty)");
  t.granted = t.reasons.empty() ? claimed : "none";
  return t;
}

std::string TierCheck::text() const { return reasons.empty() ? granted : "none (claimed " + claimed + ": " + reasons + ")"; }

}  // namespace minilst
