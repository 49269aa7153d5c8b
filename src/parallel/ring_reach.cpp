#include "parallel/ring_reach.hpp"

namespace minilst {

bool ranges_see(const PositionRanges& queries, const PositionRanges& keys, const SequenceMask& mask) {
  for (const auto& q : queries) {
    const std::int64_t first = mask.q_lo(q.begin), last = q.end - 1;  // keys [q_lo(a), e] are seen
    for (const auto& k : keys)
      if (k.begin <= last && k.end - 1 >= first) return true;
  }
  return false;
}

PositionRanges position_ranges(const std::vector<std::int64_t>& positions) {
  PositionRanges out;
  for (const auto p : positions) {
    if (!out.empty() && out.back().end == p)
      ++out.back().end;
    else
      out.push_back({p, p + 1});
  }
  return out;
}

std::vector<std::vector<bool>> ring_visibility(const std::vector<PositionRanges>& members, const SequenceMask& mask) {
  const std::size_t R = members.size();
  std::vector<std::vector<bool>> visible(R, std::vector<bool>(R, false));
  for (std::size_t m = 0; m < R; ++m)
    for (std::size_t b = 0; b < R; ++b) visible[m][b] = ranges_see(members[m], members[b], mask);
  return visible;
}

std::vector<int> ring_reach(const std::vector<std::vector<bool>>& visible) {
  const int R = int(visible.size());
  std::vector<int> reach(R, 0);
  for (int b = 0; b < R; ++b)
    for (int t = R - 1; t > 0; --t)
      if (visible[(b + t) % R][b]) {
        reach[b] = t;
        break;
      }
  return reach;
}

std::vector<PositionRanges> ring_member_ranges(const SequenceLayout& layout) {
  std::vector<PositionRanges> members;
  for (int r = 0; r < layout.ring(); ++r) members.push_back(layout.group_ranges(r));
  return members;
}

std::vector<int> ring_reach(const SequenceLayout& layout, const SequenceMask& mask) {
  return ring_reach(ring_visibility(ring_member_ranges(layout), mask));
}

}  // namespace minilst
