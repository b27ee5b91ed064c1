#include "chat/conversation.h"

#include <nlohmann/json.hpp>

#include "chat/chat_messages.h"
#include "chat/harmony_channels.h"
#include "model/model.h"
#include "util/utf8.h"
#include "util/error.h"

namespace kvslim {

namespace {

// Messages are text for a template (and JSON): an answer cut inside a character, or a model
// emitting stray bytes, gets U+FFFD for each invalid byte. The next rendering then differs from
// the sampled tokens there, and the session re-prefills from that point (shown in /stats).
std::string valid_utf8(const std::string& text) {
  std::string out;
  for (size_t pos = 0; pos < text.size();) append_utf8(out, decode_utf8(text, pos));
  return out;
}

std::vector<ChatMessage> opening(const std::string& system) {
  if (system.empty()) return {};
  return {{"system", system}};
}

}  // namespace

Conversation::Conversation(const Model& model, ThreadPool& pool, const EngineOptions& options,
                           const CompressionOptions& compression, const SamplerParams& sampling,
                           ChatTemplate chat_template, std::string system)
    : model_(model),
      pool_(pool),
      options_(options),
      sampling_(sampling),
      template_(std::move(chat_template)),
      template_options_(ChatTemplate::default_options(model)),
      system_(std::move(system)),
      messages_(opening(system_)),
      live_(std::make_unique<LiveSession>(model, pool, options, compression, sampling)) {}

std::vector<int32_t> Conversation::render_tokens(bool add_generation_prompt) const {
  ChatTemplateOptions o = template_options_;
  o.add_generation_prompt = add_generation_prompt;
  const std::string text = template_.render(messages_, o);
  const Tokenizer& tokenizer = model_.tokenizer();
  // BOS as llama.cpp does: when the tokenizer wants one and the template did not write it.
  const bool add_bos =
      prefix_.empty() && tokenizer.add_bos_by_default() && (o.bos_token.empty() || text.rfind(o.bos_token, 0) != 0);
  std::vector<int32_t> tokens = prefix_;
  const std::vector<int32_t> rendered = tokenizer.encode(text, add_bos, /*parse_special=*/true);
  tokens.insert(tokens.end(), rendered.begin(), rendered.end());
  return tokens;
}

Answer Conversation::ask(const std::string& user_text, int n_predict,
                         const std::function<void(const std::string&)>& on_piece, const std::atomic<bool>* stop) {
  std::vector<ChatMessage> messages = messages_;
  messages.push_back({"user", user_text});
  return reply(messages, n_predict, on_piece, stop);
}

Answer Conversation::reply(const std::vector<ChatMessage>& messages, int n_predict,
                           const std::function<void(const std::string&)>& on_piece, const std::atomic<bool>* stop) {
  std::vector<ChatMessage> before = std::move(messages_);
  messages_.clear();
  for (const ChatMessage& m : messages) messages_.push_back({m.role, valid_utf8(m.content)});
  try {
    live_->prompt(render_tokens(true), n_predict);
  } catch (...) {
    messages_ = std::move(before);
    throw;
  }
  const std::optional<HarmonyTokens> harmony = HarmonyTokens::find(model_.tokenizer());
  if (!harmony) {
    Answer answer = live_->answer(n_predict, pieces_only(on_piece), stop);
    messages_.push_back({"assistant", valid_utf8(answer.text)});
    return answer;
  }
  // gpt-oss: the answer channel is the assistant's message and what on_piece sees; the
  // reasoning is kept apart (the template drops earlier turns' reasoning anyway).
  HarmonyChannels channels(*harmony);
  std::string text, reasoning;
  Answer answer = live_->answer(
      n_predict,
      [&](int32_t token, const std::string& piece) {
        HarmonyChannels::Text t = channels.push(token, piece);
        reasoning += t.reasoning;
        text += t.answer;
        if (on_piece && !t.answer.empty()) on_piece(t.answer);
      },
      stop);
  answer.text = std::move(text);
  answer.reasoning = std::move(reasoning);
  messages_.push_back({"assistant", valid_utf8(answer.text)});
  return answer;
}

void Conversation::reset() {
  messages_ = opening(system_);
  prefix_.clear();
  live_->reset();
}

void Conversation::save(const std::string& path) const {
  nlohmann::ordered_json j = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages_) j.push_back({{"role", m.role}, {"content", m.content}});
  nlohmann::ordered_json attachment = {{"messages", j}, {"prefix", prefix_}};
  live_->set_attachment(attachment.dump());
  live_->save(path);
}

void Conversation::load(const std::string& path) {
  std::unique_ptr<LiveSession> loaded = LiveSession::load(path, model_, pool_, options_, sampling_);
  std::vector<ChatMessage> messages;
  std::vector<int32_t> prefix;
  if (loaded->attachment().empty()) {
    prefix = loaded->transcript();  // a `generate` file: its tokens open the conversation
  } else {
    const auto j = nlohmann::ordered_json::parse(loaded->attachment(), nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("messages") || !j.contains("prefix"))
      fail("cannot load KV file {}: its chat messages are malformed", path);
    check_chat_messages(j["messages"], path);
    for (const auto& m : j["messages"]) {
      std::string content;
      if (m.contains("content") && m["content"].is_string()) content = m["content"].get<std::string>();
      messages.push_back({m["role"].get<std::string>(), content});
    }
    try {
      prefix = j["prefix"].get<std::vector<int32_t>>();
    } catch (const std::exception&) {
      fail("cannot load KV file {}: its chat prefix is malformed", path);
    }
  }
  live_ = std::move(loaded);
  messages_ = std::move(messages);
  prefix_ = std::move(prefix);
}

}  // namespace kvslim
