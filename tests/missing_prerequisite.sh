#!/bin/sh
# The CTest command of a test whose prerequisite CMake did not find (node, python3): skips (77,
# CTest's SKIP_RETURN_CODE) saying what is missing, except with CI=true, where every prerequisite
# is installed (scripts/install-deps.sh) and a missing one fails the test (tests/prerequisites.h
# is the same rule for the GoogleTest suites, tests/scale/scale_common.py for the scale tests).
if [ "${CI:-}" = true ]; then
  echo "error: $* (CI=true: a missing prerequisite fails the test)"
  exit 1
fi
echo "SKIPPED: $*"
exit 77
