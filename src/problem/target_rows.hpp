// The target table's columns that the kernels and dispatch both read (maskattn/targets.inc), as
// constexpr rows: one definition of the automatic kernel choice for both.
#pragma once

#include "maskattn/maskattn.hpp"
#include "problem/problem.hpp"

namespace maskattn::detail {

struct TargetRow {
  Target target;
  int decode_rows;  // the decode kernel's limit with float32 K and V (rows per KV head group)
  bool integer_pv;  // P·V over q8/q4 values in integers
};

inline constexpr TargetRow kTargetRows[] = {
#define MASKATTN_TARGET(name, lanes, preference, family, arch, int_dot, cpu_check, simd, decode_rows, int_pv, flags) \
  {Target::name, decode_rows, int_pv},
#include "maskattn/targets.inc"
#undef MASKATTN_TARGET
};

// The row of a kernel target (not automatic, not reference: nullptr).
constexpr const TargetRow* target_row(Target t) {
  for (const TargetRow& row : kTargetRows)
    if (row.target == t) return &row;
  return nullptr;
}

// The automatic kernel choice: the decode kernel when a KV head group has at most this many query
// rows (Hq / Hkv x Lq), else the prefill kernel. KV caches of float16, bfloat16, q8 and q4 take
// kDecodeMaxRows on every target (the decode kernel reads them as stored, integer dot products
// included; the prefill kernel converts them to float); float32 K and V take the row's
// decode_rows. The reference (no row) takes kDecodeMaxRows.
constexpr int decode_rows(Target t, bool float_kv) {
  const TargetRow* row = target_row(t);
  return float_kv && row ? row->decode_rows : kDecodeMaxRows;
}

}  // namespace maskattn::detail
