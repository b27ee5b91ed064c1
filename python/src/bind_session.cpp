// kvslim.Session's C++ side: one LiveSession driven from Python turn by turn or token by token,
// its logits as a NumPy view, what each head keeps, and the CLI's KV files.
#include <fmt/format.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "engine/live_session.h"
#include "model_state.h"
#include "util/error.h"

namespace kvslim::python {

namespace {

// A LiveSession with the model it runs on. Shared with the logits views handed out, so that a
// view kept past a reset (or past the Session) still points at live memory.
struct LiveHandle {
  std::shared_ptr<ModelState> model;
  std::unique_ptr<LiveSession> live;
};

class PySession {
 public:
  PySession(std::shared_ptr<ModelState> model, CompressionOptions compression, const SamplerParams& sampling,
            int max_tokens)
      : model_(std::move(model)),
        compression_(std::move(compression)),
        sampling_(sampling),
        max_tokens_(max_tokens),
        sampler_(sampling, model_->model->config().n_vocab) {
    if (max_tokens < 0) throw py::value_error(fmt::format("max_tokens must be >= 0 (got {})", max_tokens));
    handle_ = fresh();
  }

  static std::unique_ptr<PySession> load(std::shared_ptr<ModelState> model, const std::string& path,
                                         const SamplerParams& sampling, int max_tokens) {
    auto s = std::make_unique<PySession>(model, CompressionOptions{}, sampling, max_tokens);
    auto live = run_engine(
        *model, [&] { return LiveSession::load(path, *model->model, model->pool, model->engine, sampling); });
    s->compression_ = live->compression();
    s->handle_ = std::make_shared<LiveHandle>(LiveHandle{model, std::move(live)});
    return s;
  }

  // Runs `tokens` as a turn after everything cached (the press selects at its end).
  void prefill(const std::vector<int32_t>& tokens) {
    if (tokens.empty()) throw py::value_error("prefill: no tokens");
    std::vector<int32_t> conversation = live().transcript();
    conversation.insert(conversation.end(), tokens.begin(), tokens.end());
    guarded([&] { live().prompt(conversation, max_tokens_); });
  }

  // Feeds `token`, or the session's sample from the current logits; returns the token fed.
  int32_t decode(std::optional<int32_t> token) {
    if (!live().session()) throw Error("decode needs a prefill first");
    const int32_t t = token ? *token : sampler_.sample(live().session()->last_logits(), live().transcript());
    guarded([&] { live().decode(t); });
    return t;
  }

  // A turn of text, then its answer (up to max_tokens, or the session's): the answer's text.
  py::str turn(const std::string& text, std::optional<int> max_tokens) {
    const Tokenizer& t = model_->model->tokenizer();
    const bool first = live().transcript().empty();
    const std::vector<int32_t> tokens = t.encode(text, first && t.add_bos_by_default(), true);
    if (tokens.empty()) throw py::value_error("turn: the text has no tokens");
    std::vector<int32_t> conversation = live().transcript();
    conversation.insert(conversation.end(), tokens.begin(), tokens.end());
    const int n = max_tokens.value_or(max_tokens_);
    Answer a;
    guarded([&] {
      live().prompt(conversation, n);
      a = live().answer(n);
    });
    return utf8_text(a.text);
  }

  py::array logits(const py::object& self) const {
    const Session* s = live().session();
    if (!s) throw Error("no logits yet: prefill first");
    auto* owner = new std::shared_ptr<LiveHandle>(handle_);
    py::capsule base(owner, [](void* p) { delete static_cast<std::shared_ptr<LiveHandle>*>(p); });
    py::array view(py::dtype::of<float>(), {py::ssize_t(model_->model->config().n_vocab)}, {py::ssize_t(sizeof(float))},
                   s->last_logits(), base);
    view.attr("setflags")(py::arg("write") = false);
    return view;
  }

  py::list kept_positions() const {
    py::list layers;
    const Session* s = live().session();
    if (!s) return layers;
    const PagedKvCache& kv = s->kv();
    for (int l = 0; l < kv.n_layers(); ++l) {
      py::list heads;
      for (int h = 0; h < kv.n_kv_heads(); ++h) {
        const HeadCache& head = kv.head(l, h);
        py::list positions;
        for (int64_t i = 0; i < head.size(); ++i) positions.append(head.position(i));
        heads.append(positions);
      }
      layers.append(heads);
    }
    return layers;
  }

  uint64_t kv_bytes() const { return live().session() ? live().session()->kv().bytes_in_use() : 0; }
  std::vector<int32_t> history() const { return live().transcript(); }
  int64_t n_past() const { return live().session() ? live().session()->n_past() : 0; }
  const TurnStats& last_turn() const { return live().last_turn(); }
  const std::string& press() const { return compression_.press; }

  void save(const std::string& path) {
    run_engine(*model_, [&] { live().save(path); });
  }

  void reset() { handle_ = fresh(); }

 private:
  LiveSession& live() const { return *handle_->live; }

  std::shared_ptr<LiveHandle> fresh() const {
    return std::make_shared<LiveHandle>(LiveHandle{
        model_, std::make_unique<LiveSession>(*model_->model, model_->pool, model_->engine, compression_, sampling_)});
  }

  // Runs engine work. The engine's own refusals (kvslim::Error: a turn that does not fit, a bad
  // id) come before anything changes; any other exception (one raised by a Python press) may
  // leave a turn half-selected, some layers cut and others not, so the session is reset to
  // empty and stays usable. The error goes on to Python either way.
  template <class Work>
  void guarded(Work&& work) {
    try {
      run_engine(*model_, work);
    } catch (const Error&) {
      if (live().session() && live().session()->prefilling()) reset();
      throw;
    } catch (...) {
      reset();
      throw;
    }
  }

  std::shared_ptr<ModelState> model_;
  CompressionOptions compression_;
  SamplerParams sampling_;
  int max_tokens_;
  Sampler sampler_;  // decode() without a token
  std::shared_ptr<LiveHandle> handle_;
};

}  // namespace

void bind_session(py::module_& m) {
  py::class_<TurnStats>(m, "TurnStats")
      .def_readonly("turn_tokens", &TurnStats::turn_tokens)
      .def_readonly("reused", &TurnStats::reused)
      .def_readonly("history", &TurnStats::history)
      .def_readonly("kept_tokens", &TurnStats::kept_tokens)
      .def_readonly("kv_bytes", &TurnStats::kv_bytes)
      .def_readonly("prefill_ms", &TurnStats::prefill_ms)
      .def_readonly("decode_ms", &TurnStats::decode_ms)
      .def_readonly("generated", &TurnStats::generated)
      .def_property_readonly("stop_reason", [](const TurnStats& t) { return std::string(to_string(t.stop_reason)); });

  py::class_<PySession>(m, "_Session")
      .def(py::init<std::shared_ptr<ModelState>, CompressionOptions, const SamplerParams&, int>(), py::arg("model"),
           py::arg("compression"), py::arg("sampling"), py::arg("max_tokens"))
      .def_static("load", &PySession::load, py::arg("model"), py::arg("path"), py::arg("sampling"),
                  py::arg("max_tokens"))
      .def("prefill", &PySession::prefill, py::arg("tokens"))
      .def("decode", &PySession::decode, py::arg("token") = py::none())
      .def("turn", &PySession::turn, py::arg("text"), py::arg("max_tokens") = py::none())
      .def_property_readonly("logits",
                             [](const py::object& self) { return self.cast<const PySession&>().logits(self); })
      .def("kept_positions", &PySession::kept_positions)
      .def_property_readonly("kv_bytes", &PySession::kv_bytes)
      .def_property_readonly("history", &PySession::history)
      .def_property_readonly("n_past", &PySession::n_past)
      .def_property_readonly("last_turn", &PySession::last_turn, py::return_value_policy::copy)
      .def_property_readonly("press", &PySession::press)
      .def("save", &PySession::save, py::arg("path"))
      .def("reset", &PySession::reset);
}

}  // namespace kvslim::python
