// kvslim serve over HTTP on 127.0.0.1: every endpoint, streaming and not, equality with the CLI,
// per-request compression, slots, security limits, and a mixed load with hostile requests.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <random>
#include <thread>

#include "cli_helpers.h"
#include "prerequisites.h"
#include "server_helpers.h"

namespace kvslim {
namespace {

using nlohmann::json;
using testing::ServerProcess;

// One server for the read-only tests (starting one costs about a second).
ServerProcess& shared_server() {
  static ServerProcess server("--parallel 2 --ctx 2048");
  return server;
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

const std::string kPrompt = "The grass is green. The sky is blue. The sun is yellow. Here we go.";

json cli_generate(const std::string& prompt, const std::string& extra) {
  const auto r = testing::run("generate -m " + testing::default_model() + " -p " + quoted(prompt) +
                              " --json --threads 2 " + extra);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out);
}

// A long prompt from numbered sentences, so that eviction has something to choose from.
std::string long_prompt(int sentences) {
  std::string s;
  for (int i = 0; i < sentences; ++i) s += fmt::format("Line {} says the key is {}. ", i, (i * 7919) % 1000);
  return s;
}

TEST(Server, HealthModelsPropsMetricsAndPage) {
  ServerProcess& server = shared_server();
  auto [hs, health] = server.get("/health");
  EXPECT_EQ(hs, 200);
  EXPECT_EQ(health["status"], "ok");
  auto [ms, models] = server.get("/v1/models");
  ASSERT_EQ(ms, 200);
  EXPECT_EQ(models["object"], "list");
  EXPECT_EQ(models["data"][0]["id"], "kvslim-small.gguf");
  EXPECT_EQ(models["data"][0]["meta"]["n_layers"], 4);
  auto [ps, props] = server.get("/props");
  ASSERT_EQ(ps, 200);
  EXPECT_EQ(props["total_slots"], 2);
  EXPECT_EQ(props["default_generation_settings"]["n_ctx"], 2048);
  bool has_snapkv = false;
  for (const auto& p : props["presses"]) has_snapkv |= p["name"] == "snapkv";
  EXPECT_TRUE(has_snapkv);
  auto metrics = server.client().Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  for (const char* name : {"kvslim:kv_bytes_in_use", "kvslim:kv_bytes_peak", "kvslim:kv_kept_ratio",
                           "kvslim:kv_evicted_tokens_total", "kvslim:score_seconds_total", "kvslim:prompt_tokens_total",
                           "kvslim:tokens_predicted_total", "kvslim:predicted_tokens_seconds"})
    EXPECT_NE(metrics->body.find(std::string("# TYPE ") + name), std::string::npos) << name;
  auto page = server.client().Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("kv-picture"), std::string::npos);
  EXPECT_EQ(page->body.find("http://"), page->body.find("http://www.w3.org/2000/svg"));  // no external resource
  auto [ns, missing] = server.get("/no/such/endpoint");
  EXPECT_EQ(ns, 404);
  EXPECT_EQ(missing["error"]["code"], 404);
}

TEST(Server, TokenizeDetokenizeAndApplyTemplate) {
  ServerProcess& server = shared_server();
  auto [ts, tok] = server.post("/tokenize", json{{"content", "hello world"}}.dump());
  ASSERT_EQ(ts, 200) << tok;
  const auto cli = testing::run("tokenize -m " + testing::default_model() + " -p 'hello world'");
  std::vector<int> ids = tok["tokens"].get<std::vector<int>>();
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(cli.out.find(std::to_string(ids[0])), 0u) << cli.out;
  auto [ds, detok] = server.post("/detokenize", json{{"tokens", ids}}.dump());
  ASSERT_EQ(ds, 200);
  EXPECT_EQ(detok["content"], "hello world");
  auto [bs, bad] = server.post("/detokenize", json{{"tokens", {1, 99999999}}}.dump());
  EXPECT_EQ(bs, 400);
  EXPECT_EQ(bad["error"]["param"], "tokens");
  json messages = json::array({{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}});
  auto [as, applied] = server.post("/apply-template", json{{"messages", messages}}.dump());
  ASSERT_EQ(as, 200) << applied;
  EXPECT_EQ(applied["prompt"], "<|system|>Be brief.\n<|user|>Hi\n<|assistant|>");
}

TEST(Server, CompletionEqualsTheCliForTheSameSeed) {
  ServerProcess& server = shared_server();
  const json cli = cli_generate(kPrompt, "-n 12 --seed 5 --temp 0.9");
  auto [status, out] = server.post(
      "/v1/completions", json{{"prompt", kPrompt}, {"max_tokens", 12}, {"seed", 5}, {"temperature", 0.9}}.dump());
  ASSERT_EQ(status, 200) << out;
  EXPECT_EQ(out["object"], "text_completion");
  EXPECT_EQ(out["choices"][0]["text"], cli["text"]);
  EXPECT_EQ(out["usage"]["prompt_tokens"], cli["n_prompt"]);
  EXPECT_EQ(out["usage"]["completion_tokens"], cli["n_generated"]);
  EXPECT_EQ(out["usage"]["total_tokens"], cli["n_prompt"].get<int>() + cli["n_generated"].get<int>());
  EXPECT_EQ(out["kv"]["press"], "full");
  EXPECT_EQ(out["kv"]["kept_tokens"], cli["n_prompt"]);
  EXPECT_GT(out["kv"]["bytes_peak"].get<uint64_t>(), 0u);
  EXPECT_GE(out["timings"]["prompt_ms"].get<double>(), 0);
  EXPECT_EQ(out["timings"]["predicted_n"], cli["n_generated"]);
}

TEST(Server, StreamingSendsTheSameTextAsEventsEndingInDone) {
  ServerProcess& server = shared_server();
  const json request = {{"prompt", kPrompt}, {"max_tokens", 10}, {"seed", 11}};
  auto [status, whole] = server.post("/v1/completions", request.dump());
  ASSERT_EQ(status, 200);
  json streamed = request;
  streamed["stream"] = true;
  auto r = server.client().Post("/v1/completions", streamed.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  const auto events = testing::sse_events(r->body);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i)
    text += json::parse(events[i])["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, whole["choices"][0]["text"]);
  const json last = json::parse(events[events.size() - 2]);
  EXPECT_EQ(last["choices"][0]["finish_reason"], whole["choices"][0]["finish_reason"]);
  // The streamed request may find the first one's tokens in its slot (cached_tokens differs).
  EXPECT_EQ(last["usage"]["prompt_tokens"], whole["usage"]["prompt_tokens"]);
  EXPECT_EQ(last["usage"]["completion_tokens"], whole["usage"]["completion_tokens"]);
  EXPECT_EQ(last["kv"]["kept_tokens"], whole["kv"]["kept_tokens"]);
}

TEST(Server, ChatCompletionStreamingAndNotEqualTheCliOnTheRenderedPrompt) {
  ServerProcess& server = shared_server();
  json messages = json::array({{{"role", "user"}, {"content", "The grass is green. What colour is the grass?"}}});
  auto [as, applied] = server.post("/apply-template", json{{"messages", messages}}.dump());
  ASSERT_EQ(as, 200);
  const json cli = cli_generate(applied["prompt"], "-n 10 --seed 3");
  const json request = {{"messages", messages}, {"max_tokens", 10}, {"seed", 3}};
  auto [status, out] = server.post("/v1/chat/completions", request.dump());
  ASSERT_EQ(status, 200) << out;
  EXPECT_EQ(out["object"], "chat.completion");
  EXPECT_EQ(out["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(out["choices"][0]["message"]["content"], cli["text"]);
  json streamed = request;
  streamed["stream"] = true;
  streamed["stream_options"] = {{"include_usage", true}};
  auto r = server.client().Post("/v1/chat/completions", streamed.dump(), "application/json");
  ASSERT_TRUE(r);
  const auto events = testing::sse_events(r->body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(json::parse(events[0])["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const json e = json::parse(events[i]);
    EXPECT_EQ(e["object"], "chat.completion.chunk");
    if (!e["choices"].empty() && e["choices"][0]["delta"].contains("content"))
      text += e["choices"][0]["delta"]["content"].get<std::string>();
  }
  EXPECT_EQ(text, cli["text"]);
  const json usage_chunk = json::parse(events[events.size() - 2]);
  EXPECT_TRUE(usage_chunk["choices"].empty());
  EXPECT_EQ(usage_chunk["usage"]["completion_tokens"], cli["n_generated"]);
}

TEST(Server, PerRequestCompressionReachesTheEngine) {
  ServerProcess& server = shared_server();
  const std::string prompt = long_prompt(30);
  const json cli = cli_generate(prompt, "-n 4 --seed 1 --press snapkv --budget 48");
  auto ask = [&](const json& extra) {
    json request = {{"prompt", prompt}, {"max_tokens", 4}, {"seed", 1}};
    if (extra.is_object()) request.update(extra);
    auto [status, out] = server.post("/v1/completions", request.dump());
    EXPECT_EQ(status, 200) << out;
    return out;
  };
  const json full = ask({});
  const json snap = ask({{"press", "snapkv"}, {"budget", 48}});
  const json ratio = ask({{"press", "knorm"}, {"ratio", 0.5}});
  const int n_prompt = full["usage"]["prompt_tokens"];
  ASSERT_GT(n_prompt, 200);
  EXPECT_EQ(full["kv"]["kept_tokens"], n_prompt);
  EXPECT_EQ(snap["kv"]["press"], "snapkv");
  EXPECT_EQ(snap["kv"]["budget"], 48);
  EXPECT_EQ(snap["kv"]["kept_tokens"], cli["kept_tokens"]);
  EXPECT_LE(snap["kv"]["kept_tokens"].get<double>(), 48);
  EXPECT_EQ(snap["choices"][0]["text"], cli["text"]);
  EXPECT_LT(snap["kv"]["bytes_final"].get<uint64_t>(), full["kv"]["bytes_final"].get<uint64_t>());
  EXPECT_EQ(ratio["kv"]["budget"], n_prompt / 2);
  EXPECT_GT(snap["kv"]["score_ms"].get<double>(), 0);
  // Method options arrive too: a StreamingLLM sink size shows in which positions survive.
  const json streaming =
      ask({{"press", "streaming_llm"}, {"budget", 40}, {"press_options", {{"sinks", 8}}}, {"kv_map", true}});
  ASSERT_EQ(streaming["kv"]["press"], "streaming_llm") << streaming;
  const json runs = streaming["kv"]["map"]["layers"][0][0];
  ASSERT_EQ(runs.size(), 2u) << runs;
  EXPECT_EQ(runs[0], json::array({0, 8}));
  EXPECT_EQ(runs[1][1], n_prompt);
}

TEST(Server, BadCompressionIsRefusedNamingTheFieldAndTheValidValues) {
  ServerProcess& server = shared_server();
  auto refused = [&](const json& extra, const std::string& param, const std::string& needle) {
    json request = {{"prompt", "hi"}, {"max_tokens", 1}};
    request.update(extra);
    auto [status, out] = server.post("/v1/completions", request.dump());
    EXPECT_EQ(status, 400) << extra;
    EXPECT_EQ(out["error"]["param"], param) << out;
    EXPECT_EQ(out["error"]["type"], "invalid_request_error");
    EXPECT_NE(out["error"]["message"].get<std::string>().find(needle), std::string::npos) << out;
  };
  refused({{"press", "nosuch"}}, "press", "valid: full, random");
  refused({{"budget", 0}}, "budget", "budget must be > 0");
  refused({{"ratio", 1.5}}, "ratio", "ratio must be in [0, 1)");
  refused({{"budget", 4}, {"ratio", 0.5}}, "budget", "not both");
  refused({{"press", "snapkv"}, {"press_options", {{"nosuch", 1}}}}, "press_options",
          "unknown option 'nosuch' (valid:");
  refused({{"press", "snapkv"}, {"press_options", {{"window", "x"}}}}, "press_options", "window");
  refused({{"press", "lookaheadkv"}, {"press_options", {{"adapter", "/etc/passwd"}}}}, "press_options",
          "cannot name files");
  refused({{"press_options", "window=4"}}, "press_options", "must be an object");
}

TEST(Server, MalformedAndHostileRequestsAre400sNotCrashes) {
  ServerProcess& server = shared_server();
  const std::vector<std::string> bodies = {"",
                                           "{",
                                           "[1, 2]",
                                           "null",
                                           "\"text\"",
                                           "{\"prompt\": 5}",
                                           "{\"prompt\": \"x\", \"max_tokens\": \"5\"}",
                                           "{\"prompt\": \"x\", \"max_tokens\": 1e30}",
                                           "{\"prompt\": \"x\", \"max_tokens\": 99999999999999999999999}",
                                           "{\"prompt\": \"x\", \"max_tokens\": -1}",
                                           "{\"prompt\": \"x\", \"temperature\": -1}",
                                           "{\"prompt\": \"x\", \"top_p\": 2}",
                                           "{\"prompt\": \"x\", \"seed\": 1.5}",
                                           "{\"prompt\": \"x\", \"stop\": [1]}",
                                           "{\"prompt\": \"x\", \"budget\": 1e400}",
                                           "{\"prompt\": \"x\", \"n\": 3}",
                                           "{\"prompt\": [\"a\", \"b\"]}",
                                           "{\"prompt\": [1, -5]}",
                                           "{\"prompt\": [1, 999999]}",
                                           "{\"prompt\": []}",
                                           "{\"prompt\": \"\xff\xfe\"}",
                                           "{\"prompt\": \"x\", \"logprobs\": 1000}",
                                           std::string("{\"prompt\": \"a\0b\"}", 17),
                                           std::string(100000, '[') + std::string(100000, ']')};
  for (const std::string& body : bodies) {
    auto [status, out] = server.post("/v1/completions", body);
    EXPECT_EQ(status, 400) << body.substr(0, 80);
    EXPECT_TRUE(out.is_object() && out.contains("error")) << body.substr(0, 80);
  }
  for (const std::string body : {"{}", "{\"messages\": []}", "{\"messages\": [{\"content\": \"x\"}]}",
                                 "{\"messages\": [{\"role\": \"user\", \"content\": 7}]}", "{\"messages\": \"hi\"}"}) {
    auto [status, out] = server.post("/v1/chat/completions", body);
    EXPECT_EQ(status, 400) << body;
    EXPECT_EQ(out["error"]["param"].get<std::string>().substr(0, 8), "messages") << out;
  }
  auto [status, out] = server.post("/v1/completions", "{\"prompt\": \"x\", \"max_tokens\": 100000}");
  EXPECT_EQ(status, 400);
  EXPECT_EQ(out["error"]["param"], "max_tokens");
  EXPECT_EQ(server.get("/health").first, 200);
}

TEST(Server, ApiKeyGuardsEveryEndpointButHealth) {
  ServerProcess server("--api-key s3cret");
  EXPECT_EQ(server.get("/health").first, 200);
  const httplib::Headers good = {{"Authorization", "Bearer s3cret"}};
  const httplib::Headers bad = {{"Authorization", "Bearer s3cres"}};
  for (const char* path : {"/v1/models", "/props", "/metrics", "/slots"}) {
    EXPECT_EQ(server.get(path).first, 401) << path;
    EXPECT_EQ(server.get(path, bad).first, 401) << path;
    EXPECT_EQ(server.get(path, good).first, 200) << path;
  }
  const std::string body = json{{"prompt", "hi"}, {"max_tokens", 1}}.dump();
  auto [status, out] = server.post("/v1/completions", body);
  EXPECT_EQ(status, 401);
  EXPECT_EQ(out["error"]["type"], "authentication_error");
  EXPECT_EQ(server.post("/v1/completions", body, good).first, 200);
  EXPECT_EQ(server.post("/tokenize", json{{"content", "x"}}.dump()).first, 401);
}

TEST(Server, BodySizeAndKvMemoryAreCapped) {
  ServerProcess server("--max-body 4096 --kv-mem 2 --ctx 2048");
  auto [big, out] = server.post("/v1/completions", json{{"prompt", std::string(8000, 'a')}}.dump());
  EXPECT_EQ(big, 413);
  EXPECT_EQ(out["error"]["code"], 413);
  // A 256-token page of one head holds 32-dim K and V in f32 plus positions (66 KiB); the 8 heads
  // of the default model need 528 KiB per 256 tokens (+ one page each for decode), so 2 MiB
  // fits a short request but not 665 prompt tokens + 1500 more, refused before any work.
  auto [refused, why] = server.post("/v1/completions", json{{"prompt", long_prompt(40)}, {"max_tokens", 1500}}.dump());
  EXPECT_EQ(refused, 400);
  EXPECT_NE(why["error"]["message"].get<std::string>().find("--kv-mem"), std::string::npos) << why;
  EXPECT_EQ(server.post("/v1/completions", json{{"prompt", "hi"}, {"max_tokens", 2}}.dump()).first, 200);
  EXPECT_GT(server.metric("kvslim:kv_bytes_peak"), 0);
  EXPECT_LE(server.metric("kvslim:kv_bytes_peak"), 2 << 20);
}

TEST(Server, ASecondRequestExtendingASlotPrefillsOnlyItsNewTokens) {
  ServerProcess server("--parallel 2");
  const std::string text = long_prompt(10);
  auto [s1, first] = server.post(
      "/v1/completions", json{{"prompt", text}, {"max_tokens", 6}, {"seed", 2}, {"return_tokens", true}}.dump());
  ASSERT_EQ(s1, 200) << first;
  auto [ts, tok] = server.post("/tokenize", json{{"content", text}, {"add_special", true}}.dump());
  std::vector<int> ids = tok["tokens"].get<std::vector<int>>();
  ASSERT_EQ(int(ids.size()), first["usage"]["prompt_tokens"].get<int>());
  // Turn two: the first prompt, the answer's tokens, then new text.
  const std::vector<int> answer = first["tokens"].get<std::vector<int>>();
  ASSERT_EQ(int(answer.size()), first["usage"]["completion_tokens"].get<int>());
  auto [ns, more] = server.post("/tokenize", json{{"content", " Now what is the key of line 3?"}}.dump());
  std::vector<int> second = ids;
  second.insert(second.end(), answer.begin(), answer.end());
  for (int id : more["tokens"]) second.push_back(id);
  auto [s2, out] = server.post("/v1/completions", json{{"prompt", second}, {"max_tokens", 4}}.dump());
  ASSERT_EQ(s2, 200) << out;
  // The slot holds the prompt and every generated token but the last one when max_tokens ended
  // the answer (that one was never fed back).
  const int held = int(ids.size() + answer.size()) - (first["choices"][0]["finish_reason"] == "length" ? 1 : 0);
  const int n_second = int(second.size());
  EXPECT_EQ(out["usage"]["prompt_tokens"], n_second);
  EXPECT_EQ(out["timings"]["cache_n"], held);
  EXPECT_EQ(out["timings"]["prompt_n"], n_second - held);
  EXPECT_EQ(out["usage"]["prompt_tokens_details"]["cached_tokens"], held);
  EXPECT_EQ(server.metric("kvslim:prompt_tokens_reused_total"), held);
  // A prompt that does not extend the slot is prefilled whole.
  auto [s3, other] =
      server.post("/v1/completions", json{{"prompt", "Something else entirely."}, {"max_tokens", 2}}.dump());
  EXPECT_EQ(other["timings"]["cache_n"], 0);
}

TEST(Server, ChatTurnsReuseTheSlotAndPrefillOnlyTheNewMessages) {
  ServerProcess server("--parallel 2");
  for (const json& press : {json{{"press", "full"}}, json{{"press", "snapkv"}, {"budget", 40}},
                            json{{"press", "rocketkv"}, {"budget", 64}, {"press_options", {{"mt", true}}}}}) {
    json messages = json::array({{{"role", "user"}, {"content", long_prompt(12)}}});
    json request = {{"messages", messages}, {"max_tokens", 5}, {"seed", 4}};
    request.update(press);
    auto [s1, first] = server.post("/v1/chat/completions", request.dump());
    ASSERT_EQ(s1, 200) << first;
    EXPECT_EQ(first["timings"]["cache_n"], 0) << press;
    messages.push_back({{"role", "assistant"}, {"content", first["choices"][0]["message"]["content"]}});
    messages.push_back({{"role", "user"}, {"content", "And line 4?"}});
    request["messages"] = messages;
    auto [s2, second] = server.post("/v1/chat/completions", request.dump());
    ASSERT_EQ(s2, 200) << second;
    const int n_first = first["usage"]["prompt_tokens"];
    const int n_second = second["usage"]["prompt_tokens"];
    const int cached = second["timings"]["cache_n"];
    // At least the whole first prompt is reused; only the rest runs again.
    EXPECT_GE(cached, n_first) << press;
    EXPECT_EQ(second["timings"]["prompt_n"], n_second - cached) << press;
    EXPECT_LT(second["timings"]["prompt_n"].get<int>(), n_second - n_first + 10) << press;
    EXPECT_EQ(second["kv"]["press"], press["press"]);
    if (press.contains("budget") && press["press"] == "snapkv") {
      EXPECT_LE(second["kv"]["kept_tokens"].get<double>(), 40 + 10);
    }
  }
}

TEST(Server, SlotsListEraseAndFileNamesStayInsideTheSaveFolder) {
  const std::string dir = testing::temp_path("slots");
  std::filesystem::create_directories(dir);
  ServerProcess server("--parallel 2 --slot-save-path " + dir);
  ASSERT_EQ(server.post("/v1/completions", json{{"prompt", "hello there"}, {"max_tokens", 3}}.dump()).first, 200);
  auto [ls, slots] = server.get("/slots");
  ASSERT_EQ(ls, 200);
  ASSERT_EQ(slots.size(), 2u);
  int used = -1;
  for (const auto& s : slots)
    if (s["n_tokens"].get<int>() > 0) used = s["id"];
  ASSERT_GE(used, 0) << slots;
  EXPECT_GT(server.metric("kvslim:kv_bytes_in_use"), 0);
  auto [es, erased] = server.post(fmt::format("/slots/{}?action=erase", used), "{}");
  EXPECT_EQ(es, 200) << erased;
  EXPECT_EQ(server.metric("kvslim:kv_bytes_in_use") >= 0, true);
  EXPECT_EQ(server.get("/slots").second[used]["n_tokens"], 0);
  EXPECT_EQ(server.post("/slots/7?action=erase", "{}").first, 404);
  EXPECT_EQ(server.post("/slots/0?action=explode", "{}").first, 400);
  for (const char* name : {"../escape", "/etc/passwd", ".hidden", "a/b", "", "x\\y"}) {
    auto [status, out] = server.post("/slots/0?action=save", json{{"filename", name}}.dump());
    EXPECT_EQ(status, 400) << name;
    EXPECT_EQ(out["error"]["param"], "filename") << name;
  }
  EXPECT_FALSE(std::filesystem::exists(testing::temp_path("escape")));

  // Save, erase, restore: the restored slot continues the conversation without prefilling it again.
  const std::string prompt = long_prompt(8);
  auto [fs, first] = server.post("/v1/completions", json{{"prompt", prompt}, {"max_tokens", 3}}.dump());
  const int slot = first["kv"]["slot"];
  auto [ss, saved] = server.post(fmt::format("/slots/{}?action=save", slot), json{{"filename", "conv.kv"}}.dump());
  ASSERT_EQ(ss, 200) << saved;
  EXPECT_TRUE(std::filesystem::exists(dir + "/conv.kv"));
  const int n_saved = saved["n_saved"];
  EXPECT_GT(n_saved, first["usage"]["prompt_tokens"].get<int>() - 1);
  ASSERT_EQ(server.post(fmt::format("/slots/{}?action=erase", slot), "{}").first, 200);
  auto [rs, restored] =
      server.post(fmt::format("/slots/{}?action=restore", slot), json{{"filename", "conv.kv"}}.dump());
  ASSERT_EQ(rs, 200) << restored;
  EXPECT_EQ(restored["n_restored"], n_saved);
  EXPECT_EQ(server.get("/slots").second[slot]["n_tokens"], n_saved);
  auto [cs, more] =
      server.post("/v1/completions", json{{"prompt", prompt + " More text here."}, {"max_tokens", 2}}.dump());
  ASSERT_EQ(cs, 200);
  EXPECT_GE(more["timings"]["cache_n"].get<int>(), first["usage"]["prompt_tokens"].get<int>() - 1);
  // Missing and corrupt files are refused and leave the slot as it was.
  EXPECT_EQ(server.post("/slots/0?action=restore", json{{"filename", "none.kv"}}.dump()).first, 404);
  { std::ofstream(dir + "/bad.kv") << "not a kv file"; }
  const int before = server.get("/slots").second[slot]["n_tokens"];
  auto [bs, bad] = server.post(fmt::format("/slots/{}?action=restore", slot), json{{"filename", "bad.kv"}}.dump());
  EXPECT_EQ(bs, 400) << bad;
  EXPECT_EQ(server.get("/slots").second[slot]["n_tokens"], before);
  ServerProcess no_dir("");
  EXPECT_EQ(no_dir.post("/slots/0?action=save", json{{"filename", "a.kv"}}.dump()).first, 501);
}

TEST(Server, BusyServerAnswers503AndClientsThatLeaveAreCancelled) {
  ServerProcess server("--parallel 1 --queue 1 --ctx 8192 --max-tokens 8000");
  // A streamed request the client abandons after its first events; its answer would be 8000
  // tokens of SSE (megabytes), far more than the socket buffers hold, so the server must notice.
  {
    httplib::Client c("127.0.0.1", server.port());
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.set_header("Content-Type", "application/json");
    req.body = json{{"prompt", "b"}, {"max_tokens", 8000}, {"stream", true}}.dump();
    int chunks = 0;
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 3; };
    auto r = c.send(req);
    EXPECT_FALSE(r);  // we hung up
  }
  // The abandoned request stopped long before its 8000 tokens.
  for (int i = 0; i < 100 && server.metric("kvslim:generations_cancelled_total") < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(server.metric("kvslim:generations_cancelled_total"), 1);
  EXPECT_LT(server.metric("kvslim:tokens_predicted_total"), 8000);
  EXPECT_EQ(server.metric("kvslim:requests_processing"), 0);
  // Six long requests at once: one runs, one waits, the others find the queue full.
  std::atomic<int> ok{0}, busy{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 6; ++i)
    clients.emplace_back([&] {
      auto [status, out] = server.post("/v1/completions", json{{"prompt", "b"}, {"max_tokens", 4000}}.dump());
      if (status == 200) ++ok;
      if (status == 503) {
        ++busy;
        EXPECT_EQ(out["error"]["type"], "unavailable_error");
      }
    });
  for (auto& t : clients) t.join();
  EXPECT_GE(busy.load(), 1);
  EXPECT_GE(ok.load(), 1);
  EXPECT_EQ(ok.load() + busy.load(), 6);
  EXPECT_EQ(server.metric("kvslim:requests_deferred"), 0);
}

// >= 200 requests from 4 concurrent clients, 10% malformed or hostile: every good request is
// answered, nothing crashes, and the KV memory falls back to what the idle slots hold.
TEST(Server, LoadWithHostileRequestsLeavesNothingBehind) {
  ServerProcess server("--parallel 2 --queue 64");
  const double idle_bytes = server.metric("kvslim:kv_bytes_in_use");
  EXPECT_EQ(idle_bytes, 0);
  std::atomic<int> good_ok{0}, good_failed{0}, bad_refused{0}, bad_accepted{0};
  const std::vector<std::string> hostile = {"{\"prompt\": ",
                                            "{\"prompt\": \"x\", \"max_tokens\": 1e99}",
                                            "{\"messages\": [{\"role\": 1}]}",
                                            "{\"prompt\": \"x\", \"press\": \"../../etc\"}",
                                            "{\"prompt\": \"\xc3\x28\"}",
                                            "{\"prompt\": \"x\", \"budget\": -7}",
                                            "{\"prompt\": \"x\", \"stop\": \"\"}"};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c)
    clients.emplace_back([&, c] {
      std::mt19937 rng(c);
      for (int i = 0; i < 50; ++i) {
        const int n = c * 50 + i;
        if (n % 10 == 3) {
          auto [status, out] = server.post(n % 20 == 3 ? "/v1/completions" : "/v1/chat/completions",
                                           hostile[size_t(n / 10) % hostile.size()]);
          (status == 400 ? bad_refused : bad_accepted)++;
          continue;
        }
        json request = {{"max_tokens", 2 + int(rng() % 6)}, {"seed", n}};
        if (n % 3 == 0) request["press"] = "knorm", request["budget"] = 16;
        if (n % 4 == 0) request["stream"] = true;
        std::string path = "/v1/completions";
        if (n % 2 == 0) {
          path = "/v1/chat/completions";
          request["messages"] = json::array({{{"role", "user"}, {"content", long_prompt(1 + n % 5)}}});
        } else {
          request["prompt"] = long_prompt(1 + n % 7);
        }
        auto r = server.client().Post(path, request.dump(), "application/json");
        const bool ok = r && r->status == 200 &&
                        (request.contains("stream") ? r->body.find("data: [DONE]") != std::string::npos
                                                    : json::parse(r->body).contains("choices"));
        (ok ? good_ok : good_failed)++;
      }
    });
  for (auto& t : clients) t.join();
  EXPECT_EQ(good_ok.load(), 180);
  EXPECT_EQ(good_failed.load(), 0);
  EXPECT_EQ(bad_refused.load(), 20);
  EXPECT_EQ(bad_accepted.load(), 0);
  EXPECT_TRUE(server.alive());
  EXPECT_EQ(server.metric("kvslim:requests_processing"), 0);
  // What remains is exactly the idle slots' caches; erasing them returns to the idle level.
  double held = 0;
  for (const auto& s : server.get("/slots").second) held += s["kv_bytes"].get<double>();
  EXPECT_EQ(server.metric("kvslim:kv_bytes_in_use"), held);
  for (int id = 0; id < 2; ++id) EXPECT_EQ(server.post(fmt::format("/slots/{}?action=erase", id), "{}").first, 200);
  EXPECT_EQ(server.metric("kvslim:kv_bytes_in_use"), idle_bytes);
  EXPECT_EQ(server.stop(), 0);
}

TEST(Server, WebPageShowsTheKeptPositionsInHeadlessChromium) {
  KVSLIM_REQUIRE(testing::program_found("chromium"), "chromium is not installed (scripts/install-deps.sh installs it)");
  ServerProcess server("");
  const std::string profile = testing::temp_path("chromium-profile");
  const std::string dom = testing::temp_path("page.html");
  const std::string url = server.url() + "/?prompt=" + "The%20key%20is%2042.%20Remember%20the%20key." +
                          "&press=knorm&budget=8&max_tokens=4&send=1";
  const std::string cmd = fmt::format(
      "timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-background-networking --no-first-run "
      "--user-data-dir={} --virtual-time-budget=20000 --dump-dom '{}' >{} 2>/dev/null",
      profile, url, dom);
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const std::string html = testing::read_file(dom);
  EXPECT_NE(html.find("id=\"kv-map\""), std::string::npos) << html.substr(0, 2000);
  EXPECT_NE(html.find("class=\"kept\""), std::string::npos);
  EXPECT_NE(html.find("method knorm, budget 8"), std::string::npos);
  // 4 layers x 2 KV heads = 8 strips, each labelled.
  EXPECT_NE(html.find(">L3 H1<"), std::string::npos);
  EXPECT_NE(html.find("% saved"), std::string::npos);
}

}  // namespace
}  // namespace kvslim
