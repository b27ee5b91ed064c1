// A `kvslim serve` child process for tests: started on 127.0.0.1 with --port 0 (the port it
// prints), waited for with a bounded loop, stopped with SIGTERM (SIGKILL if it does not stop).
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_models.h"

namespace kvslim::testing {

inline std::string default_model() { return std::string(KVSLIM_SOURCE_DIR) + "/models/kvslim-small.gguf"; }
inline std::string test_template() { return std::string(KVSLIM_SOURCE_DIR) + "/tests/data/chat-template.jinja"; }

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class ServerProcess {
 public:
  // `args` after `serve`; the model, the test template, --port 0 and --threads 2 are added.
  explicit ServerProcess(const std::string& args, bool wait_ready = true, const std::string& model = default_model()) {
    static int counter = 0;
    log_path_ = temp_path(fmt::format("serve-{}.log", ++counter));
    std::filesystem::remove(log_path_);  // the port is read from this log: never from an old one
    const std::string cmd = fmt::format("exec {} serve -m {} --chat-template {} --port 0 --threads 2 {} 2>{}",
                                        KVSLIM_BINARY, model, test_template(), args, log_path_);
    pid_ = fork();
    if (pid_ == 0) {
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    // The port appears on the first line of the log (bounded: 30 s).
    const std::regex listening(R"(listening on http://127\.0\.0\.1:(\d+))");
    for (int i = 0; i < 300 && port_ == 0; ++i) {
      std::smatch m;
      const std::string log = read_file(log_path_);
      if (std::regex_search(log, m, listening))
        port_ = std::stoi(m[1]);
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (port_ == 0) ADD_FAILURE() << "the server did not start:\n" << read_file(log_path_);
    if (wait_ready) wait_healthy();
  }
  ~ServerProcess() { stop(); }

  void wait_healthy() {
    for (int i = 0; i < 300; ++i) {
      auto r = client().Get("/health");
      if (r && r->status == 200) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "the server never became healthy:\n" << read_file(log_path_);
  }

  // Stops the server; returns its exit code (-1 when it had to be killed).
  int stop() {
    if (pid_ <= 0) return exit_code_;
    kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 100; ++i) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        return exit_code_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
    pid_ = 0;
    return exit_code_ = -1;
  }

  bool alive() const { return pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == 0; }
  int port() const { return port_; }
  std::string log() const { return read_file(log_path_); }
  std::string url() const { return fmt::format("http://127.0.0.1:{}", port_); }

  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(120);
    c.set_connection_timeout(10);
    return c;
  }

  // POSTs JSON; returns status and parsed body (null when the body is not JSON).
  std::pair<int, nlohmann::json> post(const std::string& path, const std::string& body,
                                      const httplib::Headers& headers = {}) const {
    auto r = client().Post(path, headers, body, "application/json");
    if (!r) return {0, nullptr};
    return {r->status, nlohmann::json::parse(r->body, nullptr, false)};
  }
  std::pair<int, nlohmann::json> get(const std::string& path, const httplib::Headers& headers = {}) const {
    auto r = client().Get(path, headers);
    if (!r) return {0, nullptr};
    return {r->status, nlohmann::json::parse(r->body, nullptr, false)};
  }
  // The value of one Prometheus metric (-1 when absent).
  double metric(const std::string& name) const {
    auto r = client().Get("/metrics");
    if (!r) return -1;
    std::istringstream in(r->body);
    std::string line;
    while (std::getline(in, line))
      if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
    return -1;
  }

 private:
  pid_t pid_ = 0;
  int port_ = 0;
  int exit_code_ = -1;
  std::string log_path_;
};

// The data: lines of a server-sent event stream, [DONE] included.
inline std::vector<std::string> sse_events(const std::string& body) {
  std::vector<std::string> out;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("data: ", 0) == 0) out.push_back(line.substr(6));
  return out;
}

}  // namespace kvslim::testing
