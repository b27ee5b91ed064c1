// Two chart kinds drawn as hand-written SVG: a line chart (series of points, optional horizontal
// reference lines, linear or log2 x axis) and a heatmap of values in [0, 1]. Series, reference
// lines and cells carry data-* attributes naming what they show.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kvslim::eval {

struct ChartSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in the given order
};

struct ReferenceLine {
  std::string name;
  double y = 0;
};

struct LineChart {
  std::string title, x_label, y_label;
  std::vector<ChartSeries> series;
  std::vector<ReferenceLine> references;             // horizontal, dashed
  bool log2_x = false;                               // ticks at the data's x values (all must be > 0)
  std::optional<std::pair<double, double>> y_range;  // default: the data's, widened to round ticks
};

std::string render_line_chart(const LineChart& chart);

struct Heatmap {
  std::string title, x_label, y_label;
  std::vector<std::string> columns, rows;                  // tick labels, left to right / top to bottom
  std::vector<std::vector<std::optional<double>>> values;  // [row][column] in [0, 1]; empty: no data
};

std::string render_heatmap(const Heatmap& map);

// Round tick values covering [lo, hi] (steps of 1, 2 or 5 times a power of ten), about `count`.
std::vector<double> nice_ticks(double lo, double hi, int count = 5);

}  // namespace kvslim::eval
