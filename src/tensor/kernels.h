// Internal helpers shared by the tensor kernels (not part of the model-facing API).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "tensor/dtype.h"

namespace kvslim::detail {

// Portable bit-exact conversions (the public fp16 functions use F16C when it is available;
// these are the reference they are tested against).
float fp16_to_fp32_portable(uint16_t h);
uint16_t fp32_to_fp16_portable(float f);

// ggml's reference q8_0 quantisation of `n` floats (n % 32 == 0) and its inverse.
void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n);
void dequantize_row_q8_0(const BlockQ8_0* x, float* y, int64_t n);

// A 64-byte aligned buffer that grows on demand and is never shrunk; used thread-locally so that
// hot kernels allocate only on their first call.
class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { ::operator delete(data_, std::align_val_t{64}); }

  void* get(size_t bytes) {
    if (bytes > capacity_) {
      ::operator delete(data_, std::align_val_t{64});
      data_ = nullptr;
      capacity_ = 0;
      size_t cap = (bytes + 4095) & ~size_t{4095};
      data_ = ::operator new(cap, std::align_val_t{64});
      capacity_ = cap;
    }
    return data_;
  }

 private:
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

inline size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

// Activations quantised to 8 bits in blocks of 32 for the int8 dot products of Q8_0 weights.
// q: the int8 values, n of them. scale: one float per block (value = scale * q), padded with
// zeros to a multiple of 16 blocks. lane_corr: for every group of 4 consecutive values,
// -128 * their sum (the correction that lets the kernels feed w + 128 as unsigned bytes to
// VNNI's u8 x s8 dot product).
struct Q8Activations {
  int8_t* q = nullptr;
  float* scale = nullptr;
  int32_t* lane_corr = nullptr;
  int64_t n = 0;
};

// Bytes of scratch needed by quantize_activations for `n` values.
size_t q8_activation_bytes(int64_t n);
// Quantises x (n % 32 == 0) into `buffer` (q8_activation_bytes(n) bytes, 64-byte aligned):
// d = amax / 127 kept in float, q = round-to-nearest(x / d).
Q8Activations quantize_activations(const float* x, int64_t n, void* buffer);

}  // namespace kvslim::detail
