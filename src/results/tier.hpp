// The procurement tiers (RUN_RULES.md, "Tiers"): the tier a run claims (run.tier) and the one
// the program can grant it from what it knows: whether the deck's problem is a shipped deck's
// (its digest among the decks of inputs/ that carry a reference answer) and whether the
// program was built from an unmodified source tree (git_dirty). The build and launcher
// changes that separate baseline from ported are recorded (compiler, flags, placement), not judged.
#pragma once

#include <string>

namespace minilst {

struct TierCheck {
  std::string claimed;       // run.tier: baseline | ported | optimized
  std::string granted;       // the claimed tier, or "none" when a condition fails
  std::string reasons;       // "" or why the claim is refused ("a; b")
  std::string shipped_deck;  // the shipped deck whose problem this is ("" if none)
  std::string text() const;  // the RESULT line's field: "baseline" or "none (claimed baseline: ...)"
};

// claimed: run.tier; problem_digest: the deck's; source_modified: the build's git_dirty.
TierCheck check_tier(const std::string& claimed, const std::string& problem_digest, bool source_modified);

}  // namespace minilst
