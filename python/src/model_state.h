// What a kvslim.Model holds on the C++ side: the loaded model, its thread pool and engine
// options, and the lock that gives one engine call at a time the pool. Every engine call runs
// through run_engine(): the GIL released (other Python threads run meanwhile; a Python press
// takes it back for its own calls), then the lock taken, in that order so that a thread waiting
// for the lock never holds the GIL a running press needs.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <mutex>
#include <string>

#include "engine/session.h"
#include "model/model.h"
#include "util/thread_pool.h"

namespace kvslim::python {

namespace py = pybind11;

struct ModelState {
  ModelState(const std::string& path, int threads, const EngineOptions& options)
      : model(Model::load(path)), pool(threads), engine(options) {
    engine.validate();
  }
  std::unique_ptr<Model> model;
  ThreadPool pool;
  EngineOptions engine;
  std::mutex busy;
};

template <class Work>
auto run_engine(ModelState& state, Work&& work) {
  py::gil_scoped_release no_gil;
  std::lock_guard<std::mutex> lock(state.busy);
  return work();
}

// Text the engine produced as a Python str; bytes that are not UTF-8 (a character cut by the
// token limit) become U+FFFD, as `kvslim generate --json` writes them.
py::str utf8_text(const std::string& text);

// The method a call asks for: press (None, a registry name such as "snapkv" or "adakv:tova", or
// a kvslim.Press instance), budget or ratio, prefill_evict and the method's options as keyword
// arguments (values turned into the text --press-opt takes). LookaheadKV without an adapter
// option takes MODEL.lookahead.gguf beside `model_path`, as generate, chat and serve do.
// Checked at once (kvslim.Error).
CompressionOptions compression_from(const py::object& press, std::optional<int64_t> budget, std::optional<double> ratio,
                                    const std::string& prefill_evict, const py::dict& options,
                                    const std::string& model_path);

}  // namespace kvslim::python
