// The page served at `/`: chat with the model, choose the method and budget, and see which prompt
// positions each layer and KV head kept for the last answer. Plain HTML/JS/SVG, no external network.
#pragma once

#include <string>

namespace kvslim::server {

const std::string& web_page_html();

}  // namespace kvslim::server
