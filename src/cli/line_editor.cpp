#include "cli/line_editor.h"

#include <termios.h>
#include <unistd.h>

#include <cerrno>

namespace kvslim::cli {

namespace {

bool continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// Characters (not bytes) in s[0, n): the terminal column of a byte offset for text without
// wide characters.
size_t columns(const std::string& s, size_t n) {
  size_t cols = 0;
  for (size_t i = 0; i < n; ++i) cols += !continuation(s[i]);
  return cols;
}

// Raw mode for the life of the object: no echo, no line buffering, no signals (Ctrl-C arrives
// as a byte and drops the line), restored on every exit path.
class RawMode {
 public:
  explicit RawMode(int fd) : fd_(fd) {
    ok_ = tcgetattr(fd, &saved_) == 0;
    if (!ok_) return;
    termios raw = saved_;
    raw.c_lflag &= ~(ECHO | ICANON | ISIG | IEXTEN);
    raw.c_iflag &= ~(IXON | ICRNL);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    tcsetattr(fd, TCSADRAIN, &raw);  // not FLUSH: keys typed during an answer stay
  }
  ~RawMode() {
    if (ok_) tcsetattr(fd_, TCSADRAIN, &saved_);
  }

 private:
  int fd_;
  bool ok_ = false;
  termios saved_{};
};

}  // namespace

void LineEditor::write(const std::string& s) const {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(out_, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += size_t(n);
  }
}

void LineEditor::redraw(const std::string& prompt) const {
  std::string s = "\r" + prompt + line_ + "\x1b[K";
  const size_t back = columns(line_, line_.size()) - columns(line_, cursor_);
  if (back > 0) s += "\x1b[" + std::to_string(back) + "D";
  write(s);
}

void LineEditor::add_history(const std::string& line) {
  if (!line.empty() && (history_.empty() || history_.back() != line)) history_.push_back(line);
}

std::optional<std::string> LineEditor::read_line(const std::string& prompt) {
  RawMode raw(in_);
  line_.clear();
  cursor_ = 0;
  size_t browsing = history_.size();  // history_.size(): the line being typed
  std::string typed;
  redraw(prompt);
  auto read_byte = [&](char& c) {
    for (;;) {
      const ssize_t n = ::read(in_, &c, 1);
      if (n == 1) return true;
      if (n < 0 && errno == EINTR) continue;
      return false;
    }
  };
  auto show_history = [&](size_t index) {
    if (browsing == history_.size()) typed = line_;
    browsing = index;
    line_ = browsing == history_.size() ? typed : history_[browsing];
    cursor_ = line_.size();
  };
  char c;
  while (read_byte(c)) {
    if (c == '\r' || c == '\n') {
      write("\r\n");
      return line_;
    }
    if (c == 4) {  // Ctrl-D: end of input on an empty line, else delete forward
      if (line_.empty()) {
        write("\r\n");
        return std::nullopt;
      }
      c = 0x7e;  // handled as Delete below
      if (cursor_ < line_.size()) {
        size_t end = cursor_ + 1;
        while (end < line_.size() && continuation(line_[end])) ++end;
        line_.erase(cursor_, end - cursor_);
      }
    } else if (c == 3) {  // Ctrl-C: drop the line
      write("^C\r\n");
      line_.clear();
      cursor_ = 0;
    } else if (c == 127 || c == 8) {  // Backspace: one whole UTF-8 character
      if (cursor_ > 0) {
        size_t start = cursor_ - 1;
        while (start > 0 && continuation(line_[start])) --start;
        line_.erase(start, cursor_ - start);
        cursor_ = start;
      }
    } else if (c == 1) {
      cursor_ = 0;
    } else if (c == 5) {
      cursor_ = line_.size();
    } else if (c == 21) {
      line_.clear();
      cursor_ = 0;
    } else if (c == 27) {  // escape sequences: ESC [ X or ESC [ n ~ or ESC O X
      char a = 0, b = 0;
      if (!read_byte(a) || !read_byte(b)) break;
      if (a == '[' && b >= '0' && b <= '9') {
        char tilde = 0;
        if (!read_byte(tilde)) break;
        if (b == '3' && cursor_ < line_.size()) {  // Delete
          size_t end = cursor_ + 1;
          while (end < line_.size() && continuation(line_[end])) ++end;
          line_.erase(cursor_, end - cursor_);
        } else if (b == '1' || b == '7') {
          cursor_ = 0;
        } else if (b == '4' || b == '8') {
          cursor_ = line_.size();
        }
      } else if (a == '[' || a == 'O') {
        if (b == 'D' && cursor_ > 0) {
          do --cursor_;
          while (cursor_ > 0 && continuation(line_[cursor_]));
        } else if (b == 'C' && cursor_ < line_.size()) {
          do ++cursor_;
          while (cursor_ < line_.size() && continuation(line_[cursor_]));
        } else if (b == 'H') {
          cursor_ = 0;
        } else if (b == 'F') {
          cursor_ = line_.size();
        } else if (b == 'A' && browsing > 0) {
          show_history(browsing - 1);
        } else if (b == 'B' && browsing < history_.size()) {
          show_history(browsing + 1);
        }
      }
    } else if (static_cast<unsigned char>(c) >= 32) {
      line_.insert(cursor_, 1, c);
      ++cursor_;
    }
    redraw(prompt);
  }
  write("\r\n");
  return line_.empty() ? std::nullopt : std::optional<std::string>(line_);
}

}  // namespace kvslim::cli
