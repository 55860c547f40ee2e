// The JS mask-building helpers (js/masks.js): values, argument errors, and that each built mask
// passed as `allowed` (or, via toAdditiveMask, as `bias`) gives the same attention as the equivalent
// compact option, on both wasm builds.
import test from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import {
  init, createCausalMask, createPaddingMask, createWindowMask, segmentsFromLengths, fromKeyPaddingMask, toAdditiveMask,
  MaskAttnTypeError, MaskAttnRangeError,
} from '../../js/index.js';
import * as direct from '../../js/masks.js';
import { rng as rng01 } from './reference.mjs';

const bits = (s) => Uint8Array.from(s.replace(/[^01]/g, ''), Number);
const builds = [['simd', await init()], ['scalar', await init({ simd: false })]];

// The shared seeded generator, on [-1, 1).
function rng(seed) {
  const unit = rng01(seed);
  return () => unit() * 2 - 1;
}
function problem([B, Hq, Hkv, Lq, Lk, D], seed) {
  const r = rng(seed);
  const t = (shape) => ({ data: Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, r), shape });
  return { q: t([B, Hq, Lq, D]), k: t([B, Hkv, Lk, D]), v: t([B, Hkv, Lk, D]) };
}

// Same attention up to fp32 rounding; masked-out zeros exactly zero, never NaN.
function assertSame(actual, expected, label) {
  assert.equal(actual.length, expected.length, label);
  for (let i = 0; i < actual.length; ++i) {
    assert.ok(!Number.isNaN(actual[i]) && !Number.isNaN(expected[i]), `${label}[${i}]: NaN`);
    assert.ok(Math.abs(actual[i] - expected[i]) <= 2e-6 * Math.max(1, Math.abs(expected[i])),
      `${label}[${i}]: ${actual[i]} vs ${expected[i]}`);
    if (expected[i] === 0) assert.equal(actual[i], 0, `${label}[${i}]: fully masked row must stay 0`);
  }
}
function compare(p, denseOptions, ruleOptions, label) {
  for (const [name, ma] of builds) {
    const expected = ma.attention(p.q, p.k, p.v, ruleOptions).output.data;
    for (const [kind, opt] of Object.entries(denseOptions))
      assertSame(ma.attention(p.q, p.k, p.v, opt).output.data, expected, `${label} ${kind} on ${name}`);
  }
}

// Checks the thrown error's class, JS kind and `argument`.
function throwsArg(fn, Kind, argument, fragment) {
  assert.throws(fn, (e) => {
    assert.ok(e instanceof (Kind === TypeError ? MaskAttnTypeError : MaskAttnRangeError), `${e?.name}: ${e?.message}`);
    assert.ok(e instanceof Kind);
    assert.equal(e.argument, argument, e.message);
    if (fragment) assert.ok(e.message.includes(fragment), `message '${e.message}' lacks '${fragment}'`);
    return true;
  });
}

// ------------------------------------------------------------------------------------ values

test('createCausalMask values, both alignments', () => {
  assert.deepEqual(createCausalMask(3, 3), { data: bits('100 110 111'), shape: [3, 3] });
  assert.deepEqual(createCausalMask(2, 4).data, bits('1110 1111'));
  assert.deepEqual(createCausalMask(2, 4, { align: 'top-left' }).data, bits('1000 1100'));
  assert.deepEqual(createCausalMask(4, 2), { data: bits('00 00 10 11'), shape: [4, 2] });
  assert.deepEqual(createCausalMask(4, 2, { align: 'top-left' }).data, bits('10 11 11 11'));
  assert.deepEqual(createCausalMask(1, 5, { align: 'bottom-right' }).data, bits('11111'));
  assert.deepEqual(createCausalMask(0, 5), { data: new Uint8Array(0), shape: [0, 5] });
});

test('createPaddingMask values and [B, 1, 1, L] shape', () => {
  assert.deepEqual(createPaddingMask([3, 0, 5, 1], 5), { data: bits('11100 00000 11111 10000'), shape: [4, 1, 1, 5] });
  assert.deepEqual(createPaddingMask(Int32Array.of(2), 3), { data: bits('110'), shape: [1, 1, 1, 3] });
  assert.deepEqual(createPaddingMask([], 4), { data: new Uint8Array(0), shape: [0, 1, 1, 4] });
});

test('createWindowMask values', () => {
  for (const align of ['bottom-right', 'top-left']) {
    assert.deepEqual(createWindowMask(5, 5, [1, 0], { align }).data, bits('10000 11000 01100 00110 00011'));
    assert.deepEqual(createWindowMask(5, 5, [0, 1], { align }).data, bits('11000 01100 00110 00011 00001'));
    assert.deepEqual(createWindowMask(5, 5, [-1, -1], { align }).data, new Uint8Array(25).fill(1));
    assert.deepEqual(createWindowMask(5, 5, [-1, 0], { align }).data, createCausalMask(5, 5, { align }).data);
    assert.deepEqual(createWindowMask(5, 5, [2, -1], { align }).data, bits('11111 11111 11111 01111 00111'));
  }
  assert.deepEqual(createWindowMask(2, 4, [1, 0]), { data: bits('0110 0011'), shape: [2, 4] });
  assert.deepEqual(createWindowMask(2, 4, [1, 0], { align: 'top-left' }).data, bits('1000 1100'));
  assert.deepEqual(createWindowMask(4, 2, Int32Array.of(0, 1)).data, bits('00 10 11 01'));
});

test('segmentsFromLengths values', () => {
  assert.deepEqual(segmentsFromLengths([3, 0, 2], 7), Int32Array.of(0, 0, 0, 2, 2, -1, -1));
  assert.deepEqual(segmentsFromLengths(Int32Array.of(2, 2), 4), Int32Array.of(0, 0, 1, 1));
  assert.deepEqual(segmentsFromLengths([], 3), Int32Array.of(-1, -1, -1));
});

test('fromKeyPaddingMask inverts the polarity explicitly; [B, Lk] becomes [B, 1, 1, Lk]', () => {
  assert.deepEqual(fromKeyPaddingMask({ data: Uint8Array.of(0, 1, 0, 2, 255, 0), shape: [2, 3] }), { data: bits('101 001'), shape: [2, 1, 1, 3] });
  assert.deepEqual(fromKeyPaddingMask({ data: [false, true, true], dims: [3] }), { data: bits('100'), shape: [3] });
  assert.deepEqual(fromKeyPaddingMask({ data: [0, 1, 0, 0], shape: [1, 1, 1, 4] }).shape, [1, 1, 1, 4]);
  // Round trip: PyTorch "ignore the padding" == createPaddingMask.
  assert.deepEqual(fromKeyPaddingMask({ data: bits('00011 01111'), shape: [2, 5] }), createPaddingMask([3, 1], 5));
});

test('toAdditiveMask gives 0 / -Infinity with the same shape', () => {
  const r = toAdditiveMask({ data: Uint8Array.of(1, 0, 7, 0), shape: [2, 2] });
  assert.ok(r.data instanceof Float32Array);
  assert.deepEqual(Array.from(r.data), [0, -Infinity, 0, -Infinity]);
  assert.ok(Object.is(r.data[0], 0));
  assert.deepEqual(r.shape, [2, 2]);
  assert.deepEqual(toAdditiveMask({ data: new Uint8Array(3), dims: [3] }).shape, [3]);
});

test('the helpers are the same functions from js/index.js and js/masks.js', () => {
  for (const name of ['createCausalMask', 'createPaddingMask', 'createWindowMask', 'segmentsFromLengths', 'fromKeyPaddingMask', 'toAdditiveMask'])
    assert.equal(direct[name], { createCausalMask, createPaddingMask, createWindowMask, segmentsFromLengths, fromKeyPaddingMask, toAdditiveMask }[name]);
});

test('importing js/masks.js first (circular import with index.js) still throws the API errors', () => {
  const url = new URL('../../js/masks.js', import.meta.url).href;
  const script = `import(${JSON.stringify(url)}).then((m) => { try { m.createCausalMask(-1, 2); } catch (e) { console.log(e.constructor.name, e.argument); } })`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: fileURLToPath(new URL('.', import.meta.url)) }).toString().trim();
  assert.equal(out, 'MaskAttnRangeError Lq');
});

// ------------------------------------------------------------------------------------ errors

test('argument errors: TypeError / RangeError naming the argument', () => {
  throwsArg(() => createCausalMask(-1, 4), RangeError, 'Lq', 'given -1');
  throwsArg(() => createCausalMask(2.5, 4), RangeError, 'Lq', 'given 2.5');
  throwsArg(() => createCausalMask('3', 4), TypeError, 'Lq', 'string 3');
  throwsArg(() => createCausalMask(4, 2 ** 53), RangeError, 'Lk', 'given 9007199254740992');
  throwsArg(() => createCausalMask(2, 2, { align: 'top-right' }), TypeError, 'align', 'top-right');
  throwsArg(() => createCausalMask(2, 2, 'top-left'), TypeError, 'options');
  throwsArg(() => createCausalMask(2, 2, { alignment: 'top-left' }), TypeError, 'options', 'alignment');
  throwsArg(() => createCausalMask(2 ** 23, 2 ** 23), RangeError, 'Lq', 'bytes');

  throwsArg(() => createPaddingMask([3, 6], 5), RangeError, 'lengths[1]', 'given 6');
  throwsArg(() => createPaddingMask([-1], 5), RangeError, 'lengths[0]', 'given -1');
  throwsArg(() => createPaddingMask([1.5], 5), RangeError, 'lengths[0]');
  throwsArg(() => createPaddingMask(['1'], 5), TypeError, 'lengths[0]');
  throwsArg(() => createPaddingMask(Float32Array.of(1), 5), TypeError, 'lengths', 'Float32Array');
  throwsArg(() => createPaddingMask([1], -2), RangeError, 'L', 'given -2');

  throwsArg(() => createWindowMask(3, 3, [-2, 0]), RangeError, 'window', 'left');
  throwsArg(() => createWindowMask(3, 3, [0, -5]), RangeError, 'window', 'right');
  throwsArg(() => createWindowMask(3, 3, [0]), TypeError, 'window');
  throwsArg(() => createWindowMask(3, 3, 2), TypeError, 'window');
  throwsArg(() => createWindowMask(3, 3, [0, null]), TypeError, 'window', 'right');
  throwsArg(() => createWindowMask(-1, 3, [0, 0]), RangeError, 'Lq');

  throwsArg(() => segmentsFromLengths([2, -1], 5), RangeError, 'lengths[1]', 'given -1');
  throwsArg(() => segmentsFromLengths([3, 3], 5), RangeError, 'lengths', 'L = 5');
  throwsArg(() => segmentsFromLengths([1], -1), RangeError, 'L');
  throwsArg(() => segmentsFromLengths(null, 4), TypeError, 'lengths');

  throwsArg(() => fromKeyPaddingMask(null), TypeError, 'keyPaddingMask');
  throwsArg(() => fromKeyPaddingMask({ data: new Float32Array(2), shape: [2] }), TypeError, 'keyPaddingMask.data', 'Float32Array');
  throwsArg(() => fromKeyPaddingMask({ data: new Uint8Array(3), shape: [2, 2] }), RangeError, 'keyPaddingMask.data', 'length must be 4');
  throwsArg(() => fromKeyPaddingMask({ data: [0, 'x'], shape: [2] }), TypeError, 'keyPaddingMask.data[1]');
  throwsArg(() => fromKeyPaddingMask({ data: new Uint8Array(2) }), TypeError, 'keyPaddingMask.shape');

  throwsArg(() => toAdditiveMask({ data: [1, 0], shape: [2] }), TypeError, 'allowed.data');
  throwsArg(() => toAdditiveMask({ data: new Uint8Array(2), shape: [3] }), RangeError, 'allowed.data');
  throwsArg(() => toAdditiveMask({ data: new Uint8Array(2), shape: [-2] }), RangeError, 'allowed.shape');
});

// ------------------------------------------------------------ built masks == compact options

test('createCausalMask as allowed (and as additive bias) == { causal: true, align }', () => {
  for (const [n, [Lq, Lk]] of [[5, 5], [3, 9], [9, 3], [17, 33], [1, 65], [64, 64], [33, 16]].entries()) {
    const p = problem([2, 4, 2, Lq, Lk, 16], 10 + n);
    for (const align of ['bottom-right', 'top-left']) {
      const mask = createCausalMask(Lq, Lk, { align });
      compare(p, { allowed: { allowed: mask }, bias: { bias: toAdditiveMask(mask) } }, { causal: true, align }, `causal ${Lq}x${Lk} ${align}`);
    }
  }
});

test('createPaddingMask / fromKeyPaddingMask as allowed == { keyLengths }', () => {
  for (const [n, Lk] of [1, 7, 16, 33, 129].entries()) {
    const lengths = [0, Lk, Lk >> 1, 1];
    const p = problem([4, 2, 1, 5, Lk, 8], 100 + n);
    const mask = createPaddingMask(lengths, Lk);
    // The same padding in PyTorch polarity ([B, Lk], true = ignore).
    const ignore = { data: Array.from({ length: 4 * Lk }, (_, i) => i % Lk >= lengths[Math.floor(i / Lk)]), shape: [4, Lk] };
    const converted = fromKeyPaddingMask(ignore);
    assert.deepEqual(converted, mask);
    compare(p, { allowed: { allowed: mask }, pytorch: { allowed: converted }, bias: { bias: toAdditiveMask(mask) } }, { keyLengths: lengths }, `padding Lk=${Lk}`);
  }
});

test('createWindowMask as allowed == { window, align }', () => {
  for (const [n, [Lq, Lk]] of [[8, 8], [4, 19], [19, 4], [65, 65], [1, 40]].entries()) {
    const p = problem([1, 2, 2, Lq, Lk, 8], 200 + n);
    for (const window of [[0, 0], [2, 0], [0, 3], [-1, 2], [5, -1], [-1, -1], [16, 16]])
      for (const align of ['bottom-right', 'top-left']) {
        const mask = createWindowMask(Lq, Lk, window, { align });
        compare(p, { allowed: { allowed: mask } }, { window, align }, `window [${window}] ${Lq}x${Lk} ${align}`);
      }
  }
});

test('segmentsFromLengths as segments == the block-diagonal allowed mask', () => {
  const docs = [3, 0, 5, 2, 7];
  const L = 21;
  const used = 17;
  const ids = segmentsFromLengths(docs, L);
  const p = problem([1, 2, 1, L, L, 8], 300);
  const block = { data: new Uint8Array(L * L), shape: [L, L] };
  const sameId = { data: new Uint8Array(L * L), shape: [L, L] };
  for (let i = 0; i < L; ++i)
    for (let j = 0; j < L; ++j) {
      sameId.data[i * L + j] = ids[i] === ids[j] ? 1 : 0;
      block.data[i * L + j] = ids[i] === ids[j] && ids[i] >= 0 ? 1 : 0;
    }
  const segments = { query: ids, key: ids };
  compare(p, { allowed: { allowed: block } }, { segments, keyLengths: [used], queryLengths: [used] }, 'segments + lengths');
  // Segments alone: the tail's -1 ids match each other (documented).
  compare(p, { allowed: { allowed: sameId } }, { segments }, 'segments only');
  // A packed causal LM batch.
  const causal = createCausalMask(L, L);
  const both = { data: block.data.map((x, i) => x & causal.data[i]), shape: [L, L] };
  compare(p, { allowed: { allowed: both } }, { segments, keyLengths: [used], queryLengths: [used], causal: true }, 'segments + lengths + causal');
});
