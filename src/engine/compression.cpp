#include "engine/compression.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "model/lookahead_adapter.h"
#include "util/error.h"

namespace kvslim {

std::string_view to_string(PrefillEvict p) { return p == PrefillEvict::Block ? "block" : "end"; }

PrefillEvict parse_prefill_evict(std::string_view text) {
  if (text == "end") return PrefillEvict::End;
  if (text == "block") return PrefillEvict::Block;
  fail("--prefill-evict must be end or block (got '{}')", text);
}

void CompressionOptions::validate() const {
  if (budget && *budget <= 0) fail("--budget must be > 0 (got {})", *budget);
  if (ratio && !(*ratio >= 0 && *ratio < 1)) fail("--ratio must be in [0, 1) (got {})", *ratio);
  if (budget && ratio) fail("give --budget or --ratio, not both");
}

namespace {

bool has_option(const PressSpec& s, const std::string& key) {
  return std::any_of(s.info->options.begin(), s.info->options.end(), [&](const OptionSpec& o) { return o.key == key; });
}

bool names_option(const std::vector<std::string>& options, const std::string& key) {
  return std::any_of(options.begin(), options.end(), [&](const std::string& o) { return o.rfind(key + "=", 0) == 0; });
}

}  // namespace

void CompressionOptions::find_default_adapter(const std::string& model_path, const std::string& flag) {
  if (!flag.empty()) {
    if (!std::filesystem::is_regular_file(flag)) fail("--lookahead-adapter: no file '{}'", flag);
    default_adapter = adapter_sought = flag;
    return;
  }
  adapter_sought = adapter_path_beside(model_path);
  default_adapter = adapter_beside(model_path);
}

bool CompressionOptions::lacks_adapter() const {
  const PressSpec s = spec();
  return has_option(s, "adapter") && !names_option(press_options, "adapter") && default_adapter.empty();
}

std::vector<std::string> CompressionOptions::effective_options() const {
  const PressSpec s = spec();
  std::vector<std::string> options = press_options;
  if (has_option(s, "adapter") && !names_option(options, "adapter")) {
    // adapter_sought is empty where the command looks for none (perplexity, bench, inspect).
    if (default_adapter.empty() && adapter_sought.empty())
      fail("{} needs an adapter file: give --press-opt adapter=FILE (`kvslim train-lookahead` makes one)", press);
    if (default_adapter.empty())
      fail(
          "{} needs an adapter file and there is none: {} does not exist (give --lookahead-adapter FILE or "
          "--press-opt adapter=FILE; `kvslim train-lookahead` makes one)",
          press, adapter_sought);
    options.push_back("adapter=" + default_adapter);
  }
  if (prefill_evict != PrefillEvict::Block) return options;
  switch (s.can().block_eviction) {
    case BlockEviction::Always: return options;
    case BlockEviction::Option:
      // Given once, whatever --press-opt said: --prefill-evict block is the later word.
      std::erase_if(options, [](const std::string& o) { return o.rfind("prefill=", 0) == 0; });
      options.push_back("prefill=block");
      return options;
    case BlockEviction::None: break;
  }
  std::vector<std::string> always, option;
  for (const PressInfo& info : press_registry()) {
    if (info.can.block_eviction == BlockEviction::Always) always.push_back(info.name + " (always)");
    if (info.can.block_eviction == BlockEviction::Option) option.push_back(info.name);
  }
  fail("--prefill-evict block: method '{}' has no block-wise prefill eviction (methods with it: {}, {})", press,
       fmt::join(always, ", "), fmt::join(option, ", "));
}

std::unique_ptr<Press> CompressionOptions::make_press() const { return spec().make(effective_options()); }

PreparedCompression CompressionOptions::prepare() const {
  validate();
  PreparedCompression p{nullptr, spec(), effective_options(), budget, ratio};
  p.press = p.spec.make(p.options);
  if (budget) p.press->check_budget(*budget);
  return p;
}

CompressionOptions CompressionOptions::with_block_eviction_where_supported() const {
  CompressionOptions c = *this;
  if (c.prefill_evict == PrefillEvict::Block && spec().can().block_eviction == BlockEviction::None)
    c.prefill_evict = PrefillEvict::End;
  return c;
}

int64_t PreparedCompression::budget_for(int64_t n_prompt) const {
  if (budget) return *budget;
  if (ratio) return std::max<int64_t>(1, int64_t(std::floor(double(n_prompt) * (1.0 - *ratio))));
  return kNoBudget;
}

}  // namespace kvslim
