#include "engine/compression.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace kvslim {

void CompressionOptions::validate() const {
  if (budget && *budget <= 0) fail("--budget must be > 0 (got {})", *budget);
  if (ratio && !(*ratio >= 0 && *ratio < 1)) fail("--ratio must be in [0, 1) (got {})", *ratio);
  if (budget && ratio) fail("give --budget or --ratio, not both");
  if (prefill_evict != "end" && prefill_evict != "block")
    fail("--prefill-evict must be end or block (got '{}')", prefill_evict);
}

std::vector<std::string> CompressionOptions::effective_options() const {
  const PressSpec s = spec();
  std::vector<std::string> options = press_options;
  if (prefill_evict != "block") return options;
  switch (s.can().block_eviction) {
    case BlockEviction::Always:
      return options;
    case BlockEviction::Option:
      // Given once, whatever --press-opt said: --prefill-evict block is the later word.
      std::erase_if(options, [](const std::string& o) { return o.rfind("prefill=", 0) == 0; });
      options.push_back("prefill=block");
      return options;
    case BlockEviction::None:
      break;
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
  if (c.prefill_evict == "block" && spec().can().block_eviction == BlockEviction::None) c.prefill_evict = "end";
  return c;
}

int64_t PreparedCompression::budget_for(int64_t n_prompt) const {
  if (budget) return *budget;
  if (ratio) return std::max<int64_t>(1, int64_t(std::floor(double(n_prompt) * (1.0 - *ratio))));
  return kNoBudget;
}

}  // namespace kvslim
