# Cross build for aarch64 Linux with Debian's cross compiler and the arm64 multiarch packages
# (scripts/install-arm-deps.sh installs both). Usage:
#   cmake -S . -B build-arm -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
#         -DKVSLIM_BUILD_BENCHMARKS=OFF
# The binaries run under qemu-user: qemu-aarch64 build-arm/kvslim_tests
# (scripts/test-arm.sh).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Debian multiarch: the arm64 libraries live in /usr/lib/aarch64-linux-gnu and their headers in
# /usr/include (shared with the host) or /usr/include/aarch64-linux-gnu. CMake's search paths
# already add the lib/<CMAKE_LIBRARY_ARCHITECTURE> suffix; what must be kept out is the host's
# x86-64 libraries, which live in other directories, so no sysroot is needed.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# pkg-config (cpp-httplib): read the arm64 .pc files, not the host's.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

# Test discovery runs the test binary: through qemu, which finds the multiarch arm64 loader
# (libc6:arm64) itself. Not -L /usr/aarch64-linux-gnu: with the cross libc there, Debian 12's
# qemu 7.2 hangs at the process's first std::thread.
find_program(KVSLIM_QEMU_AARCH64 qemu-aarch64)
if(KVSLIM_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${KVSLIM_QEMU_AARCH64})
endif()
