// `kvslim chat` end to end: scripted through a pipe and driven through a pseudo-terminal
// (forkpty): it answers, keeps the KV across turns (/stats shows reused tokens), obeys /stats
// /save /load /reset /exit, edits lines (Backspace, Ctrl-C drops a line), and a model without a
// chat template is refused naming --chat-template.
#include <gtest/gtest.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <thread>

#include "cli_helpers.h"
#include "gguf/gguf.h"

namespace kvslim::testing {
namespace {

std::string chat_template() {
  const std::string path = temp_path("chat-template.jinja");
  std::ofstream(path) << "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
                         "{% if add_generation_prompt %}<|assistant|>{% endif %}";
  return path;
}

std::string model() { return make_model(TinyModel{}); }

std::string attachment(const std::string& kv_file) {
  return gguf::File::open(kv_file).get_string("kvslim.kv.attachment");
}

TEST(CliChat, AModelWithoutATemplateIsRefusedNamingTheOption) {
  expect_clean_error(run("chat -m " + model() + " </dev/null"), "--chat-template");
}

TEST(CliChat, ScriptedThroughAPipe) {
  const std::string kv = temp_path("chat-pipe.kv");
  const std::string script = temp_path("chat-script.txt");
  std::ofstream(script) << "hello there\n/stats\nsecond question\n/stats\n/save " << kv << "\n/reset\n/stats\n/load "
                        << kv << "\n/stats\nthird\n/stats\n/bogus\n/load " << script << "\n/stats\n/exit\nnot read\n";
  const CommandResult r = run("chat -m " + model() + " --chat-template " + chat_template() +
                              " -n 6 --temp 0 --press snapkv --budget 16 --press-opt window=4 < " + script);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::regex turn(R"(\[turn (\d+): (\d+) tokens run, (\d+) reused, (\d+) re-prefilled)");
  std::vector<std::smatch> stats;
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), turn); it != std::sregex_iterator(); ++it)
    stats.push_back(*it);
  ASSERT_EQ(stats.size(), 6u) << r.out;
  EXPECT_EQ(stats[0][1], "1");
  EXPECT_EQ(stats[0][3], "0");  // nothing cached before the first turn
  EXPECT_EQ(stats[1][1], "2");
  EXPECT_GT(std::stoi(stats[1][3]), 10);  // the first turn's tokens are reused
  EXPECT_EQ(stats[2][1], "0");            // after /reset
  EXPECT_EQ(stats[3][1], "2");            // after /load: the saved session
  EXPECT_EQ(stats[4][1], "3");
  EXPECT_GT(std::stoi(stats[4][3]), std::stoi(stats[1][3]));
  EXPECT_EQ(stats[5].str(), stats[4].str());  // a failed /load (not a KV file) changed nothing
  EXPECT_NE(r.err.find("cannot load KV file " + script), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("[conversation reset]"), std::string::npos);
  EXPECT_NE(r.out.find("[loaded " + kv), std::string::npos);
  EXPECT_NE(r.err.find("unknown command /bogus"), std::string::npos) << r.err;
  const std::string messages = attachment(kv);
  EXPECT_NE(messages.find("hello there"), std::string::npos) << messages;
  EXPECT_NE(messages.find("second question"), std::string::npos) << messages;
}

// Reads from the pty until `needle` shows up (bounded: 60 s).
bool read_until(int fd, std::string& seen, const std::string& needle) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (seen.find(needle) == std::string::npos) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    fd_set set;
    FD_ZERO(&set);
    FD_SET(fd, &set);
    timeval tv{0, 200000};
    if (select(fd + 1, &set, nullptr, nullptr, &tv) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) return false;
    seen.append(buf, size_t(n));
  }
  return true;
}

TEST(CliChat, DrivenThroughAPseudoTerminal) {
  const std::string kv = temp_path("chat-pty.kv");
  const std::string binary = KVSLIM_BINARY, m = model(), t = chat_template();
  int fd = -1;
  const pid_t pid = forkpty(&fd, nullptr, nullptr, nullptr);
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl(binary.c_str(), binary.c_str(), "chat", "-m", m.c_str(), "--chat-template", t.c_str(), "-n", "5", "--temp",
          "0", nullptr);
    _exit(127);
  }
  std::string seen;
  auto send = [&](const std::string& keys) { ASSERT_EQ(write(fd, keys.data(), keys.size()), ssize_t(keys.size())); };
  ASSERT_TRUE(read_until(fd, seen, "> ")) << seen;
  // Typed with a mistake, fixed with Backspace; a line dropped with Ctrl-C is never sent.
  send("dropped line\x03");
  ASSERT_TRUE(read_until(fd, seen, "^C")) << seen;
  seen.clear();
  send("helx\x7flo\r");
  ASSERT_TRUE(read_until(fd, seen, "\n\r> ")) << seen;
  send("/stats\r");
  ASSERT_TRUE(read_until(fd, seen, "[turn 1:")) << seen;
  send("again\r");
  seen.clear();
  ASSERT_TRUE(read_until(fd, seen, "\n\r> ")) << seen;
  send("/stats\r");
  ASSERT_TRUE(read_until(fd, seen, "[turn 2:")) << seen;
  send("/save " + kv + "\r");
  ASSERT_TRUE(read_until(fd, seen, "[saved")) << seen;
  send("/exit\r");
  int status = 0;
  for (int i = 0; i < 600 && waitpid(pid, &status, WNOHANG) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  close(fd);
  ASSERT_TRUE(WIFEXITED(status)) << seen;
  EXPECT_EQ(WEXITSTATUS(status), 0) << seen;
  const std::string messages = attachment(kv);
  EXPECT_NE(messages.find("\"hello\""), std::string::npos) << messages;
  EXPECT_NE(messages.find("\"again\""), std::string::npos) << messages;
  EXPECT_EQ(messages.find("dropped"), std::string::npos) << messages;
}

// Ctrl-C while an answer streams stops that answer, not the program. A random model answers
// greedily with a long loop of tokens (no end-of-generation in sight), so the answer is still
// streaming when the key arrives; the partial answer stays in the conversation.
TEST(CliChat, CtrlCStopsTheAnswerNotTheProgram) {
  TinyModel big;
  big.dim = 256;
  big.ffn = 768;
  big.seed = 3;
  const std::string binary = KVSLIM_BINARY, m = make_model(big), t = chat_template();
  int fd = -1;
  const pid_t pid = forkpty(&fd, nullptr, nullptr, nullptr);
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl(binary.c_str(), binary.c_str(), "chat", "-m", m.c_str(), "--chat-template", t.c_str(), "-n", "1000000",
          "--temp", "0", "--ctx", "200000", "--threads", "1", nullptr);
    _exit(127);
  }
  std::string seen;
  auto send = [&](const std::string& keys) { ASSERT_EQ(write(fd, keys.data(), keys.size()), ssize_t(keys.size())); };
  ASSERT_TRUE(read_until(fd, seen, "> ")) << seen;
  send("go on\r");
  seen.clear();
  // Wait for some streamed output, then interrupt.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (seen.size() < 300 && std::chrono::steady_clock::now() < deadline) {
    fd_set set;
    FD_ZERO(&set);
    FD_SET(fd, &set);
    timeval tv{0, 100000};
    if (select(fd + 1, &set, nullptr, nullptr, &tv) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    seen.append(buf, size_t(n));
  }
  send("\x03");
  ASSERT_TRUE(read_until(fd, seen, "[stopped]")) << seen.substr(seen.size() > 400 ? seen.size() - 400 : 0);
  send("/stats\r");
  ASSERT_TRUE(read_until(fd, seen, "(interrupted)")) << seen.substr(seen.size() > 400 ? seen.size() - 400 : 0);
  send("/exit\r");
  int status = 0;
  for (int i = 0; i < 600 && waitpid(pid, &status, WNOHANG) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  close(fd);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace kvslim::testing
