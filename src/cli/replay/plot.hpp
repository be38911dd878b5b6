// cli/replay/plot.hpp — the chart of `admit replay --plot FILE.svg`, written by hand as SVG (no library). (The chart of
// `--algorithm concurrency`, write_concurrency_svg in cli/replay/concurrency_replay.hpp, is drawn in plot.cpp too.)
//
// Two panels over the trace's time: on top, cumulative tokens offered vs admitted (by admission time, so a delay in
// reserve mode shows as the admitted curve lagging); below, tokens per second in each time bucket, offered (bars)
// vs admitted (line), with the configured rate as a dashed line. Each panel's legend is a row above it, outside the
// data; the subtitle under the title is wrapped to the chart's width (two lines at most). The output size is bounded
// whatever the trace's length: curves are sampled once per horizontal pixel from the replay's timeline (exact at its
// grid's boundaries, see cli/replay/rate_timeline.hpp) and the rate panel has at most 120 buckets.
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>

#include "cli/replay/replay.hpp"
#include "cli/replay/report.hpp"

namespace admit::cli {

void write_svg(std::ostream& out, const report_context& ctx, const replay_result& result);

}  // namespace admit::cli
