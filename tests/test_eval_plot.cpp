// SVG charts: every file parses as well-formed XML (a minimal parser written here checks
// nesting, attribute syntax and entities) with an <svg> root carrying its required attributes,
// and holds the expected series, reference lines and heatmap cells at the right places.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "eval/plots.h"
#include "eval/svg.h"
#include "eval/svg_plot.h"
#include "util/error.h"

namespace kvslim {
namespace {

using namespace eval;

// ---- a minimal XML parser: elements, attributes, text, the five predefined entities ----

struct Node {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::vector<Node> children;
  std::string text;
};

class XmlParser {
 public:
  explicit XmlParser(const std::string& s) : s_(s) {}

  // Throws std::runtime_error describing the first violation.
  Node parse_document() {
    if (s_.compare(0, 5, "<?xml") == 0) {
      const size_t end = s_.find("?>");
      if (end == std::string::npos) bad("unterminated XML declaration");
      i_ = end + 2;
    }
    skip_space();
    Node root = element();
    skip_space();
    if (i_ != s_.size()) bad("content after the root element");
    return root;
  }

 private:
  [[noreturn]] void bad(const std::string& what) {
    throw std::runtime_error(what + " at offset " + std::to_string(i_));
  }
  void skip_space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  std::string name() {
    const size_t start = i_;
    while (i_ < s_.size() &&
           (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '-' || s_[i_] == ':' || s_[i_] == '_'))
      ++i_;
    if (i_ == start) bad("expected a name");
    return s_.substr(start, i_ - start);
  }
  // Decodes text up to `stop`, checking entities and forbidding '<'.
  std::string decoded(char stop) {
    std::string out;
    while (i_ < s_.size() && s_[i_] != stop) {
      if (s_[i_] == '<') bad("'<' inside text or an attribute");
      if (s_[i_] == '&') {
        const size_t semi = s_.find(';', i_);
        if (semi == std::string::npos) bad("unterminated entity");
        const std::string entity = s_.substr(i_, semi - i_ + 1);
        static const std::map<std::string, char> known = {
            {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
        const auto it = known.find(entity);
        if (it == known.end()) bad("unknown entity " + entity);
        out += it->second;
        i_ = semi + 1;
      } else {
        out += s_[i_++];
      }
    }
    return out;
  }
  Node element() {
    if (i_ >= s_.size() || s_[i_] != '<') bad("expected '<'");
    ++i_;
    Node node;
    node.name = name();
    while (true) {
      skip_space();
      if (i_ >= s_.size()) bad("unterminated start tag");
      if (s_.compare(i_, 2, "/>") == 0) {
        i_ += 2;
        return node;
      }
      if (s_[i_] == '>') {
        ++i_;
        break;
      }
      const std::string attr = name();
      if (i_ >= s_.size() || s_[i_] != '=') bad("attribute " + attr + " without '='");
      ++i_;
      if (i_ >= s_.size() || s_[i_] != '"') bad("attribute " + attr + " value not quoted");
      ++i_;
      const std::string value = decoded('"');
      if (i_ >= s_.size()) bad("unterminated attribute value");
      ++i_;
      if (!node.attrs.emplace(attr, value).second) bad("duplicate attribute " + attr);
    }
    while (true) {
      node.text += decoded('<');
      if (i_ >= s_.size()) bad("unclosed element " + node.name);
      if (s_.compare(i_, 2, "</") == 0) {
        i_ += 2;
        const std::string closing = name();
        if (closing != node.name) bad("</" + closing + "> closes <" + node.name + ">");
        skip_space();
        if (i_ >= s_.size() || s_[i_] != '>') bad("malformed end tag");
        ++i_;
        return node;
      }
      node.children.push_back(element());
    }
  }

  const std::string& s_;
  size_t i_ = 0;
};

Node parse_svg(const std::string& svg) {
  Node root = XmlParser(svg).parse_document();
  EXPECT_EQ(root.name, "svg");
  for (const char* a : {"xmlns", "width", "height", "viewBox"}) EXPECT_TRUE(root.attrs.count(a)) << a;
  EXPECT_EQ(root.attrs["xmlns"], "http://www.w3.org/2000/svg");
  return root;
}

void collect(const Node& n, const std::string& attr, std::vector<const Node*>& out) {
  if (n.attrs.count(attr)) out.push_back(&n);
  for (const Node& c : n.children) collect(c, attr, out);
}
std::vector<const Node*> with_attr(const Node& root, const std::string& attr) {
  std::vector<const Node*> out;
  collect(root, attr, out);
  return out;
}
std::vector<const Node*> children_named(const Node& n, const std::string& name) {
  std::vector<const Node*> out;
  for (const Node& c : n.children)
    if (c.name == name) out.push_back(&c);
  return out;
}

TEST(XmlChecker, RejectsMalformedDocuments) {
  for (const char* bad : {"<svg><g></svg>", "<svg a=1/>", "<svg a=\"x\" a=\"y\"/>", "<svg>&nbsp;</svg>",
                          "<svg>a < b</svg>", "<svg/><svg/>", "<svg><g>"})
    EXPECT_THROW(XmlParser(bad).parse_document(), std::runtime_error) << bad;
  EXPECT_NO_THROW(XmlParser("<svg a=\"&lt;&amp;\"><g/>text</svg>").parse_document());
}

TEST(Svg, EscapesTextAndAttributes) {
  EXPECT_EQ(xml_escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
  EXPECT_EQ(svg_number(1.005), "1");  // two decimals, trailing zeros dropped
  EXPECT_EQ(svg_number(12.5), "12.5");
  EXPECT_EQ(svg_number(-0.001), "0");
  SvgWriter w(10, 20);
  w.open("g", {{"data-x", "<&\">"}});
  w.element("text", {}, "a & b");
  const Node root = parse_svg(w.finish());
  EXPECT_EQ(root.children[0].attrs.at("data-x"), "<&\">");
  EXPECT_EQ(root.children[0].children[0].text, "a & b");
}

TEST(SvgPlot, NiceTicksCoverTheRangeInRoundSteps) {
  EXPECT_EQ(nice_ticks(0, 1), (std::vector<double>{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}));
  EXPECT_EQ(nice_ticks(3, 97), (std::vector<double>{0, 20, 40, 60, 80, 100}));
}

TEST(SvgPlot, LineChartHasEverySeriesAndTheReference) {
  LineChart chart;
  chart.title = "t";
  chart.series = {{"knorm", {{64, 0.25}, {128, 0.5}, {256, 1.0}}}, {"snap<kv>", {{64, 0.0}, {256, 0.75}}}};
  chart.references = {{"full", 1.0}};
  chart.y_range = {0.0, 1.0};
  chart.log2_x = true;
  const Node root = parse_svg(render_line_chart(chart));
  const auto series = with_attr(root, "data-series");
  ASSERT_EQ(series.size(), 2u);
  EXPECT_EQ(series[0]->attrs.at("data-series"), "knorm");
  EXPECT_EQ(series[1]->attrs.at("data-series"), "snap<kv>");
  const auto circles = children_named(*series[0], "circle");
  ASSERT_EQ(circles.size(), 3u);
  EXPECT_EQ(children_named(*series[0], "polyline").size(), 1u);
  // y = 1 is the plot's top edge (40 px), y = 0.25 a quarter of the 320 px height above the bottom (360 px).
  EXPECT_EQ(circles[2]->attrs.at("cy"), "40");
  EXPECT_EQ(circles[0]->attrs.at("cy"), "280");
  // log2 x: 128 lies halfway between 64 and 256.
  const double x64 = std::stod(circles[0]->attrs.at("cx")), x128 = std::stod(circles[1]->attrs.at("cx")),
               x256 = std::stod(circles[2]->attrs.at("cx"));
  EXPECT_NEAR(x128 - x64, x256 - x128, 0.02);
  const auto refs = with_attr(root, "data-reference");
  ASSERT_EQ(refs.size(), 1u);
  EXPECT_EQ(refs[0]->attrs.at("data-reference"), "full");
  EXPECT_EQ(children_named(*refs[0], "line")[0]->attrs.at("y1"), "40");
}

// A method with options (lookaheadkv:adapter=PATH) names a long series: the chart widens so that
// its legend entry ends inside the picture, at 7 pixels per character; short names keep 680.
TEST(SvgPlot, LongLegendNamesWidenTheChart) {
  LineChart chart;
  chart.series = {{"knorm", {{64, 0.25}, {128, 0.5}}}};
  EXPECT_EQ(parse_svg(render_line_chart(chart)).attrs.at("width"), "680");
  const std::string long_name(60, 'x');
  chart.series.push_back({long_name, {{64, 0.5}}});
  const Node root = parse_svg(render_line_chart(chart));
  const auto series = with_attr(root, "data-series");
  ASSERT_EQ(series.size(), 2u);
  const double text_x = std::stod(children_named(*series[1], "text")[0]->attrs.at("x"));
  EXPECT_GE(std::stod(root.attrs.at("width")), text_x + 60 * 7);
  EXPECT_EQ(root.attrs.at("viewBox"), "0 0 " + root.attrs.at("width") + " 420");
}

TEST(SvgPlot, HeatmapHasOneCellPerRowAndColumn) {
  Heatmap map;
  map.columns = {"1024", "2048"};
  map.rows = {"0", "0.5", "1"};
  map.values = {{1.0, 0.5}, {0.0, std::nullopt}, {0.25, 0.75}};
  const Node root = parse_svg(render_heatmap(map));
  const auto cells = with_attr(root, "data-value");
  ASSERT_EQ(cells.size(), 6u);
  EXPECT_EQ(cells[1]->attrs.at("data-row"), "0");
  EXPECT_EQ(cells[1]->attrs.at("data-column"), "2048");
  EXPECT_EQ(cells[1]->attrs.at("data-value"), "0.5000");
  EXPECT_EQ(cells[3]->attrs.at("data-value"), "");
  EXPECT_EQ(children_named(*cells[3], "text")[0]->text, "n/a");
  EXPECT_EQ(children_named(*cells[0], "rect")[0]->attrs.at("fill"), "#1a9850");  // 1: green
  EXPECT_EQ(children_named(*cells[2], "rect")[0]->attrs.at("fill"), "#d7301f");  // 0: red
}

SampleRecord rec(const std::string& method, int64_t budget, const std::string& task, int64_t length, double depth,
                 uint64_t seed, double score, uint64_t kv_bytes) {
  SampleRecord r;
  r.method = method;
  r.budget = budget;
  r.task = depth >= 0 ? task + "@" + fmt::format("{}", depth) : task;
  r.length = length;
  r.depth = depth;
  r.seed = seed;
  r.protocol = "query-aware";
  r.score = score;
  r.kv_bytes = kv_bytes;
  return r;
}

TEST(Plots, ChartsForEveryTaskTheNiahGridAndMemory) {
  std::vector<SampleRecord> records;
  for (int64_t length : {512, 1024})
    for (double depth : {0.0, 0.5, 1.0}) {
      records.push_back(rec("full", 0, "niah_single_1", length, depth, 1, 1.0, 4096));
      records.push_back(rec("snapkv", 64, "niah_single_1", length, depth, 1, depth, 1024));
      records.push_back(rec("snapkv", 256, "niah_single_1", length, depth, 1, 1.0, 2048));
    }
  records.push_back(rec("full", 0, "vt", 512, -1, 1, 0.5, 4096));
  records.push_back(rec("snapkv", 64, "vt", 512, -1, 1, 0.25, 1024));
  records[0].recall = 1.0;
  const std::vector<PlotFile> files = make_plots(records);
  std::map<std::string, std::string> by_name;
  for (const PlotFile& f : files) by_name[f.name] = f.svg;
  std::set<std::string> names;
  for (const auto& [name, svg] : by_name) names.insert(name);
  EXPECT_EQ(names,
            (std::set<std::string>{"score_vs_budget_niah_single_1_512.svg", "score_vs_budget_niah_single_1_1024.svg",
                                   "score_vs_budget_vt_512.svg", "recall_vs_budget_niah_single_1_512.svg",
                                   "niah_niah_single_1_full_b0.svg", "niah_niah_single_1_snapkv_b64.svg",
                                   "niah_niah_single_1_snapkv_b256.svg", "memory_vs_score.svg"}));
  for (const auto& [name, svg] : by_name) parse_svg(svg);

  // Score vs budget: the depths averaged; snapkv at 64 scores the mean depth 0.5.
  const Node score = parse_svg(by_name["score_vs_budget_niah_single_1_512.svg"]);
  const auto series = with_attr(score, "data-series");
  ASSERT_EQ(series.size(), 1u);
  EXPECT_EQ(series[0]->attrs.at("data-series"), "snapkv");
  const auto points = children_named(*series[0], "circle");
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(children_named(*points[0], "title")[0]->text, "snapkv: (64, 0.5)");
  EXPECT_EQ(with_attr(score, "data-reference")[0]->attrs.at("data-reference"), "full");

  // The NIAH grid of snapkv at 64: the score is the depth in every column.
  const Node grid = parse_svg(by_name["niah_niah_single_1_snapkv_b64.svg"]);
  const auto cells = with_attr(grid, "data-value");
  ASSERT_EQ(cells.size(), 6u);
  for (const Node* c : cells) EXPECT_EQ(std::stod(c->attrs.at("data-value")), std::stod(c->attrs.at("data-row")));

  // Memory vs score: full as one point, snapkv through both budgets, KiB on the x axis.
  const Node memory_chart = parse_svg(by_name["memory_vs_score.svg"]);
  const auto memory = with_attr(memory_chart, "data-series");
  ASSERT_EQ(memory.size(), 2u);
  EXPECT_EQ(memory[0]->attrs.at("data-series"), "full");
  EXPECT_EQ(children_named(*memory[0], "circle").size(), 1u);
  EXPECT_EQ(children_named(*memory[1], "circle").size(), 2u);
  EXPECT_EQ(children_named(*children_named(*memory[0], "circle")[0], "title")[0]->text,
            "full: (4, 0.928571)");  // (6 x 1 + 0.5) / 7 samples
}

TEST(Plots, NothingToPlotIsAnError) { EXPECT_THROW(make_plots({}), Error); }

}  // namespace
}  // namespace kvslim
