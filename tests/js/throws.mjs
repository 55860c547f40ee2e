// The suites' one check of the API's errors: fn must throw the library's own error class (a
// MaskAttnTypeError for TypeError, a MaskAttnRangeError for RangeError) naming `argument`, with
// every pattern (substring or RegExp) in its message. Returns the error.
import assert from 'node:assert/strict';
import { MaskAttnTypeError, MaskAttnRangeError } from 'maskattn';

export function throwsArg(fn, Type, argument, ...patterns) {
  let caught = null;
  try {
    fn();
  } catch (e) {
    caught = e;
  }
  assert.ok(caught, `expected a ${Type.name} for ${argument}, nothing was thrown`);
  assert.ok(caught instanceof Type, `expected a ${Type.name} for ${argument}, got ${caught?.name}: ${caught?.message}`);
  assert.ok(caught instanceof (Type === TypeError ? MaskAttnTypeError : MaskAttnRangeError), `the library's own error class: ${caught.message}`);
  assert.equal(caught.name, Type.name);
  assert.equal(caught.argument, argument, `argument of "${caught.message}"`);
  for (const p of patterns) {
    const ok = p instanceof RegExp ? p.test(caught.message) : caught.message.includes(p);
    assert.ok(ok, `message "${caught.message}" should contain ${p}`);
  }
  return caught;
}
