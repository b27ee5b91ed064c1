// The layer order of src/, written once: a folder may include its own headers and those of
// folders of a lower rank, never those of a folder at its own rank or above it. A new folder
// fails the test until it is given a place here (docs/architecture.md describes the layers).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

// Rank of each folder under src/, lowest first. Folders sharing a rank know nothing of each other.
const std::map<std::string, int>& layer_ranks() {
  static const std::map<std::string, int> ranks = {
      {"util", 0},      {"gguf", 1},       {"tensor", 2},
      {"tokenizer", 3}, {"kv", 4},  // the cache has its own shape struct (kv_shape.h): no model/ config
      {"model", 5},                 // also the LoRA and LookaheadKV adapter files, quantize_file/preset
      {"press", 6},     {"engine", 7},     {"chat", 8},
      {"tasks", 9},   // task generators, their scoring and the RNG, shared by eval/ and train/
      {"train", 10},  // below lookahead/: the LookaheadKV trainer uses its AdamW and gradient ops
      {"eval", 11},     {"lookahead", 11}, {"bench", 11},
      {"server", 12},   {"cli", 13},
  };
  return ranks;
}

struct Include {
  std::string file;  // relative to src/
  int line;
  std::string target_folder;
};

std::vector<Include> project_includes(const std::filesystem::path& src) {
  static const std::regex include_re(R"(^\s*#\s*include\s*"([a-z_0-9]+)/)");
  std::vector<Include> out;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(src)) {
    if (!entry.is_regular_file()) continue;
    const auto ext = entry.path().extension();
    if (ext != ".h" && ext != ".cpp") continue;
    std::ifstream in(entry.path());
    std::string text;
    int line_no = 0;
    while (std::getline(in, text)) {
      ++line_no;
      std::smatch m;
      if (std::regex_search(text, m, include_re))
        out.push_back({std::filesystem::relative(entry.path(), src).string(), line_no, m[1].str()});
    }
  }
  return out;
}

std::string folder_of(const std::string& relative_file) { return relative_file.substr(0, relative_file.find('/')); }

TEST(Layers, EveryFolderHasARank) {
  for (const auto& entry : std::filesystem::directory_iterator(KVSLIM_SOURCE_DIR "/src"))
    if (entry.is_directory()) {
      EXPECT_TRUE(layer_ranks().count(entry.path().filename().string()))
          << "src/" << entry.path().filename().string() << " has no place in the layer order (tests/test_layers.cpp)";
    }
}

TEST(Layers, EveryRankedFolderExists) {
  for (const auto& [folder, rank] : layer_ranks())
    EXPECT_TRUE(std::filesystem::is_directory(std::filesystem::path(KVSLIM_SOURCE_DIR "/src") / folder))
        << "tests/test_layers.cpp ranks src/" << folder << ", which does not exist";
}

TEST(Layers, IncludesPointOnlyDownward) {
  const auto includes = project_includes(KVSLIM_SOURCE_DIR "/src");
  ASSERT_GT(includes.size(), 100u) << "the scan found almost no includes; is KVSLIM_SOURCE_DIR right?";
  for (const auto& inc : includes) {
    const std::string from = folder_of(inc.file);
    if (from == inc.target_folder) continue;
    const auto f = layer_ranks().find(from), t = layer_ranks().find(inc.target_folder);
    if (f == layer_ranks().end() || t == layer_ranks().end()) continue;  // reported by EveryFolderHasARank
    EXPECT_LT(t->second, f->second) << "src/" << inc.file << ":" << inc.line << ": " << from << "/ (rank " << f->second
                                    << ") includes " << inc.target_folder << "/ (rank " << t->second
                                    << "), which is not below it in the layer order of tests/test_layers.cpp";
  }
}

// The scan itself: a file that includes a higher layer is caught (guards against a regex that
// matches nothing, which would make the test above pass vacuously).
TEST(Layers, ScanSeesIncludeDirectives) {
  const auto dir = std::filesystem::temp_directory_path() / ("kvslim_layers_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "kv");
  std::ofstream(dir / "kv" / "x.h") << "#pragma once\n  #include \"model/config.h\"\n#include <vector>\n";
  const auto found = project_includes(dir);
  std::filesystem::remove_all(dir);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].file, "kv/x.h");
  EXPECT_EQ(found[0].line, 2);
  EXPECT_EQ(found[0].target_folder, "model");
}

}  // namespace
