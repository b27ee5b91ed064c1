// A minimal SVG writer: nested elements with escaped attributes and text, so that every chart
// is well-formed XML by construction.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvslim::eval {

using SvgAttrs = std::vector<std::pair<std::string, std::string>>;

// &, <, >, " and ' as entities.
std::string xml_escape(std::string_view text);
// A coordinate or size: at most two decimals, no trailing zeros.
std::string svg_number(double value);

class SvgWriter {
 public:
  SvgWriter(double width, double height);
  void open(const std::string& tag, const SvgAttrs& attrs = {});
  void close();
  // An element with optional text content, opened and closed at once.
  void element(const std::string& tag, const SvgAttrs& attrs, const std::string& text = "");
  // The document; every open element is closed.
  std::string finish();

 private:
  std::string out_;
  std::vector<std::string> open_;
};

}  // namespace kvslim::eval
