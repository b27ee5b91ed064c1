// Internal helpers shared by the tensor kernels (not part of the model-facing API).
#pragma once

#include <atomic>
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

// The block types q4_0 .. q6_k, iq4_nl, iq4_xs, mxfp4 (n a multiple of the type's block size): ggml's reference
// quantisers without importance matrix (quantize_blocks.cpp, quantize_k.cpp, quantize_iq4.cpp) and the exact
// dequantisation (dequantize_blocks.cpp).
void quantize_row_blocks(DType type, const float* x, void* y, int64_t n);
void dequantize_row_blocks(DType type, const void* x, float* y, int64_t n);
// The K-quant quantisers, `nb` super-blocks of 256 values each (quantize_k.cpp).
void quantize_row_q2_k(const float* x, BlockQ2_K* y, int64_t nb);
void quantize_row_q3_k(const float* x, BlockQ3_K* y, int64_t nb);
void quantize_row_q4_k(const float* x, BlockQ4_K* y, int64_t nb);
void quantize_row_q5_k(const float* x, BlockQ5_K* y, int64_t nb);
void quantize_row_q6_k(const float* x, BlockQ6_K* y, int64_t nb);
// The iq4 quantisers, `nb` blocks of 32 (iq4_nl) or 256 (iq4_xs) values (quantize_iq4.cpp).
void quantize_row_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t nb);
void quantize_row_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t nb);
// The mxfp4 quantiser, `nb` blocks of 32 values (quantize_mxfp4.cpp).
void quantize_row_mxfp4(const float* x, BlockMXFP4* y, int64_t nb);

// X and Y of one GEMM (the f32 GEMM of matmul.cpp, the AMX-BF16 one): n rows of X, ldx floats
// apart; Y rows ldy floats apart, overwritten or (accumulate) added to.
struct GemmOperands {
  const float* x;
  int64_t ldx, n;
  float* y;
  int64_t ldy;
  bool accumulate;
};

// A 64-byte aligned buffer that grows on demand and is never shrunk; used thread-locally so that
// hot kernels allocate only on their first call.
class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { ::operator delete (data_, std::align_val_t{64}); }

  void* get(size_t bytes) {
    if (bytes > capacity_) {
      ::operator delete (data_, std::align_val_t{64});
      data_ = nullptr;
      capacity_ = 0;
      size_t cap = (bytes + 4095) & ~size_t{4095};
      data_ = ::operator new (cap, std::align_val_t{64});
      capacity_ = cap;
    }
    return data_;
  }

 private:
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

inline size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

// Hands out [0, n) in chunks to whichever thread asks next. Kernels split work this way rather
// than statically so that a thread that is descheduled (a busy machine) or slower does not
// hold the others up; each item is still computed by exactly one thread in a fixed way, so
// results do not depend on the split.
class ChunkQueue {
 public:
  ChunkQueue(int64_t n, int64_t chunk) : n_(n), chunk_(chunk < 1 ? 1 : chunk) {}
  bool pop(int64_t& begin, int64_t& end) {
    begin = next_.fetch_add(chunk_, std::memory_order_relaxed);
    if (begin >= n_) return false;
    end = begin + chunk_ < n_ ? begin + chunk_ : n_;
    return true;
  }

 private:
  const int64_t n_, chunk_;
  std::atomic<int64_t> next_{0};
};

// Hands out [0, n) in shrinking chunks: each claim takes 1/divisor of what is left, but at
// least min_chunk. Big chunks first keep the claims few; small ones at the end leave the
// threads finishing within one small chunk of each other (decode's matvecs, where a thread
// waiting at the end of each of ~80 dispatches a token is bandwidth lost). Like ChunkQueue, it
// changes only which thread computes an item, never how.
class GuidedQueue {
 public:
  GuidedQueue(int64_t n, int64_t min_chunk, int64_t divisor)
      : n_(n), min_(min_chunk < 1 ? 1 : min_chunk), div_(divisor < 1 ? 1 : divisor) {}
  bool pop(int64_t& begin, int64_t& end) {
    int64_t b = next_.load(std::memory_order_relaxed);
    for (;;) {
      if (b >= n_) return false;
      const int64_t size = (n_ - b) / div_ > min_ ? (n_ - b) / div_ : min_;
      const int64_t e = n_ - b > size ? b + size : n_;
      if (next_.compare_exchange_weak(b, e, std::memory_order_relaxed)) {
        begin = b;
        end = e;
        return true;
      }
    }
  }

 private:
  const int64_t n_, min_, div_;
  std::atomic<int64_t> next_{0};
};

// Prefetches the cache lines of columns [k0, k0 + kc) of rows [r0, r1) of a weight matrix, one
// slice (`part` of `parts`) at a time. GEMM loops call it once per micro-kernel call to pull the
// next weight panel out of DRAM while the current one is being computed on.
class PanelPrefetcher {
 public:
  PanelPrefetcher(const WeightView& w, int64_t r0, int64_t r1, int64_t k0, int64_t kc, int64_t parts)
      : base_(static_cast<const uint8_t*>(w.data)),
        stride_(row_bytes(w.type, w.cols)),
        off_(row_bytes(w.type, k0)),
        lines_((row_bytes(w.type, kc) + 63) / 64 + 1),
        r0_(r0),
        parts_(parts),
        total_(r1 > r0 ? static_cast<size_t>(r1 - r0) * lines_ : 0) {}

  void part(int64_t p) const {
    if (total_ == 0) return;
    const size_t b = total_ * static_cast<size_t>(p) / static_cast<size_t>(parts_);
    const size_t e = total_ * static_cast<size_t>(p + 1) / static_cast<size_t>(parts_);
    size_t row = b / lines_, line = b % lines_;
    const uint8_t* ptr = base_ + static_cast<size_t>(r0_ + static_cast<int64_t>(row)) * stride_ + off_;
    for (size_t i = b; i < e; ++i) {
      __builtin_prefetch(ptr + line * 64, 0, 3);
      // The empty volatile asm keeps the loop: GCC 12 deletes a loop whose only effect is
      // __builtin_prefetch once part() is inlined, and did so in every GEMM until 2026-12-06.
      __asm__ volatile("" : : "r"(ptr + line * 64));
      if (++line == lines_) {
        line = 0;
        ptr += stride_;
      }
    }
  }

 private:
  const uint8_t* base_;
  size_t stride_, off_, lines_;
  int64_t r0_, parts_;
  size_t total_;
};

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
// x rounded through that quantisation (out[i] = d * q), for kernels that compute in f32.
void round_through_q8_activations(const float* x, int64_t n, float* out);

}  // namespace kvslim::detail
