// kvslim.Model's C++ side: loading, the tokenizer, generate (the path `kvslim generate` takes)
// and one chat completion (the path the server's /v1/chat/completions takes).
#include <fmt/format.h>
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "chat/chat_template.h"
#include "chat/conversation.h"
#include "engine/generate.h"
#include "kv/kv_shape.h"
#include "model_state.h"

namespace kvslim::python {

namespace {

// Streams each piece to a Python callable, the GIL taken for the call only.
std::function<void(const std::string&)> piece_callback(const py::object& on_piece) {
  if (on_piece.is_none()) return {};
  return [on_piece](const std::string& piece) {
    py::gil_scoped_acquire gil;
    on_piece(utf8_text(piece));
  };
}

std::vector<int32_t> prompt_tokens(const Model& model, const py::object& prompt, std::optional<bool> add_bos,
                                   bool special) {
  if (py::isinstance<py::str>(prompt)) {
    const Tokenizer& t = model.tokenizer();
    return t.encode(prompt.cast<std::string>(), add_bos.value_or(t.add_bos_by_default()), special);
  }
  return prompt.cast<std::vector<int32_t>>();
}

GenerateResult generate(ModelState& m, const py::object& prompt, int max_tokens, const SamplerParams& sampling,
                        const CompressionOptions& compression, std::optional<bool> add_bos, bool special,
                        const py::object& on_piece) {
  GenerateRequest request;
  request.prompt = prompt_tokens(*m.model, prompt, add_bos, special);
  request.n_predict = max_tokens;
  request.sampling = sampling;
  request.compression = compression;
  const auto stream = piece_callback(on_piece);
  return run_engine(m, [&] { return kvslim::generate(*m.model, m.pool, m.engine, request, stream); });
}

// One chat completion over a fresh conversation: the messages rendered by the model's template
// (or the Jinja file `chat_template`), run as a turn, the answer sampled.
py::dict chat(ModelState& m, const py::list& messages, int max_tokens, const SamplerParams& sampling,
              const CompressionOptions& compression, const std::string& chat_template, const py::object& on_piece) {
  std::vector<ChatMessage> list;
  for (const py::handle& item : messages) {
    if (!py::isinstance<py::dict>(item))
      throw py::value_error("messages: each message must be a dict with role and content");
    const py::dict d = py::reinterpret_borrow<py::dict>(item);
    if (!d.contains("role") || !py::isinstance<py::str>(d["role"]))
      throw py::value_error("messages: each message needs a string 'role'");
    if (!d.contains("content") || !py::isinstance<py::str>(d["content"]))
      throw py::value_error("messages: each message needs a string 'content'");
    list.push_back({d["role"].cast<std::string>(), d["content"].cast<std::string>()});
  }
  if (list.empty()) throw py::value_error("messages: the list is empty");
  const auto stream = piece_callback(on_piece);
  struct Outcome {
    Answer answer;
    TurnStats turn;
  };
  const Outcome out = run_engine(m, [&] {
    Conversation conversation(*m.model, m.pool, m.engine, compression, sampling,
                              ChatTemplate::for_model(*m.model, chat_template));
    Answer a = conversation.reply(list, max_tokens, stream);
    return Outcome{std::move(a), conversation.session().last_turn()};
  });
  py::dict result;
  result["text"] = utf8_text(out.answer.text);
  result["reasoning"] = utf8_text(out.answer.reasoning);
  result["stop_reason"] = std::string(to_string(out.answer.stop_reason));
  result["prompt_tokens"] = out.turn.turn_tokens;
  result["completion_tokens"] = out.answer.tokens.size();
  result["prefill_ms"] = out.turn.prefill_ms;
  result["decode_ms"] = out.turn.decode_ms;
  result["kept_tokens"] = out.turn.kept_tokens;
  result["kv_bytes"] = out.turn.kv_bytes;
  return result;
}

}  // namespace

void bind_model(py::module_& m) {
  py::class_<SamplerParams>(m, "_Sampling")
      .def(py::init<>())
      .def_readwrite("temperature", &SamplerParams::temperature)
      .def_readwrite("top_k", &SamplerParams::top_k)
      .def_readwrite("top_p", &SamplerParams::top_p)
      .def_readwrite("min_p", &SamplerParams::min_p)
      .def_readwrite("repeat_penalty", &SamplerParams::repeat_penalty)
      .def_readwrite("repeat_last_n", &SamplerParams::repeat_last_n)
      .def_readwrite("seed", &SamplerParams::seed)
      .def("validate", &SamplerParams::validate);

  py::class_<CompressionOptions>(m, "_Compression")
      .def(py::init(&compression_from), py::arg("press"), py::arg("budget"), py::arg("ratio"), py::arg("prefill_evict"),
           py::arg("options"), py::arg("model_path"))
      .def_property_readonly("press", [](const CompressionOptions& c) { return c.press; });

  py::class_<GenerateResult>(m, "GenerateResult", "What one generate() call produced, with its timings and KV use.")
      .def_property_readonly("text", [](const GenerateResult& r) { return utf8_text(r.text); })
      .def_readonly("tokens", &GenerateResult::tokens)
      .def_property_readonly("stop_reason",
                             [](const GenerateResult& r) { return std::string(to_string(r.stop_reason)); })
      .def_readonly("n_prompt", &GenerateResult::n_prompt)
      .def_readonly("decode_steps", &GenerateResult::decode_steps)
      .def_property_readonly(
          "budget",
          [](const GenerateResult& r) -> py::object { return r.budget ? py::object(py::int_(r.budget)) : py::none(); })
      .def_readonly("prefill_ms", &GenerateResult::prefill_ms)
      .def_readonly("score_ms", &GenerateResult::score_ms)
      .def_readonly("decode_ms", &GenerateResult::decode_ms)
      .def_property_readonly(
          "prefill_tok_s",
          [](const GenerateResult& r) { return r.prefill_ms > 0 ? 1000.0 * r.n_prompt / r.prefill_ms : 0.0; })
      .def_property_readonly(
          "decode_tok_s",
          [](const GenerateResult& r) { return r.decode_ms > 0 ? 1000.0 * r.decode_steps / r.decode_ms : 0.0; })
      .def_readonly("kept_tokens", &GenerateResult::kept_tokens)
      .def_property_readonly("storage_tokens",
                             [](const GenerateResult& r) -> py::object {
                               return r.token_cost ? py::object(py::float_(r.token_cost->storage)) : py::none();
                             })
      .def_property_readonly("traffic_tokens",
                             [](const GenerateResult& r) -> py::object {
                               return r.token_cost ? py::object(py::float_(r.token_cost->traffic)) : py::none();
                             })
      .def_readonly("kv_bytes_peak", &GenerateResult::kv_bytes_peak)
      .def_readonly("kv_bytes_final", &GenerateResult::kv_bytes_final)
      .def_readonly("kv_bytes_prefill", &GenerateResult::kv_bytes_prefill);

  py::class_<ModelState, std::shared_ptr<ModelState>>(m, "_Model")
      .def(py::init([](const std::string& path, int threads, int ctx, int batch, int kv_page,
                       const std::string& cache_type_k, const std::string& cache_type_v) {
             EngineOptions e;
             e.context = ctx;
             e.batch = batch;
             e.page_tokens = kv_page;
             e.cache_type_k = kv_type_from_name(cache_type_k, "cache_type_k");
             e.cache_type_v = kv_type_from_name(cache_type_v, "cache_type_v");
             py::gil_scoped_release no_gil;  // loading maps and checks the file
             return std::make_shared<ModelState>(path, threads, e);
           }),
           py::arg("path"), py::arg("threads"), py::arg("ctx"), py::arg("batch"), py::arg("kv_page"),
           py::arg("cache_type_k"), py::arg("cache_type_v"))
      .def_property_readonly("n_vocab", [](const ModelState& s) { return s.model->config().n_vocab; })
      .def_property_readonly("n_layers", [](const ModelState& s) { return s.model->config().n_layers; })
      .def_property_readonly("n_heads", [](const ModelState& s) { return s.model->config().n_heads; })
      .def_property_readonly("n_kv_heads", [](const ModelState& s) { return s.model->config().n_kv_heads; })
      .def_property_readonly("head_dim", [](const ModelState& s) { return s.model->config().head_dim; })
      .def_property_readonly("ctx", [](const ModelState& s) { return s.engine.context; })
      .def_property_readonly("threads", [](const ModelState& s) { return s.pool.size(); })
      .def(
          "tokenize",
          [](const ModelState& s, const std::string& text, std::optional<bool> add_bos, bool special) {
            const Tokenizer& t = s.model->tokenizer();
            return t.encode(text, add_bos.value_or(t.add_bos_by_default()), special);
          },
          py::arg("text"), py::arg("add_bos") = py::none(), py::arg("special") = true)
      .def(
          "detokenize",
          [](const ModelState& s, const std::vector<int32_t>& tokens, bool special) {
            const int n_vocab = s.model->config().n_vocab;
            for (int32_t t : tokens)
              if (t < 0 || t >= n_vocab)
                throw py::value_error(fmt::format("token id {} is outside the vocabulary [0, {})", t, n_vocab));
            return utf8_text(s.model->tokenizer().decode(tokens, special));
          },
          py::arg("tokens"), py::arg("special") = false)
      .def("is_end_of_generation",
           [](const ModelState& s, int32_t t) { return s.model->tokenizer().is_end_of_generation(t); })
      .def("_generate", &generate, py::arg("prompt"), py::arg("max_tokens"), py::arg("sampling"),
           py::arg("compression"), py::arg("add_bos"), py::arg("special"), py::arg("on_piece"))
      .def("_chat", &chat, py::arg("messages"), py::arg("max_tokens"), py::arg("sampling"), py::arg("compression"),
           py::arg("chat_template"), py::arg("on_piece"));
}

}  // namespace kvslim::python
