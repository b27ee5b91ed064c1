// A chat conversation: messages -> the chat template's rendering -> tokens -> a turn of a
// LiveSession that keeps its compressed KV across turns. Terminal I/O (kvslim chat) and HTTP
// (the server) sit on top; this layer owns what a turn means.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "engine/live_session.h"

namespace kvslim {

class Conversation {
 public:
  // `system`: an optional system message opening the conversation.
  Conversation(const Model& model, ThreadPool& pool, const EngineOptions& options,
               const CompressionOptions& compression, const SamplerParams& sampling, ChatTemplate chat_template,
               std::string system = "");

  // Adds the user's message, renders the conversation with the generation prompt, runs the new
  // tokens as a turn and streams the answer, which becomes the assistant's message (also when
  // interrupted through `stop`). A turn that cannot run (too long for --ctx) throws
  // kvslim::Error and leaves the conversation as it was.
  Answer ask(const std::string& user_text, int n_predict, const std::function<void(const std::string&)>& on_piece = {},
             const std::atomic<bool>* stop = nullptr);

  // The server's form (a client sends the whole message list each time): the conversation
  // becomes `messages` (the system message included, if any), is rendered with the generation
  // prompt and run as a turn (the cached prefix it shares with the last rendering is reused; an
  // edited earlier message re-prefills from its first differing token), and the answer is
  // appended as the assistant's message. On an error the conversation is unchanged.
  Answer reply(const std::vector<ChatMessage>& messages, int n_predict,
               const std::function<void(const std::string&)>& on_piece = {}, const std::atomic<bool>* stop = nullptr);

  // Forgets every message but the system one, and the cache.
  void reset();
  // KV file with the messages attached; load replaces session and messages only if the file is
  // good (kvslim::Error otherwise, conversation unchanged). A file made by `generate` (no
  // messages) becomes a token prefix the rendered conversation follows.
  void save(const std::string& path) const;
  void load(const std::string& path);

  // The tokens a rendering of the current messages gives (what ask() feeds, minus the new turn).
  std::vector<int32_t> render_tokens(bool add_generation_prompt) const;
  const std::vector<ChatMessage>& messages() const { return messages_; }
  const LiveSession& session() const { return *live_; }

 private:
  const Model& model_;
  ThreadPool& pool_;
  EngineOptions options_;
  SamplerParams sampling_;
  ChatTemplate template_;
  ChatTemplateOptions template_options_;
  std::string system_;
  std::vector<ChatMessage> messages_;
  std::vector<int32_t> prefix_;  // tokens before the rendered messages (a loaded `generate` file)
  std::unique_ptr<LiveSession> live_;
};

}  // namespace kvslim
