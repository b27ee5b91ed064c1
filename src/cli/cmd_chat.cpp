// kvslim chat: an interactive conversation through the model's chat template, with the
// compressed KV kept across turns (chat/conversation). Terminal I/O only: a line editor on a TTY,
// plain lines from a pipe (scriptable), streamed answers, /commands, Ctrl-C stops an answer.
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "chat/conversation.h"
#include "cli/commands.h"
#include "cli/line_editor.h"
#include "cli/shared_options.h"
#include "model/model.h"
#include "util/error.h"

namespace kvslim::cli {

namespace {

struct ChatOptions {
  std::string model, system, chat_template, load_kv, save_kv;
  std::string lookahead_adapter;  // --lookahead-adapter
  int n_predict = 256;
  SamplerParams sampling;
  CompressionOptions compression;
  EngineOptions engine;
  int threads = 0;
};

// SIGINT while an answer streams stops that answer; otherwise it ends the program as usual.
std::atomic<bool> g_answering{false};
std::atomic<bool> g_stop{false};

extern "C" void on_sigint(int) {
  if (g_answering.load()) {
    g_stop.store(true);
    return;
  }
  std::signal(SIGINT, SIG_DFL);
  std::raise(SIGINT);
}

void print_stats(const Conversation& chat) {
  const LiveSession& live = chat.session();
  const TurnStats& t = live.last_turn();
  fmt::print(
      "[turn {}: {} tokens run, {} reused, {} re-prefilled; {} generated ({}); history {} tokens; "
      "kept {:.1f} tokens per head; KV {:.2f} MiB; prefill {:.1f} tok/s, decode {:.1f} tok/s; press {}]\n",
      live.turns(), t.turn_tokens, t.reused, t.reprefilled, t.generated,
      t.stop_reason == StopReason::None ? "-" : to_string(t.stop_reason), t.history, t.kept_tokens,
      double(t.kv_bytes) / (1024.0 * 1024.0), t.prefill_tokens_per_s(), t.decode_tokens_per_s(),
      live.compression().press);
}

// Runs one /command; false on /exit.
bool run_command(Conversation& chat, const std::string& line) {
  const size_t space = line.find(' ');
  const std::string cmd = line.substr(0, space);
  std::string arg = space == std::string::npos ? "" : line.substr(space + 1);
  while (!arg.empty() && arg.back() == ' ') arg.pop_back();
  while (!arg.empty() && arg.front() == ' ') arg.erase(0, 1);
  if (cmd == "/exit" || cmd == "/quit") return false;
  if (cmd == "/stats") {
    print_stats(chat);
  } else if (cmd == "/reset") {
    chat.reset();
    fmt::print("[conversation reset]\n");
  } else if (cmd == "/save" || cmd == "/load") {
    if (arg.empty()) fail("{} needs a FILE", cmd);
    if (cmd == "/save") {
      chat.save(arg);
      fmt::print("[saved {} tokens to {}]\n", chat.session().transcript().size(), arg);
    } else {
      chat.load(arg);
      fmt::print("[loaded {}: {} tokens, {} messages, press {}]\n", arg, chat.session().transcript().size(),
                 chat.messages().size(), chat.session().compression().press);
    }
  } else if (cmd == "/help") {
    fmt::print("/stats  /save FILE  /load FILE  /reset  /exit  (Ctrl-C stops an answer)\n");
  } else {
    fail("unknown command {} (/stats, /save FILE, /load FILE, /reset, /exit)", cmd);
  }
  return true;
}

void run_chat(ChatOptions opt) {
  if (!opt.load_kv.empty()) refuse_compression_with_load_kv(opt.compression, opt.lookahead_adapter);
  opt.compression.find_default_adapter(opt.model, opt.lookahead_adapter);
  const auto model = Model::load(opt.model);
  // No template: the error names --chat-template before any work is done.
  ChatTemplate tmpl = ChatTemplate::for_model(*model, opt.chat_template);
  ThreadPool pool(opt.threads);
  Conversation chat(*model, pool, opt.engine, opt.compression, opt.sampling, tmpl, opt.system);
  if (!opt.load_kv.empty()) chat.load(opt.load_kv);

  const bool tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
  LineEditor editor(STDIN_FILENO, STDOUT_FILENO);
  std::signal(SIGINT, on_sigint);
  if (tty) fmt::print("kvslim chat: {} with {} (/help for commands)\n", opt.model, chat.session().compression().press);
  std::fflush(stdout);
  for (;;) {
    std::string line;
    if (tty) {
      const auto got = editor.read_line("> ");
      if (!got) break;
      line = *got;
      editor.add_history(line);
    } else if (!std::getline(std::cin, line)) {
      break;
    }
    if (line.empty()) continue;
    try {
      if (line[0] == '/') {
        if (!run_command(chat, line)) break;
        std::fflush(stdout);
        continue;
      }
      g_stop.store(false);
      g_answering.store(true);
      const Answer a = chat.ask(
          line, opt.n_predict,
          [](const std::string& piece) {
            std::fwrite(piece.data(), 1, piece.size(), stdout);
            std::fflush(stdout);
          },
          &g_stop);
      g_answering.store(false);
      fmt::print("{}\n", a.stop_reason == StopReason::Interrupted ? " [stopped]" : "");
    } catch (const std::exception& e) {  // one line, and the conversation goes on
      g_answering.store(false);
      std::fflush(stdout);
      fmt::print(stderr, "error: {}\n", e.what());
    }
    std::fflush(stdout);
  }
  if (!opt.save_kv.empty()) {
    chat.save(opt.save_kv);
    fmt::print(stderr, "saved the conversation's KV to {}\n", opt.save_kv);
  }
}

}  // namespace

void add_chat_command(CLI::App& app) {
  auto opt = std::make_shared<ChatOptions>();
  CLI::App* cmd =
      app.add_subcommand("chat", "interactive chat through the model's chat template, KV kept across turns");
  cmd->add_option("-m,--model", opt->model, "GGUF model")->required();
  cmd->add_option("--system", opt->system, "system message opening the conversation");
  cmd->add_option("-n,--n-predict", opt->n_predict, "most tokens per answer")->capture_default_str();
  cmd->add_option("--chat-template", opt->chat_template, "Jinja chat template file (instead of the model's)");
  cmd->add_option("--load-kv", opt->load_kv, "start from a KV file (its method, budget and messages)");
  cmd->add_option("--save-kv", opt->save_kv, "write the conversation's KV to FILE at the end");
  add_sampling_options(*cmd, opt->sampling);
  add_compression_options(*cmd, opt->compression);
  add_lookahead_adapter_option(*cmd, opt->lookahead_adapter);
  add_engine_options(*cmd, opt->engine, opt->threads);
  cmd->callback([opt] { run_chat(*opt); });
}

}  // namespace kvslim::cli
