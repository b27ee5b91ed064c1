// A small line editor for `kvslim chat` on a terminal (no readline dependency: the editing chat
// needs is a few keys). Raw mode only while a line is read, so Ctrl-C during an answer still
// raises SIGINT. Keys: printable text (UTF-8), Backspace, Delete, Left/Right, Home/End, Ctrl-A/E,
// Ctrl-U (clear), Up/Down (history), Enter, Ctrl-C (drop the line), Ctrl-D (end on an empty line).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kvslim::cli {

class LineEditor {
 public:
  // fd: a terminal (isatty) to read keys from; output goes to `out_fd`.
  LineEditor(int in_fd, int out_fd) : in_(in_fd), out_(out_fd) {}

  // The next line (without its newline), or nullopt at end of input (Ctrl-D on an empty line).
  std::optional<std::string> read_line(const std::string& prompt);
  void add_history(const std::string& line);

 private:
  void redraw(const std::string& prompt) const;
  void write(const std::string& s) const;

  int in_, out_;
  std::string line_;
  size_t cursor_ = 0;  // byte offset, always at a UTF-8 character start
  std::vector<std::string> history_;
};

}  // namespace kvslim::cli
