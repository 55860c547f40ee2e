// The tolerance policy (docs/semantics.md "Numbers"): reference.mjs mismatch() on the cases the C++
// suite runs through compare_to_reference (tests/tolerance_cases.inc): one policy, and the two
// implementations agree case by case.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { mismatch } from './reference.mjs';

// The C++ initializer list as JSON: comments dropped, braces to brackets, NAN and INFINITY named.
function cases() {
  const text = readFileSync(new URL('../tolerance_cases.inc', import.meta.url), 'utf8')
    .split('\n').filter((l) => !l.trim().startsWith('//')).join('\n')
    .replace(/\{/g, '[').replace(/\}/g, ']').replace(/-INFINITY/g, '"-inf"').replace(/INFINITY/g, '"inf"').replace(/NAN/g, '"nan"')
    .replace(/,\s*$/, '');
  const value = (x) => (x === 'nan' ? NaN : x === 'inf' ? Infinity : x === '-inf' ? -Infinity : x);
  return JSON.parse(`[${text}]`).map(([name, floor, cap, relFloor, got, fp64, fp32, passes]) =>
    ({ name, floor, cap, relFloor, got: Float32Array.from(got.map(value)), fp64: fp64.map(value), fp32: fp32.map(value), passes }));
}

test('the shared tolerance cases: mismatch() agrees with the C++ suite', () => {
  const all = cases();
  assert.ok(all.length >= 15);
  for (const c of all) {
    const result = mismatch(c.got, c.fp64, { floor: c.floor, cap: c.cap, relFloor: c.relFloor, naive: c.fp32.length ? c.fp32 : null });
    assert.equal(result === null, c.passes, `${c.name}: ${result}`);
  }
});
