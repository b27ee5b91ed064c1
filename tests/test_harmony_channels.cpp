// HarmonyChannels: gpt-oss's generated messages sorted into answer and reasoning, checked on
// token sequences written out by hand (ids 1-5 stand for the control tokens).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "chat/harmony_channels.h"

namespace kvslim {
namespace {

constexpr int32_t kStart = 1, kChannel = 2, kMessage = 3, kEnd = 4, kConstrain = 5, kText = 100;

// Feeds (id, piece) pairs and concatenates what comes out.
std::pair<std::string, std::string> run(const std::vector<std::pair<int32_t, std::string>>& tokens) {
  HarmonyChannels channels(HarmonyTokens{kStart, kChannel, kMessage, kEnd, kConstrain});
  std::string answer, reasoning;
  for (const auto& [id, piece] : tokens) {
    const HarmonyChannels::Text t = channels.push(id, piece);
    answer += t.answer;
    reasoning += t.reasoning;
  }
  return {answer, reasoning};
}

TEST(HarmonyChannels, AnalysisIsReasoningAndFinalIsTheAnswer) {
  // <|channel|>analysis<|message|>User greets.<|end|><|start|>assistant<|channel|>final<|message|>Hi there
  const auto [answer, reasoning] = run({{kChannel, ""},
                                        {kText, "analysis"},
                                        {kMessage, ""},
                                        {kText, "User"},
                                        {kText, " greets."},
                                        {kEnd, ""},
                                        {kStart, ""},
                                        {kText, "assis"},
                                        {kText, "tant"},
                                        {kChannel, ""},
                                        {kText, "final"},
                                        {kMessage, ""},
                                        {kText, "Hi"},
                                        {kText, " there"}});
  EXPECT_EQ(reasoning, "User greets.");
  EXPECT_EQ(answer, "Hi there");
}

TEST(HarmonyChannels, ChannelNameIsItsFirstWordAndConstraintsAreDropped) {
  // A tool call: <|start|>assistant to=functions.f<|channel|>commentary <|constrain|>json<|message|>{"a":1}
  // and a channel name split over two tokens ("anal", "ysis").
  const auto [answer, reasoning] = run({{kStart, ""},
                                        {kText, "assistant to=functions.f"},
                                        {kChannel, ""},
                                        {kText, "commentary "},
                                        {kConstrain, ""},
                                        {kText, "json"},
                                        {kMessage, ""},
                                        {kText, "{\"a\":1}"},
                                        {kEnd, ""},
                                        {kChannel, ""},
                                        {kText, "anal"},
                                        {kText, "ysis"},
                                        {kMessage, ""},
                                        {kText, "hmm"}});
  EXPECT_EQ(answer, "{\"a\":1}");
  EXPECT_EQ(reasoning, "hmm");
}

TEST(HarmonyChannels, TextOutsideAnyMessageIsNotLost) {
  // A model that answers without a header, and a message without a channel, are answer text.
  EXPECT_EQ(run({{kText, "plain"}, {kText, " reply"}}).first, "plain reply");
  EXPECT_EQ(run({{kStart, ""}, {kText, "assistant"}, {kMessage, ""}, {kText, "x"}}),
            (std::pair<std::string, std::string>{"x", ""}));
}

}  // namespace
}  // namespace kvslim
