#include "cli/model_files.h"

#include <filesystem>

namespace kvslim::cli {

std::string adapter_beside(const std::string& model) {
  std::filesystem::path p(model);
  p.replace_extension(".lookahead.gguf");
  return std::filesystem::exists(p) ? p.string() : "";
}

}  // namespace kvslim::cli
