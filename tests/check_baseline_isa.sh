#!/usr/bin/env bash
# Checks that a portable x86-64 build of kvslim runs on any x86-64 CPU:
#   - outside the kernels of the instruction-set levels (functions in namespaces kvslim::isa_avx2,
#     isa_avxvnni, isa_avx512f, isa_avx512, isa_avx512bf16, chosen at run time only on CPUs that
#     have them),
#     the binary holds no instruction beyond the x86-64 baseline (SSE2): no VEX/EVEX-encoded
#     instruction (their mnemonics start with "v"), no BMI/LZCNT/POPCNT/MOVBE;
#   - the avx2 and avxvnni levels, which run on CPUs without AVX-512, hold no EVEX-encoded
#     instruction (first opcode byte 0x62 in 64-bit code);
#   - the avx2 and avx512f levels, which run on CPUs without VNNI, hold no vpdpbusd / vpdpwssd;
#   - no level but avx512bf16 holds an AVX512-BF16 instruction (their mnemonics contain "bf16").
# Prints the first offenders and exits 1 if there are any.
set -euo pipefail
binary="$1"
objdump -d -C "$binary" | awk -F'\t' '
  /^[0-9a-f]+ <.*>:$/ { fn = $0; next }
  NF >= 3 {
    split($3, parts, " ")
    op = parts[1]
    if (op == "{vex}") op = parts[2]
    level = fn ~ /kvslim::isa_avx2::/ ? "avx2" : fn ~ /kvslim::isa_avxvnni::/ ? "avxvnni" : \
            fn ~ /kvslim::isa_avx512f::/ ? "avx512f" : fn ~ /kvslim::isa_avx512::/ ? "avx512" : \
            fn ~ /kvslim::isa_avx512bf16::/ ? "avx512bf16" : ""
    if (level == "") {
      if (op ~ /^v[a-z]/ || op ~ /^(andn|bextr|blsi|blsmsk|blsr|bzhi|lzcnt|tzcnt|pdep|pext|rorx|sarx|shlx|shrx|mulx|popcnt|movbe)$/) {
        bad++
        if (bad <= 20) print "beyond the baseline: " op " in " fn
      }
    } else {
      if ((level == "avx2" || level == "avxvnni") && $2 ~ /^62 /) {
        bad++
        if (bad <= 20) print "AVX-512 (EVEX) instruction " op " in the " level " level: " fn
      } else if ((level == "avx2" || level == "avx512f") && op ~ /^vpdp(busd|wssd)/) {
        bad++
        if (bad <= 20) print "VNNI instruction " op " in the " level " level: " fn
      } else if (level != "avx512bf16" && op ~ /bf16/) {
        bad++
        if (bad <= 20) print "AVX512-BF16 instruction " op " in the " level " level: " fn
      }
    }
  }
  END {
    if (bad > 0) { print bad " instructions beyond what their code may use"; exit 1 }
    print "baseline code: no instruction beyond x86-64 (SSE2) outside the level kernels; no AVX-512 in avx2 / avxvnni; no VNNI in avx2 / avx512f; BF16 only in avx512bf16"
  }'
