// gpt-oss's chat template (OpenAI's harmony format, as llama.cpp ships it in
// models/templates/openai-gpt-oss-120b.jinja) renders as Python's Jinja2 renders it. A local
// check: the template is not in this repository, so the test runs only when
// $KVSLIM_GPTOSS_TEMPLATE names the file and python3 can import jinja2, and is skipped otherwise
// (also under CI). Python renders every case at test time in the Hugging Face environment of
// ../shared/chat-templates/README.md (sandboxed, trim_blocks, lstrip_blocks, loopcontrols, tojson
// as json.dumps(ensure_ascii=False), raise_exception, strftime_now at 2026-01-15 09:30:00).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "chat/chat_template.h"
#include "chat_template_clock.h"
#include "test_models.h"
#include "util/error.h"

namespace kvslim {
namespace {

namespace fs = std::filesystem;

constexpr const char* kRenderScript = R"PY(
import json, sys
from datetime import datetime
import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)

env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
env.filters["tojson"] = lambda x, indent=None, separators=None, sort_keys=False, ensure_ascii=False: json.dumps(
    x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = lambda fmt: datetime(2026, 1, 15, 9, 30, 0).strftime(fmt)
template = env.from_string(open(sys.argv[1], encoding="utf-8").read())
out = {}
for case in json.load(open(sys.argv[2], encoding="utf-8")):
    try:
        out[case["id"]] = {"expected": template.render(messages=case["messages"],
            add_generation_prompt=case["add_generation_prompt"], bos_token="<|startoftext|>",
            eos_token="<|return|>", **case["variables"])}
    except Exception as e:
        out[case["id"]] = {"error": str(e)}
json.dump(out, open(sys.argv[3], "w", encoding="utf-8"), ensure_ascii=False)
)PY";

// Conversations that reach every branch of the template: system and developer messages,
// reasoning effort, model identity, builtin tools, function tools with nested JSON-schema
// parameters (objects, arrays, enums, unions, defaults, multi-line descriptions), assistant
// thinking / reasoning_content, tool calls with object and string arguments, tool results,
// unicode, a generation prompt or not, and the two refusals (content and thinking beside tool
// calls; no messages).
nlohmann::ordered_json cases() {
  return nlohmann::ordered_json::parse(R"JSON([
 {"id": "plain", "add_generation_prompt": true, "variables": {},
  "messages": [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Hi there"},
               {"role": "assistant", "content": "Hello! How can I help?"}, {"role": "user", "content": "2+2?"}]},
 {"id": "final-thinking", "add_generation_prompt": false, "variables": {},
  "messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "thinking": "think hard", "content": "A"}]},
 {"id": "reasoning-content", "add_generation_prompt": true, "variables": {"reasoning_effort": "low"},
  "messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "reasoning_content": "rc", "content": "A"},
               {"role": "user", "content": "Q2"}]},
 {"id": "developer", "add_generation_prompt": true, "variables": {"model_identity": "You are a test model."},
  "messages": [{"role": "system", "content": "S"}, {"role": "developer", "content": "D"},
               {"role": "user", "content": "héllo ✓ 日本"}]},
 {"id": "tools", "add_generation_prompt": true,
  "variables": {"reasoning_effort": "high", "builtin_tools": ["browser", "python"],
   "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Get the weather",
     "parameters": {"type": "object", "required": ["city"], "properties": {
       "city": {"type": "string", "description": "City name"},
       "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
       "days": {"type": ["integer", "null"]}, "tags": {"type": "array", "items": {"type": "string"}},
       "opts": {"type": "object", "properties": {"x": {"type": "number", "description": "multi\nline"}}},
       "mode": {"anyOf": [{"type": "string"}, {"type": "number"}]},
       "one": {"oneOf": [{"type": "string", "enum": ["a", "b"]}, {"type": "integer"}]},
       "maybe": {"type": "string", "nullable": true}}}}},
    {"type": "function", "function": {"name": "noargs", "description": "No args"}}]},
  "messages": [{"role": "developer", "content": "Be terse."}, {"role": "user", "content": "Weather in Paris?"},
   {"role": "assistant", "thinking": "Need the tool.", "content": "",
    "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
   {"role": "tool", "content": "{\"temp\": 21}"},
   {"role": "assistant", "thinking": "It is 21.", "content": "21 °C in Paris."}, {"role": "user", "content": "Thanks"}]},
 {"id": "tool-calls", "add_generation_prompt": true, "variables": {"builtin_tools": ["python"]},
  "messages": [{"role": "user", "content": "Q"},
   {"role": "assistant", "content": "Let me check", "tool_calls": [{"function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
   {"role": "tool", "content": "r1"},
   {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}},
                                        {"function": {"name": "g", "arguments": {}}}]},
   {"role": "tool", "content": "r2"}, {"role": "tool", "content": "r3"}]},
 {"id": "content-and-thinking-with-tools", "add_generation_prompt": true, "variables": {},
  "messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "visible", "thinking": "hidden",
                "tool_calls": [{"function": {"name": "f", "arguments": {}}}]}]},
 {"id": "no-messages", "add_generation_prompt": true, "variables": {}, "messages": []}
])JSON");
}

void spit(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

TEST(ChatTemplateGptOss, RendersAsPythonJinja2) {
  const char* env = std::getenv("KVSLIM_GPTOSS_TEMPLATE");
  if (env == nullptr || !fs::exists(env)) GTEST_SKIP() << "set KVSLIM_GPTOSS_TEMPLATE to openai-gpt-oss-120b.jinja";
  if (std::system("python3 -c 'import jinja2' >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 with jinja2 not found";
  const fs::path script = testing::temp_path("render_gptoss.py"), in = testing::temp_path("gptoss-cases.json"),
                 out = testing::temp_path("gptoss-rendered.json");
  spit(script, kRenderScript);
  spit(in, cases().dump());
  const std::string command =
      "python3 '" + script.string() + "' '" + env + "' '" + in.string() + "' '" + out.string() + "'";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const auto rendered = nlohmann::json::parse(testing::slurp(out));
  const ChatTemplate tmpl = ChatTemplate::from_path(env);
  int same = 0, refused = 0;
  for (const auto& c : cases()) {
    const std::string id = c["id"].get<std::string>();
    ChatTemplateOptions options;
    options.add_generation_prompt = c["add_generation_prompt"].get<bool>();
    options.bos_token = "<|startoftext|>";
    options.eos_token = "<|return|>";
    options.variables = c["variables"];
    options.clock = testing::corpus_clock;
    const auto& want = rendered.at(id);
    if (want.contains("error")) {
      EXPECT_THROW(tmpl.render(c["messages"], options), Error) << id << " (Python: " << want["error"] << ")";
      ++refused;
      continue;
    }
    try {
      EXPECT_EQ(tmpl.render(c["messages"], options), want["expected"].get<std::string>()) << id;
      ++same;
    } catch (const Error& e) {
      ADD_FAILURE() << id << ": " << e.what();
    }
  }
  EXPECT_EQ(same, 6);
  EXPECT_EQ(refused, 2);
}

}  // namespace
}  // namespace kvslim
