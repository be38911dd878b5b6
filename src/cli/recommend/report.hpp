// cli/recommend/report.hpp — what `admit recommend` prints: a human summary, JSON, and the chart of --plot.
//
// Each names the recommendation, what its replay achieved, the replay one limit tighter (99% of the rate, one less per
// window or permit) and what that achieved, the `admit replay` command that checks it, and how many replays the
// search took. Without a burst for the bucket algorithms, the frontier comes first.
#pragma once

#include <iosfwd>
#include <string>

#include "cli/recommend/recommend.hpp"
#include "cli/replay/access_log.hpp"

namespace admit::cli {

// What was read, for the report's header.
struct recommend_context {
  std::string source;  // the trace's file name, or "stdin"
  // The `admit replay` arguments that read the trace the same way: --format and its fields, --per-key,
  // --skip-bad-lines, the file (shell-quoted where needed).
  std::string replay_arguments;
};

void write_rate_recommendation(std::ostream& out, const recommend_context& ctx, const recorded_trace& trace,
                               const rate_question& q, const rate_recommendation& r);
void write_rate_recommendation_json(std::ostream& out, const recommend_context& ctx, const recorded_trace& trace,
                                    const rate_question& q, const rate_recommendation& r);
void write_concurrency_recommendation(std::ostream& out, const recommend_context& ctx, const recorded_trace& trace,
                                      const concurrency_question& q, const concurrency_recommendation& r);
void write_concurrency_recommendation_json(std::ostream& out, const recommend_context& ctx, const recorded_trace& trace,
                                           const concurrency_question& q, const concurrency_recommendation& r);

// The trade-off curves of --plot: the rejected share (reserve: the p99 delay; concurrency: the p99 wait, or the share
// turned away) of every replayed candidate against the limit, the target as a dashed line, the recommendation
// marked; without a burst, a second panel with the frontier (least rate against burst).
void write_rate_recommendation_svg(std::ostream& out, const recommend_context& ctx, const rate_question& q,
                                   const rate_recommendation& r);
void write_concurrency_recommendation_svg(std::ostream& out, const recommend_context& ctx,
                                          const concurrency_question& q, const concurrency_recommendation& r);

// A share, three significant digits: 0.00976 -> "0.976%", 0.123 -> "12.3%", 0 -> "0%".
[[nodiscard]] std::string percent(double fraction);

// `word` as one shell word: as it is when it holds only safe characters, else in single quotes.
[[nodiscard]] std::string shell_word(const std::string& word);

}  // namespace admit::cli
