// Where POST /slots/{id}?action=save|restore may read and write: a plain file name inside
// --slot-save-path, never a path. The name is checked by its characters (no separators, no leading
// dot, so no "..") and the resolved path by its parent, so a symlink cannot lead outside either.
#pragma once

#include <filesystem>
#include <string>

namespace kvslim::server {

// Throws RequestError: 501 when the server has no --slot-save-path, 400 for a name that is not
// 1-128 characters of [A-Za-z0-9._-] starting with a letter or digit, or resolves outside the folder.
std::filesystem::path slot_file_path(const std::string& save_dir, const std::string& filename);

}  // namespace kvslim::server
