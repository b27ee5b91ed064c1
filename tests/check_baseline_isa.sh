#!/usr/bin/env bash
# Checks that a portable x86-64 build of kvslim runs on any x86-64 CPU: outside the kernels of the
# instruction-set levels (functions in namespaces kvslim::isa_avx2, isa_avx512, isa_avx512bf16,
# chosen at run time only on CPUs that have them), the binary holds no instruction beyond the
# x86-64 baseline (SSE2): no VEX/EVEX-encoded instruction (their mnemonics start with "v"), no
# BMI/LZCNT/POPCNT/MOVBE. Prints the first offenders and exits 1 if there are any.
set -euo pipefail
binary="$1"
objdump -d --no-show-raw-insn -C "$binary" | awk '
  /^[0-9a-f]+ <.*>:$/ { fn = $0; next }
  NF >= 2 {
    op = $2
    if (op ~ /^v[a-z]/ || op ~ /^(andn|bextr|blsi|blsmsk|blsr|bzhi|lzcnt|tzcnt|pdep|pext|rorx|sarx|shlx|shrx|mulx|popcnt|movbe)$/) {
      if (fn ~ /kvslim::isa_(avx2|avx512|avx512bf16)::/) next
      bad++
      if (bad <= 20) print "beyond the baseline: " op " in " fn
    }
  }
  END {
    if (bad > 0) { print bad " instructions beyond the x86-64 baseline outside the level kernels"; exit 1 }
    print "baseline code: no instruction beyond x86-64 (SSE2) outside the level kernels"
  }'
