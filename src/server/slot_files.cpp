#include "server/slot_files.h"

#include <cctype>

#include "server/request_error.h"

namespace kvslim::server {

namespace fs = std::filesystem;

std::filesystem::path slot_file_path(const std::string& save_dir, const std::string& filename) {
  if (save_dir.empty())
    throw RequestError(501, "", "slot files are disabled: start the server with --slot-save-path DIR");
  const auto ok_char = [](unsigned char c) { return std::isalnum(c) || c == '.' || c == '_' || c == '-'; };
  bool valid = !filename.empty() && filename.size() <= 128 && std::isalnum(static_cast<unsigned char>(filename[0]));
  for (unsigned char c : filename) valid = valid && ok_char(c);
  if (!valid)
    bad_field("filename",
              "filename must be 1-128 characters of A-Z a-z 0-9 . _ - starting with a letter or digit "
              "(a name inside --slot-save-path, not a path)");
  std::error_code ec;
  const fs::path dir = fs::canonical(save_dir, ec);
  if (ec) throw RequestError(500, "", fmt::format("--slot-save-path '{}' is not usable: {}", save_dir, ec.message()));
  const fs::path path = fs::weakly_canonical(dir / filename, ec);
  if (ec || path.parent_path() != dir)
    bad_field("filename", "filename '{}' resolves outside --slot-save-path", filename);
  return path;
}

}  // namespace kvslim::server
