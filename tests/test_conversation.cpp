// chat/conversation: messages -> template -> tokens -> session turn. Each new user message runs
// only its own tokens; an edited earlier message (the server's whole-list form) re-prefills from
// the first differing token and matches a fresh conversation; a failing turn changes nothing.
#include <gtest/gtest.h>

#include "chat/conversation.h"
#include "model/model.h"
#include "test_models.h"
#include "util/error.h"

namespace kvslim {
namespace {

struct Fixture {
  std::unique_ptr<Model> model = Model::load(testing::make_model(testing::TinyModel{}));
  ThreadPool pool{2};
  EngineOptions options;
  SamplerParams greedy;
  ChatTemplate tmpl = ChatTemplate::parse(
      "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}{% if add_generation_prompt "
      "%}<|assistant|>{% endif %}",
      "test template");
  // Opens the answer with "<|a|>" but renders past answers after "<|assistant|>": every turn
  // rewrites the previous one's history.
  ChatTemplate rewriting = ChatTemplate::parse(
      "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<|a|>{% endif "
      "%}",
      "rewriting template");
  Fixture() {
    greedy.temperature = 0;
    options.batch = 1;  // same single-token passes in every session: logits comparable bit for bit
  }
  Conversation make(bool rewrite = false) {
    return Conversation(*model, pool, options, CompressionOptions{}, greedy, rewrite ? rewriting : tmpl, "Be brief.");
  }
};

TEST(Conversation, EachTurnRunsOnlyItsNewTokensAndEditsReprefill) {
  Fixture f;
  Conversation chat = f.make();
  const Answer a1 = chat.ask("first question", 4);
  EXPECT_EQ(chat.session().last_turn().reused, 0);
  ASSERT_EQ(chat.messages().size(), 3u);  // system, user, assistant
  EXPECT_EQ(chat.messages()[2].role, "assistant");
  const int64_t first_turn = int64_t(chat.session().transcript().size());
  chat.ask("second", 4);
  const TurnStats t2 = chat.session().last_turn();
  EXPECT_GT(t2.reused, 20);
  EXPECT_LT(t2.turn_tokens, int64_t(chat.session().history().size()) - 20);
  EXPECT_GE(t2.reused + t2.reprefilled, first_turn - 1);

  // The whole list again with the first question edited near its start.
  std::vector<ChatMessage> edited = chat.messages();
  edited[1].content = "fist question";
  edited.push_back({"user", "third"});
  const Answer a3 = chat.reply(edited, 4);
  const TurnStats t3 = chat.session().last_turn();
  EXPECT_GT(t3.reprefilled, 0);
  EXPECT_LT(t3.reused, t2.reused);

  Conversation fresh = f.make();
  const Answer b3 = fresh.reply(edited, 4);
  EXPECT_EQ(a3.tokens, b3.tokens);
  EXPECT_EQ(chat.session().history(), fresh.session().history());
}

TEST(Conversation, ATemplateThatRewritesHistoryReprefillsAndMatchesAFreshConversation) {
  Fixture f;
  Conversation chat = f.make(true);
  chat.ask("first question", 4);
  chat.ask("second", 4);
  EXPECT_GT(chat.session().last_turn().reprefilled, 0);  // "<|a|>" became "<|assistant|>"
  Conversation fresh = f.make(true);
  std::vector<ChatMessage> all = chat.messages();
  all.pop_back();  // the last answer: asked again from scratch
  fresh.reply(all, 4);
  EXPECT_EQ(chat.session().transcript(), fresh.session().transcript());
}

TEST(Conversation, ATurnThatCannotRunLeavesTheConversationUnchanged) {
  Fixture f;
  f.options.context = 64;
  Conversation chat = f.make();
  chat.ask("hi", 2);
  const auto messages = chat.messages();
  const auto history = chat.session().history();
  EXPECT_THROW(chat.ask(std::string(200, 'x'), 2), Error);
  EXPECT_EQ(chat.messages().size(), messages.size());
  EXPECT_EQ(chat.session().history(), history);
}

}  // namespace
}  // namespace kvslim
