// Conformance: every case of ../shared/chat-templates (real templates, renderings from Python's
// Jinja2 in the Hugging Face environment) renders byte for byte, and every case marked "error"
// is refused with a kvslim::Error.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "chat/chat_template.h"
#include "chat_template_clock.h"
#include "prerequisites.h"
#include "util/error.h"

namespace kvslim {
namespace {

namespace fs = std::filesystem;

fs::path corpus_dir() { return testing::shared_dir() / "chat-templates"; }

TEST(ChatTemplateCorpus, EveryCaseRendersOrIsRefused) {
  KVSLIM_REQUIRE(fs::exists(corpus_dir()), "no template corpus at " << corpus_dir());
  int templates = 0, rendered = 0, refused = 0;
  for (const auto& entry : fs::directory_iterator(corpus_dir())) {
    if (entry.path().extension() != ".jinja") continue;
    const fs::path cases_path = fs::path(entry.path()).replace_extension(".cases.json");
    ASSERT_TRUE(fs::exists(cases_path)) << cases_path;
    const std::string name = entry.path().stem().string();
    const ChatTemplate tmpl = ChatTemplate::parse(testing::slurp(entry.path()), entry.path().string());
    ++templates;
    for (const auto& c : nlohmann::ordered_json::parse(testing::slurp(cases_path))) {
      const std::string id = name + "/" + c["id"].get<std::string>();
      ChatTemplateOptions options;
      options.add_generation_prompt = c["add_generation_prompt"].get<bool>();
      options.bos_token = c["bos_token"].get<std::string>();
      options.eos_token = c["eos_token"].get<std::string>();
      options.clock = testing::corpus_clock;
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
