// A client that hangs up on a non-streamed completion cancels it: during its answer, and during
// a long prompt's prefill (which now runs block by block, so it can stop half-way). The client is
// a raw socket on 127.0.0.1 that sends the request, waits until the server is working on it, and
// closes; the server's /metrics and /slots must then show the job cancelled and the slot idle.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "server_helpers.h"

namespace kvslim {
namespace {

using nlohmann::json;
using testing::ServerProcess;

// Sends one HTTP request on a new connection and keeps the connection open until hang_up().
class RawClient {
 public:
  RawClient(int port, const std::string& path, const std::string& body) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(uint16_t(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) ADD_FAILURE() << "cannot connect";
    const std::string request = fmt::format(
        "POST {} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{}", path,
        body.size(), body);
    for (size_t sent = 0; sent < request.size();) {
      const ssize_t n = send(fd_, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) {
        ADD_FAILURE() << "cannot send the request";
        break;
      }
      sent += size_t(n);
    }
  }
  ~RawClient() { hang_up(); }
  void hang_up() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// Polls until `done` holds (bounded: 30 s); returns whether it did.
template <class F>
bool eventually(F done) {
  for (int i = 0; i < 300; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

bool slot_idle(const ServerProcess& server) {
  const auto [status, slots] = server.get("/slots");
  return status == 200 && slots.is_array() && !slots.empty() && slots[0]["is_processing"] == false;
}

TEST(ServerCancel, NonStreamedAnswerStopsWhenTheClientLeaves) {
  constexpr int kMaxTokens = 8000;
  ServerProcess server("--parallel 1 --ctx 8192 --max-tokens 8000");
  // Greedy on this prompt, the small model repeats one token and never ends on its own: only a
  // cancellation can stop it before max_tokens (the uncancelled run below checks that).
  const std::string body = json{{"prompt", "b"}, {"max_tokens", kMaxTokens}, {"temperature", 0}}.dump();
  {
    RawClient client(server.port(), "/v1/completions", body);
    // Hang up once the job runs (its one-token prompt is prefilled at once, so it is generating;
    // the token counters only move when a job ends, and no answer is sent before it is complete).
    ASSERT_TRUE(eventually([&] { return server.metric("kvslim:requests_processing") == 1; })) << server.log();
  }
  ASSERT_TRUE(eventually([&] { return server.metric("kvslim:generations_cancelled_total") >= 1; })) << server.log();
  EXPECT_EQ(server.metric("kvslim:generations_cancelled_total"), 1);
  ASSERT_TRUE(eventually([&] { return slot_idle(server); }));
  EXPECT_EQ(server.metric("kvslim:requests_processing"), 0);
  // The abandoned request is logged as 499 (client closed request).
  ASSERT_TRUE(eventually([&] {
    auto m = server.client().Get("/metrics");
    return m && m->body.find("status=\"499\"") != std::string::npos;
  }));
  const double cancelled_at = server.metric("kvslim:tokens_predicted_total");
  EXPECT_LT(cancelled_at, kMaxTokens / 2) << "the job ran on after its client left";
  std::printf("cancelled after %.0f of %d tokens\n", cancelled_at, kMaxTokens);
  // The same request with its client staying runs to max_tokens, answered as JSON: the early
  // stop above was the cancellation, not the model ending.
  auto r = server.client().Post("/v1/completions", body, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type").rfind("application/json", 0), 0u);
  const json out = json::parse(r->body);
  EXPECT_EQ(out["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(out["usage"]["completion_tokens"], kMaxTokens);
  EXPECT_EQ(server.metric("kvslim:generations_cancelled_total"), 1);
}

TEST(ServerCancel, LongPromptStopsHalfWayThroughItsPrefill) {
  // 6000 prompt tokens in blocks of 4: about 1500 scheduler steps, seconds of prefill even on an
  // idle machine, while the hang-up is noticed within a poll (0.1 s) and one block.
  ServerProcess server("--parallel 1 --ctx 8192 --batch 4");
  std::string prompt;
  for (int i = 0; i < 3000; ++i) prompt += fmt::format(" w{}", i % 10);
  const std::string body = json{{"prompt", prompt}, {"max_tokens", 8}}.dump();
  {
    RawClient client(server.port(), "/v1/completions", body);
    ASSERT_TRUE(eventually([&] { return server.metric("kvslim:requests_processing") == 1; })) << server.log();
  }
  ASSERT_TRUE(eventually([&] { return server.metric("kvslim:generations_cancelled_total") >= 1; })) << server.log();
  ASSERT_TRUE(eventually([&] { return slot_idle(server); }));
  // Stopped before the prompt was through: nothing generated, and the half-prefilled session was
  // dropped (a finished prefill would leave the prompt's tokens cached in the slot).
  EXPECT_EQ(server.metric("kvslim:tokens_predicted_total"), 0);
  const auto [status, slots] = server.get("/slots");
  ASSERT_EQ(status, 200);
  EXPECT_EQ(slots[0]["n_tokens"], 0) << slots;
  EXPECT_EQ(server.metric("kvslim:kv_bytes_in_use"), 0);
  // The slot serves the next request normally.
  auto [s, out] = server.post("/v1/completions", json{{"prompt", "hello"}, {"max_tokens", 4}}.dump());
  EXPECT_EQ(s, 200) << out;
  EXPECT_EQ(out["usage"]["completion_tokens"], 4);
}

}  // namespace
}  // namespace kvslim
