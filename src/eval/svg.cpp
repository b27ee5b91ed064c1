#include "eval/svg.h"

#include <fmt/format.h>

namespace kvslim::eval {

namespace {

std::string start_tag(const std::string& tag, const SvgAttrs& attrs) {
  std::string s = fmt::format("<{}", tag);
  for (const auto& [name, value] : attrs) s += fmt::format(" {}=\"{}\"", name, xml_escape(value));
  return s;
}

}  // namespace

std::string xml_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string svg_number(double value) {
  std::string s = fmt::format("{:.2f}", value);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}

SvgWriter::SvgWriter(double width, double height) {
  out_ = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  open("svg", {{"xmlns", "http://www.w3.org/2000/svg"},
               {"width", svg_number(width)},
               {"height", svg_number(height)},
               {"viewBox", fmt::format("0 0 {} {}", svg_number(width), svg_number(height))},
               {"font-family", "sans-serif"},
               {"font-size", "12"}});
}

void SvgWriter::open(const std::string& tag, const SvgAttrs& attrs) {
  out_ += start_tag(tag, attrs) + ">\n";
  open_.push_back(tag);
}

void SvgWriter::close() {
  out_ += fmt::format("</{}>\n", open_.back());
  open_.pop_back();
}

void SvgWriter::element(const std::string& tag, const SvgAttrs& attrs, const std::string& text) {
  out_ += start_tag(tag, attrs);
  out_ += text.empty() ? std::string("/>\n") : fmt::format(">{}</{}>\n", xml_escape(text), tag);
}

std::string SvgWriter::finish() {
  while (!open_.empty()) close();
  return out_;
}

}  // namespace kvslim::eval
