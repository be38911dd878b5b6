// The nearest name (see suggest.hpp).
#include "cli/common/suggest.hpp"

#include <algorithm>
#include <vector>

namespace admit::cli {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Three rows of the dynamic programme: the one before the previous is what a transposition looks back to.
  const std::size_t m = b.size();
  std::vector<std::size_t> before(m + 1), previous(m + 1), current(m + 1);
  for (std::size_t j = 0; j <= m; ++j) previous[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        current[j] = std::min(current[j], before[j - 2] + 1);
      }
    }
    std::swap(before, previous);
    std::swap(previous, current);
  }
  return previous[m];
}

std::optional<std::string> nearest_name(std::string_view typed, std::span<const std::string> candidates) {
  const std::size_t most = std::max<std::size_t>(1, typed.size() / 3);
  std::optional<std::string> best;
  std::size_t best_distance = most + 1;
  for (const std::string& c : candidates) {
    const std::size_t d = edit_distance(typed, c);
    if (d < best_distance && d < typed.size() && d < c.size()) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

}  // namespace admit::cli
