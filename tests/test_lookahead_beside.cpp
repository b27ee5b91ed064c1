// Every seed method where users are: `--press lookaheadkv` (CLI) and `"press": "lookaheadkv"` (a
// server request, which may not name files) run with the adapter beside the model
// (MODEL.lookahead.gguf) or the one given by --lookahead-adapter, and give exactly what naming
// that adapter explicitly gives; without one, each refuses naming the file it looked for.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli_helpers.h"
#include "server_helpers.h"
#include "test_lookahead_adapter.h"

namespace kvslim::testing {
namespace {

using nlohmann::json;

const std::string kPrompt = "the cat sat on the mat and the dog sat on the log while the cat ate the hat";

// A copy of the tiny model in its own folder, with (or without) its adapter beside it.
struct ModelFolder {
  std::string model, adapter;
};

ModelFolder model_folder(const std::string& name, bool with_adapter) {
  const std::filesystem::path dir = temp_path(name);
  std::filesystem::create_directories(dir);
  ModelFolder f{(dir / "m.gguf").string(), (dir / "m.lookahead.gguf").string()};
  std::filesystem::copy_file(make_model(TinyModel{}), f.model, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::remove(f.adapter);
  if (with_adapter) random_adapter(loaded_tiny_model(), {.n_lookahead = 8, .rank = 4, .alpha = 8}).save(f.adapter);
  return f;
}

json generate(const std::string& model, const std::string& extra) {
  const CommandResult r = run("generate -m " + model + " -p '" + kPrompt + "' -n 3 --temp 0 --json --threads 2 " +
                              "--press lookaheadkv --budget 8 " + extra);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out, nullptr, false);
}

TEST(LookaheadBeside, GenerateFindsTheAdapterBesideTheModel) {
  const ModelFolder f = model_folder("beside-generate", true);
  const json found = generate(f.model, "");
  const json named = generate(f.model, "--press-opt adapter=" + f.adapter);
  ASSERT_TRUE(found.is_object() && named.is_object());
  EXPECT_EQ(found["kept_tokens"].get<double>(), 8.0);
  EXPECT_EQ(found["token_ids"], named["token_ids"]);
  EXPECT_EQ(found["kept_tokens"], named["kept_tokens"]);
  // --lookahead-adapter names another file: a model folder without one runs with it too.
  const ModelFolder bare = model_folder("beside-generate-bare", false);
  EXPECT_EQ(generate(bare.model, "--lookahead-adapter " + f.adapter)["token_ids"], named["token_ids"]);
}

TEST(LookaheadBeside, GenerateWithoutAnAdapterNamesTheFileItLookedFor) {
  const ModelFolder f = model_folder("beside-none", false);
  const std::string gen = "generate -m " + f.model + " -p 'the cat' -n 1 --press lookaheadkv --budget 2";
  expect_clean_error(run(gen), f.adapter + " does not exist");
  expect_clean_error(run(gen + " --lookahead-adapter " + f.adapter),
                     "--lookahead-adapter: no file '" + f.adapter + "'");
  // Other methods do not care whether an adapter exists.
  EXPECT_EQ(
      run("generate -m " + f.model + " -p 'the cat' -n 1 --press snapkv --budget 2 --press-opt window=1").exit_code, 0);
}

TEST(LookaheadBeside, ChatFindsTheAdapterBesideTheModel) {
  const ModelFolder f = model_folder("beside-chat", true);
  const std::string script = temp_path("beside-chat.txt");
  std::ofstream(script) << kPrompt << "\n/stats\n/exit\n";
  const std::string chat = "chat -m " + f.model + " --chat-template " + test_template() +
                           " -n 2 --temp 0 --press lookaheadkv --budget 8 < " + script;
  const CommandResult r = run(chat);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("kept 8.0 tokens per head"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("press lookaheadkv"), std::string::npos) << r.out;
  const ModelFolder bare = model_folder("beside-chat-bare", false);
  const CommandResult refused = run("chat -m " + bare.model + " --chat-template " + test_template() +
                                    " --press lookaheadkv --budget 8 < " + script);
  expect_clean_error(refused, bare.adapter + " does not exist");
}

json completion(const ServerProcess& server, json body) {
  body["prompt"] = kPrompt;
  body["max_tokens"] = 3;
  body["temperature"] = 0;
  body["return_tokens"] = true;
  auto [status, out] = server.post("/v1/completions", body.dump());
  out["status"] = status;
  return out;
}

TEST(LookaheadBeside, AServerRequestRunsWithTheAdapterBesideTheModel) {
  const ModelFolder f = model_folder("beside-serve", true);
  ServerProcess server("--ctx 512", true, f.model);
  auto [ps, props] = server.get("/props");
  EXPECT_EQ(props["default_generation_settings"]["params"]["lookahead_adapter"], f.adapter);
  const json r = completion(server, {{"press", "lookaheadkv"}, {"budget", 8}});
  ASSERT_EQ(r["status"], 200) << r;
  EXPECT_EQ(r["kv"]["press"], "lookaheadkv");
  EXPECT_EQ(r["kv"]["kept_tokens"].get<double>(), 8.0);
  // The same as the CLI naming the adapter: same method, same adapter, same tokens.
  const json cli = generate(f.model, "--press-opt adapter=" + f.adapter);
  EXPECT_EQ(r["tokens"], cli["token_ids"]);
  // A request still may not name a file, the adapter option included.
  const json named = completion(server, {{"press", "lookaheadkv"}, {"press_options", {{"adapter", f.adapter}}}});
  EXPECT_EQ(named["status"], 400);
  EXPECT_EQ(named["error"]["param"], "press_options");
}

TEST(LookaheadBeside, AServerWithoutAnAdapterRefusesSayingHowToStartIt) {
  const ModelFolder f = model_folder("beside-serve-none", false);
  ServerProcess server("--ctx 512", true, f.model);
  const json r = completion(server, {{"press", "lookaheadkv"}, {"budget", 8}});
  EXPECT_EQ(r["status"], 400);
  EXPECT_EQ(r["error"]["param"], "press");
  const std::string message = r["error"]["message"];
  EXPECT_NE(message.find(f.adapter + " does not exist"), std::string::npos) << message;
  EXPECT_NE(message.find("--lookahead-adapter FILE"), std::string::npos) << message;
  EXPECT_EQ(completion(server, {{"press", "snapkv"}, {"budget", 8}, {"press_options", {{"window", 2}}}})["status"],
            200);
}

TEST(LookaheadBeside, AServerStartedWithLookaheadAdapterUsesIt) {
  const ModelFolder f = model_folder("beside-serve-flag", true);
  const ModelFolder bare = model_folder("beside-serve-flag-bare", false);
  ServerProcess server("--ctx 512 --lookahead-adapter " + f.adapter, true, bare.model);
  const json r = completion(server, {{"press", "lookaheadkv"}, {"budget", 8}});
  ASSERT_EQ(r["status"], 200) << r;
  EXPECT_EQ(r["tokens"], generate(f.model, "")["token_ids"]);
}

TEST(LookaheadBeside, AServerRefusesToStartWithAnAdapterOfAnotherModel) {
  const ModelFolder bare = model_folder("beside-serve-wrong", false);
  TinyModel other;
  other.seed = 99;
  const std::string wrong = temp_path("other-model.lookahead.gguf");
  random_adapter(*Model::load(make_model(other)), {.n_lookahead = 8, .rank = 4, .alpha = 8}).save(wrong);
  const CommandResult r = run("serve -m " + bare.model + " --port 0 --threads 1 --lookahead-adapter " + wrong);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("does not fit the model"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("fingerprint"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kvslim::testing
