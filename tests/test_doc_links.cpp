// Every relative link in README.md and docs/**/*.md points at a file of the repository, and every
// `#anchor` at a heading of its target: the README is a front door whose rooms are in docs/, so a
// moved or renamed page must not leave a dead link behind. Links in code blocks and code spans are
// not links; web addresses are not checked (no network in the tests).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

namespace fs = std::filesystem;

struct Link {
  int line = 0;
  std::string target;  // as written, e.g. "docs/speed.md#measurements"
};

// Removes inline code spans (`...`, ``...``) from one line, so that `[a](b)` inside code is skipped.
std::string without_code_spans(const std::string& line) {
  std::string out;
  size_t i = 0;
  while (i < line.size()) {
    if (line[i] != '`') {
      out += line[i++];
      continue;
    }
    size_t ticks = 0;
    while (i + ticks < line.size() && line[i + ticks] == '`') ++ticks;
    const size_t close = line.find(std::string(ticks, '`'), i + ticks);
    if (close == std::string::npos) {  // an unmatched backtick is text
      out.append(ticks, '`');
      i += ticks;
      continue;
    }
    i = close + ticks;
  }
  return out;
}

// The targets of inline links and images, [text](target) and ![alt](target "title"), outside
// fenced code blocks, plus HTML src="..." attributes (images).
std::vector<Link> extract_links(const std::string& markdown) {
  std::vector<Link> links;
  std::istringstream in(markdown);
  std::string raw;
  int number = 0;
  bool fenced = false;
  while (std::getline(in, raw)) {
    ++number;
    const size_t first = raw.find_first_not_of(' ');
    if (first != std::string::npos && (raw.compare(first, 3, "```") == 0 || raw.compare(first, 3, "~~~") == 0)) {
      fenced = !fenced;
      continue;
    }
    if (fenced) continue;
    const std::string line = without_code_spans(raw);
    for (size_t at = line.find("]("); at != std::string::npos; at = line.find("](", at + 2)) {
      size_t end = at + 2, depth = 1;
      while (end < line.size() && depth > 0) {
        if (line[end] == '(') ++depth;
        if (line[end] == ')') --depth;
        if (depth > 0) ++end;
      }
      if (depth != 0) continue;
      std::string target = line.substr(at + 2, end - at - 2);
      if (const size_t space = target.find(' '); space != std::string::npos) target.resize(space);  // a title
      if (target.size() >= 2 && target.front() == '<' && target.back() == '>')
        target = target.substr(1, target.size() - 2);
      links.push_back({number, target});
    }
    for (size_t at = line.find("src=\""); at != std::string::npos; at = line.find("src=\"", at + 5)) {
      const size_t end = line.find('"', at + 5);
      if (end != std::string::npos) links.push_back({number, line.substr(at + 5, end - at - 5)});
    }
  }
  return links;
}

// GitHub's anchor of a heading: lower case, punctuation dropped (hyphens and underscores kept),
// spaces become hyphens.
std::string heading_anchor(const std::string& heading) {
  std::string out;
  for (unsigned char c : heading) {
    if (std::isalnum(c) || c == '-' || c == '_' || c >= 0x80)
      out += char(std::tolower(c));
    else if (c == ' ')
      out += '-';
  }
  return out;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The anchors of every heading of a markdown file (duplicates get -1, -2, ... as on GitHub).
std::set<std::string> heading_anchors(const std::string& markdown) {
  std::set<std::string> anchors;
  std::istringstream in(markdown);
  std::string line;
  bool fenced = false;
  while (std::getline(in, line)) {
    if (line.rfind("```", 0) == 0 || line.rfind("~~~", 0) == 0) fenced = !fenced;
    if (fenced || line.empty() || line[0] != '#') continue;
    const size_t text = line.find_first_not_of('#');
    if (text == std::string::npos || line[text] != ' ') continue;
    const std::string base = heading_anchor(line.substr(text + 1));
    std::string anchor = base;
    for (int k = 1; anchors.count(anchor); ++k) anchor = base + "-" + std::to_string(k);
    anchors.insert(anchor);
  }
  return anchors;
}

bool is_external(const std::string& target) {
  return target.find("://") != std::string::npos || target.rfind("mailto:", 0) == 0;
}

// One message per dead link of `file` (a markdown file of the repository at `root`).
std::vector<std::string> dead_links(const fs::path& root, const fs::path& file) {
  std::vector<std::string> dead;
  const std::string name = fs::relative(file, root).string();
  for (const Link& link : extract_links(read_file(file))) {
    if (link.target.empty() || is_external(link.target)) continue;
    const size_t hash = link.target.find('#');
    const std::string path = link.target.substr(0, hash);
    const std::string anchor = hash == std::string::npos ? "" : link.target.substr(hash + 1);
    const fs::path resolved = path.empty() ? file : (file.parent_path() / path).lexically_normal();
    const std::string where = name + ":" + std::to_string(link.line) + ": (" + link.target + ")";
    const std::string inside = fs::relative(resolved, root).string();
    if (inside.rfind("..", 0) == 0) {
      dead.push_back(where + " leaves the repository");
      continue;
    }
    if (!fs::exists(resolved)) {
      dead.push_back(where + " names a file that does not exist");
      continue;
    }
    if (!anchor.empty() && resolved.extension() == ".md" && !heading_anchors(read_file(resolved)).count(anchor))
      dead.push_back(where + " names a heading that does not exist");
  }
  return dead;
}

std::vector<fs::path> markdown_files(const fs::path& root) {
  std::vector<fs::path> files = {root / "README.md"};
  for (const auto& entry : fs::recursive_directory_iterator(root / "docs"))
    if (entry.is_regular_file() && entry.path().extension() == ".md") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(DocLinks, ExtractsLinksOutsideCode) {
  const std::string md =
      "See [a](docs/a.md) and ![fig](img/x.svg \"title\") and [b](b.md#part).\n"
      "`[not](code.md)` and ``x [no](c.md) y`` then [web](https://example.com/x_(y))\n"
      "```sh\n"
      "[inside](fence.md)\n"
      "```\n"
      "<img src=\"img/y.svg\" width=\"600\">\n";
  const std::vector<Link> links = extract_links(md);
  std::vector<std::string> targets;
  for (const Link& l : links) targets.push_back(std::to_string(l.line) + " " + l.target);
  EXPECT_EQ(targets, (std::vector<std::string>{"1 docs/a.md", "1 img/x.svg", "1 b.md#part",
                                               "2 https://example.com/x_(y)", "6 img/y.svg"}));
}

TEST(DocLinks, HeadingAnchorsFollowGitHub) {
  const std::set<std::string> anchors = heading_anchors(
      "# kvslim\n## Adding a method, step by step\n## The `kvslim` command\n## Notes\n## Notes\n```\n# not\n```\n");
  EXPECT_EQ(anchors, (std::set<std::string>{"kvslim", "adding-a-method-step-by-step", "the-kvslim-command", "notes",
                                            "notes-1"}));
}

TEST(DocLinks, DeadLinksAreFound) {
  const fs::path root = fs::temp_directory_path() / ("kvslim-doc-links-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "docs");
  std::ofstream(root / "README.md") << "[ok](docs/a.md) [gone](docs/b.md) [part](docs/a.md#there) "
                                       "[nopart](docs/a.md#nowhere) [out](../x.md)\n";
  std::ofstream(root / "docs" / "a.md") << "# There\n[up](../README.md) [self](#there)\n";
  std::vector<std::string> dead;
  for (const fs::path& f : markdown_files(root))
    for (const std::string& d : dead_links(root, f)) dead.push_back(d);
  fs::remove_all(root);
  EXPECT_EQ(dead, (std::vector<std::string>{"README.md:1: (docs/b.md) names a file that does not exist",
                                            "README.md:1: (docs/a.md#nowhere) names a heading that does not exist",
                                            "README.md:1: (../x.md) leaves the repository"}));
}

TEST(DocLinks, EveryRelativeLinkOfTheDocsResolves) {
  const fs::path root = KVSLIM_SOURCE_DIR;
  std::vector<std::string> dead;
  size_t files = 0;
  for (const fs::path& f : markdown_files(root)) {
    ++files;
    for (const std::string& d : dead_links(root, f)) dead.push_back(d);
  }
  EXPECT_GE(files, 2u);
  for (const std::string& d : dead) ADD_FAILURE() << d;
}

}  // namespace
