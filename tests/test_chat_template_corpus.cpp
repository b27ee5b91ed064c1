// Conformance: every case of ../shared/chat-templates (real templates, renderings from Python's
// Jinja2 in the Hugging Face environment) renders byte for byte, and every case marked "error"
// is refused with a kvslim::Error.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "chat/chat_template.h"
#include "prerequisites.h"
#include "util/error.h"

namespace kvslim {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The corpus's fixed clock: 2026-01-15 09:30:00.
std::tm corpus_clock() {
  std::tm t{};
  t.tm_year = 2026 - 1900;
  t.tm_mon = 0;
  t.tm_mday = 15;
  t.tm_hour = 9;
  t.tm_min = 30;
  t.tm_wday = 4;  // a Thursday
  t.tm_yday = 14;
  return t;
}

fs::path corpus_dir() { return testing::shared_dir() / "chat-templates"; }

TEST(ChatTemplateCorpus, EveryCaseRendersOrIsRefused) {
  KVSLIM_REQUIRE(fs::exists(corpus_dir()), "no template corpus at " << corpus_dir());
  int templates = 0, rendered = 0, refused = 0;
  for (const auto& entry : fs::directory_iterator(corpus_dir())) {
    if (entry.path().extension() != ".jinja") continue;
    const fs::path cases_path = fs::path(entry.path()).replace_extension(".cases.json");
    ASSERT_TRUE(fs::exists(cases_path)) << cases_path;
    const std::string name = entry.path().stem().string();
    const ChatTemplate tmpl = ChatTemplate::parse(slurp(entry.path()), entry.path().string());
    ++templates;
    for (const auto& c : nlohmann::ordered_json::parse(slurp(cases_path))) {
      const std::string id = name + "/" + c["id"].get<std::string>();
      ChatTemplateOptions options;
      options.add_generation_prompt = c["add_generation_prompt"].get<bool>();
      options.bos_token = c["bos_token"].get<std::string>();
      options.eos_token = c["eos_token"].get<std::string>();
      options.clock = corpus_clock;
      if (c.contains("error")) {
        EXPECT_THROW(tmpl.render(c["messages"], options), Error) << id;
        ++refused;
        continue;
      }
      try {
        EXPECT_EQ(tmpl.render(c["messages"], options), c["expected"].get<std::string>()) << id;
      } catch (const Error& e) {
        ADD_FAILURE() << id << ": " << e.what();
      }
      ++rendered;
    }
  }
  EXPECT_GE(templates, 10);
  EXPECT_GT(rendered, 0);
  EXPECT_GT(refused, 0);
  std::printf("chat-template corpus: %d templates, %d renderings, %d refusals\n", templates, rendered, refused);
}

}  // namespace
}  // namespace kvslim
