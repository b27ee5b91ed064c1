#include "eval/svg_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "eval/svg.h"

namespace kvslim::eval {

namespace {

constexpr double kWidth = 680, kHeight = 420;
constexpr double kLeft = 70, kRight = 190, kTop = 40, kBottom = 60;  // margins around the plot area
// Legend entries: a 20-pixel line sample, then the name; a name's width is estimated at 7 pixels
// per character (12-pixel sans-serif), so that a long name (a method with options) widens the
// chart instead of running off its right edge.
constexpr double kLegendGap = 15, kLegendText = 26, kCharWidth = 7;
const char* const kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string tick_label(double v) {
  if (v != 0 && (std::abs(v) >= 1e6 || std::abs(v) < 1e-3)) return fmt::format("{:.3g}", v);
  return fmt::format("{:.6g}", v);
}

void title_and_labels(SvgWriter& svg, const std::string& title, const std::string& x_label, const std::string& y_label,
                      double plot_right, double width = kWidth) {
  svg.element("text", {{"x", svg_number(width / 2)}, {"y", "22"}, {"text-anchor", "middle"}, {"font-size", "15"}},
              title);
  svg.element("text",
              {{"x", svg_number((kLeft + plot_right) / 2)}, {"y", svg_number(kHeight - 15)}, {"text-anchor", "middle"}},
              x_label);
  const double mid = (kTop + kHeight - kBottom) / 2;
  svg.element("text",
              {{"x", "18"},
               {"y", svg_number(mid)},
               {"text-anchor", "middle"},
               {"transform", fmt::format("rotate(-90 18 {})", svg_number(mid))}},
              y_label);
}

// Maps data to pixels over [lo, hi] (log2 when asked).
struct Axis {
  double lo, hi, p0, p1;
  bool log2 = false;
  double operator()(double v) const {
    const auto f = [&](double x) { return log2 ? std::log2(x) : x; };
    const double span = f(hi) - f(lo);
    return span == 0 ? (p0 + p1) / 2 : p0 + (f(v) - f(lo)) / span * (p1 - p0);
  }
};

std::string color_for(double v) {
  // red (0) -> yellow (0.5) -> green (1)
  const double t = std::clamp(v, 0.0, 1.0);
  const double a[3] = {215, 48, 31}, m[3] = {254, 224, 139}, b[3] = {26, 152, 80};
  int rgb[3];
  for (int i = 0; i < 3; ++i)
    rgb[i] = int(std::lround(t < 0.5 ? a[i] + (m[i] - a[i]) * t * 2 : m[i] + (b[i] - m[i]) * (t - 0.5) * 2));
  return fmt::format("#{:02x}{:02x}{:02x}", rgb[0], rgb[1], rgb[2]);
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int count) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / std::max(count, 1);
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * power >= raw) {
      step = m * power;
      break;
    }
  std::vector<double> ticks;
  for (double v = std::floor(lo / step) * step; v <= hi + step * 1e-9; v += step)
    ticks.push_back(std::abs(v) < step * 1e-9 ? 0 : v);
  if (ticks.front() > lo) ticks.insert(ticks.begin(), ticks.front() - step);
  if (ticks.back() < hi) ticks.push_back(ticks.back() + step);
  return ticks;
}

std::string render_line_chart(const LineChart& chart) {
  const double plot_right = kWidth - kRight, plot_bottom = kHeight - kBottom;
  std::vector<double> xs, ys;
  for (const ChartSeries& s : chart.series)
    for (const auto& [x, y] : s.points) {
      xs.push_back(x);
      ys.push_back(y);
    }
  for (const ReferenceLine& r : chart.references) ys.push_back(r.y);
  if (xs.empty()) xs = {0, 1};
  if (ys.empty()) ys = {0, 1};
  const auto [x_min, x_max] = std::minmax_element(xs.begin(), xs.end());

  std::vector<double> x_ticks;
  Axis x{*x_min, *x_max, kLeft + 20, plot_right - 20, chart.log2_x};
  if (chart.log2_x) {
    const std::set<double> distinct(xs.begin(), xs.end());
    x_ticks.assign(distinct.begin(), distinct.end());
  } else {
    x_ticks = nice_ticks(*x_min, *x_max);
    x = {x_ticks.front(), x_ticks.back(), kLeft, plot_right};
  }
  std::vector<double> y_ticks;
  if (chart.y_range) {
    y_ticks = nice_ticks(chart.y_range->first, chart.y_range->second);
  } else {
    const auto [y_min, y_max] = std::minmax_element(ys.begin(), ys.end());
    y_ticks = nice_ticks(*y_min, *y_max == *y_min ? *y_min + 1 : *y_max);
  }
  const Axis y{y_ticks.front(), y_ticks.back(), plot_bottom, kTop};

  const double legend_x = plot_right + kLegendGap;
  size_t longest = 0;
  for (const ReferenceLine& r : chart.references) longest = std::max(longest, r.name.size());
  for (const ChartSeries& s : chart.series) longest = std::max(longest, s.name.size());
  const double width = std::max(kWidth, std::ceil(legend_x + kLegendText + kCharWidth * double(longest) + 10));

  SvgWriter svg(width, kHeight);
  svg.element("rect", {{"width", "100%"}, {"height", "100%"}, {"fill", "white"}});
  title_and_labels(svg, chart.title, chart.x_label, chart.y_label, plot_right, width);
  svg.open("g", {{"class", "axes"}, {"stroke", "#cccccc"}});
  for (double t : y_ticks)
    svg.element("line", {{"x1", svg_number(kLeft)},
                         {"x2", svg_number(plot_right)},
                         {"y1", svg_number(y(t))},
                         {"y2", svg_number(y(t))}});
  for (double t : x_ticks)
    svg.element("line", {{"x1", svg_number(x(t))},
                         {"x2", svg_number(x(t))},
                         {"y1", svg_number(kTop)},
                         {"y2", svg_number(plot_bottom)}});
  svg.element("rect", {{"x", svg_number(kLeft)},
                       {"y", svg_number(kTop)},
                       {"width", svg_number(plot_right - kLeft)},
                       {"height", svg_number(plot_bottom - kTop)},
                       {"fill", "none"},
                       {"stroke", "#333333"}});
  svg.close();
  svg.open("g", {{"class", "ticks"}});
  for (double t : y_ticks)
    svg.element("text", {{"x", svg_number(kLeft - 6)}, {"y", svg_number(y(t) + 4)}, {"text-anchor", "end"}},
                tick_label(t));
  for (double t : x_ticks)
    svg.element("text", {{"x", svg_number(x(t))}, {"y", svg_number(plot_bottom + 16)}, {"text-anchor", "middle"}},
                tick_label(t));
  svg.close();

  double legend_y = kTop + 10;
  size_t color = 0;
  for (const ReferenceLine& r : chart.references) {
    const std::string c = "#000000";
    svg.open("g", {{"data-reference", r.name}});
    svg.element("line", {{"x1", svg_number(kLeft)},
                         {"x2", svg_number(plot_right)},
                         {"y1", svg_number(y(r.y))},
                         {"y2", svg_number(y(r.y))},
                         {"stroke", c},
                         {"stroke-dasharray", "6 4"},
                         {"stroke-width", "1.5"}});
    svg.element("title", {}, fmt::format("{}: {}", r.name, tick_label(r.y)));
    svg.element("line", {{"x1", svg_number(legend_x)},
                         {"x2", svg_number(legend_x + 20)},
                         {"y1", svg_number(legend_y)},
                         {"y2", svg_number(legend_y)},
                         {"stroke", c},
                         {"stroke-dasharray", "6 4"}});
    svg.element("text", {{"x", svg_number(legend_x + kLegendText)}, {"y", svg_number(legend_y + 4)}}, r.name);
    svg.close();
    legend_y += 18;
  }
  for (const ChartSeries& s : chart.series) {
    const std::string c = kPalette[color++ % std::size(kPalette)];
    svg.open("g", {{"data-series", s.name}, {"stroke", c}, {"fill", c}});
    std::string points;
    for (const auto& [px, py] : s.points)
      points += fmt::format("{}{},{}", points.empty() ? "" : " ", svg_number(x(px)), svg_number(y(py)));
    if (s.points.size() > 1) svg.element("polyline", {{"points", points}, {"fill", "none"}, {"stroke-width", "2"}});
    for (const auto& [px, py] : s.points) {
      svg.open("circle", {{"cx", svg_number(x(px))}, {"cy", svg_number(y(py))}, {"r", "3.5"}});
      svg.element("title", {}, fmt::format("{}: ({}, {})", s.name, tick_label(px), tick_label(py)));
      svg.close();
    }
    svg.element("line", {{"x1", svg_number(legend_x)},
                         {"x2", svg_number(legend_x + 20)},
                         {"y1", svg_number(legend_y)},
                         {"y2", svg_number(legend_y)},
                         {"stroke-width", "2"}});
    svg.element("text",
                {{"x", svg_number(legend_x + kLegendText)},
                 {"y", svg_number(legend_y + 4)},
                 {"stroke", "none"},
                 {"fill", "#000000"}},
                s.name);
    svg.close();
    legend_y += 18;
  }
  return svg.finish();
}

std::string render_heatmap(const Heatmap& map) {
  const double plot_right = kWidth - kRight, plot_bottom = kHeight - kBottom;
  const double cell_w = (plot_right - kLeft) / double(std::max<size_t>(map.columns.size(), 1));
  const double cell_h = (plot_bottom - kTop) / double(std::max<size_t>(map.rows.size(), 1));
  SvgWriter svg(kWidth, kHeight);
  svg.element("rect", {{"width", "100%"}, {"height", "100%"}, {"fill", "white"}});
  title_and_labels(svg, map.title, map.x_label, map.y_label, plot_right);
  svg.open("g", {{"class", "cells"}});
  for (size_t r = 0; r < map.rows.size(); ++r)
    for (size_t c = 0; c < map.columns.size(); ++c) {
      const std::optional<double> v = map.values[r][c];
      const double cx = kLeft + double(c) * cell_w, cy = kTop + double(r) * cell_h;
      svg.open("g", {{"data-row", map.rows[r]},
                     {"data-column", map.columns[c]},
                     {"data-value", v ? fmt::format("{:.4f}", *v) : ""}});
      svg.element("rect", {{"x", svg_number(cx)},
                           {"y", svg_number(cy)},
                           {"width", svg_number(cell_w)},
                           {"height", svg_number(cell_h)},
                           {"fill", v ? color_for(*v) : "#eeeeee"},
                           {"stroke", "white"}});
      svg.element(
          "text",
          {{"x", svg_number(cx + cell_w / 2)}, {"y", svg_number(cy + cell_h / 2 + 4)}, {"text-anchor", "middle"}},
          v ? fmt::format("{:.2f}", *v) : "n/a");
      svg.close();
    }
  svg.close();
  svg.open("g", {{"class", "ticks"}});
  for (size_t c = 0; c < map.columns.size(); ++c)
    svg.element("text",
                {{"x", svg_number(kLeft + (double(c) + 0.5) * cell_w)},
                 {"y", svg_number(plot_bottom + 16)},
                 {"text-anchor", "middle"}},
                map.columns[c]);
  for (size_t r = 0; r < map.rows.size(); ++r)
    svg.element("text",
                {{"x", svg_number(kLeft - 6)},
                 {"y", svg_number(kTop + (double(r) + 0.5) * cell_h + 4)},
                 {"text-anchor", "end"}},
                map.rows[r]);
  svg.close();
  return svg.finish();
}

}  // namespace kvslim::eval
