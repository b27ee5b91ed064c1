#!/bin/sh
# Every C++ file of the project is in its style (.clang-format at the root): clang-format would
# change nothing. Fix a failure with `clang-format -i FILE` on the files it names. Skips (77)
# without clang-format, except with CI=true (scripts/install-deps.sh installs it).
cd "$1" || exit 2
if ! command -v clang-format >/dev/null 2>&1; then
  exec tests/missing_prerequisite.sh "clang-format not found (scripts/install-deps.sh installs it)"
fi
find src tests bench python \( -name '*.cpp' -o -name '*.h' -o -name '*.inc' \) -not -path 'python/build/*' |
  sort | xargs clang-format --dry-run -Werror
