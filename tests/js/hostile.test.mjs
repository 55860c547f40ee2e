// Hostile input, JavaScript side: a table of mistakes and attacks, each row one call that must be
// refused. For every row (on every WebAssembly build, the threaded ones included):
//   - the error is the library's own TypeError / RangeError (MaskAttnTypeError / MaskAttnRangeError)
//     of the expected kind, its `argument` names the culprit, its message says what matters;
//   - nothing was written: the heap guard (heap-guard.mjs) checks canary blocks around where a
//     call's blocks land, a witness Workspace and KV cache, that every block was freed, that wasm
//     memory did not grow, and, for calls refused before wasm was entered, every byte of memory.
// Rows: getters and Proxies on tensors, masks and options (read once: a getter that changes its
// answer cannot make a check and a copy disagree); prototype pollution; detached, resizable and
// SharedArrayBuffer-backed arrays; wrong typed-array kinds; shapes with negatives, NaN, fractions,
// null, strings, >= 2^31 and products overflowing 32 and 64 bits; every item of the contract's
// "Bad input"; every KV-cache and Workspace misuse. Tests after the table check what must work:
// getters read once, pollution without effect, limits from the library, wasm views as inputs.
import { BUILDS } from './builds.mjs';  // first: turns on relaxed SIMD in Node 20
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { init, MaskAttnTypeError, MaskAttnRangeError } from 'maskattn';
import { heapGuard } from './heap-guard.mjs';

const tensor = (shape, fill = 0.5, Type = Float32Array) => ({ data: new Type(shape.reduce((a, b) => a * b, 1)).fill(fill), shape });
const Q = [1, 2, 3, 4];  // [B, Hq, Lq, D]
const K = [1, 1, 5, 4];  // [B, Hkv, Lk, D]
const base = () => ({ q: tensor(Q, 0.25), k: tensor(K, -0.5), v: tensor(K, 1) });

// A getter that answers `answers[n]` on its n-th read (the last one from then on), counting reads.
function changing(answers) {
  const state = { reads: 0 };
  state.get = () => answers[Math.min(state.reads++, answers.length - 1)];
  return state;
}
function withGetter(obj, key, answers) {
  const g = changing(answers);
  Object.defineProperty(obj, key, { get: g.get, enumerable: true, configurable: true });
  return g;
}
function detach(typed) {
  structuredClone(typed.buffer, { transfer: [typed.buffer] });
  return typed;
}
const readsOnce = (state) => assert.equal(state.reads, 1, 'the getter must be read exactly once');

// [name, { setup(ctx) -> state, call(ctx, state), type, arg, says, after(state), cleanup(state) }]
const ROWS = [
  // ---------------------------------------------------------------- getters and Proxies: tensors
  ['q.data getter: a short array first, then the right one', {
    setup: () => { const q = tensor(Q); return { q, g: withGetter(q, 'data', [new Float32Array(2), new Float32Array(24)]) }; },
    call: ({ ma, k, v }, s) => ma.attention(s.q, k, v), type: RangeError, arg: 'q.data', says: ['24', 'given 2'], after: (s) => readsOnce(s.g),
  }],
  ['k.data getter: a long array first, then the right one', {
    setup: () => { const k = tensor(K); return { k, g: withGetter(k, 'data', [new Float32Array(4096), new Float32Array(20)]) }; },
    call: ({ ma, q, v }, s) => ma.attention(q, s.k, v), type: RangeError, arg: 'k.data', says: ['20', 'given 4096'], after: (s) => readsOnce(s.g),
  }],
  ['q is a Proxy whose data answer changes (short first)', {
    setup: () => {
      const g = changing([new Float32Array(1), new Float32Array(24)]);
      return { g, q: new Proxy(tensor(Q), { get: (t, key) => (key === 'data' ? g.get() : t[key]) }) };
    },
    call: ({ ma, k, v }, s) => ma.attention(s.q, k, v), type: RangeError, arg: 'q.data', says: ['given 1'], after: (s) => readsOnce(s.g),
  }],
  ['q.data is a Proxy around a Float32Array', {
    call: ({ ma, k, v }) => ma.attention({ data: new Proxy(new Float32Array(24), {}), shape: Q }, k, v), type: TypeError, arg: 'q.data', says: ['Float32Array'],
  }],
  ['q.data is a Proxy that lies about its length', {
    call: ({ ma, k, v }) => ma.attention({ data: new Proxy(new Float32Array(2), { get: (t, key) => (key === 'length' ? 24 : t[key]) }), shape: Q }, k, v),
    type: TypeError, arg: 'q.data',
  }],
  ['q.data: a Float32Array subclass whose length getter says 24, holding 2', {
    call: ({ ma, k, v }) => {
      class Liar extends Float32Array { get length() { return 24; } get byteLength() { return 96; } }
      return ma.attention({ data: new Liar(2), shape: Q }, k, v);
    },
    type: RangeError, arg: 'q.data', says: ['given 2'],
  }],
  ['v.data: a Float32Array subclass lying with a huge length', {
    call: ({ ma, q, k }) => {
      class Liar extends Float32Array { get length() { return 2 ** 40; } }
      return ma.attention(q, k, { data: new Liar(20 - 1), shape: K });
    },
    type: RangeError, arg: 'v.data', says: ['given 19'],
  }],
  ['k.data: a Float32Array subclass holding 65536 floats, claiming 20 (a copy would overrun its block)', {
    call: ({ ma, q, v }) => {
      class Liar extends Float32Array { get length() { return 20; } get byteLength() { return 80; } }
      return ma.attention(q, { data: new Liar(65536).fill(3), shape: K }, v);
    },
    type: RangeError, arg: 'k.data', says: ['given 65536'],
  }],
  ['allowed.data: a Uint8Array subclass holding 65536 bytes, claiming 15', {
    call: ({ ma, q, k, v }) => {
      class Liar extends Uint8Array { get length() { return 15; } get byteLength() { return 15; } }
      return ma.attention(q, k, v, { allowed: { data: new Liar(65536).fill(1), shape: [3, 5] } });
    },
    type: RangeError, arg: 'allowed.data', says: ['given 65536'],
  }],
  ['q.shape getter: a wrong shape first, then the right one', {
    setup: () => { const q = tensor(Q); return { q, g: withGetter(q, 'shape', [[1, 2, 3, 400], Q]) }; },
    call: ({ ma, k, v }, s) => ma.attention(s.q, k, v), type: RangeError, arg: 'q.data', says: ['2400'], after: (s) => readsOnce(s.g),
  }],
  ['q.shape is a Proxy claiming a billion dimensions (must not loop)', {
    call: ({ ma, k, v }) => ma.attention({ data: new Float32Array(24), shape: new Proxy([1, 2, 3, 4], { get: (t, key) => (key === 'length' ? 1e9 : t[key]) }) }, k, v),
    type: RangeError, arg: 'q.shape', says: ['1000000000'],
  }],
  ['q.shape entries are getters: 3.5 first, then 3', {
    setup: () => { const shape = [1, 2, 0, 4]; return { shape, g: withGetter(shape, 2, [3.5, 3]) }; },
    call: ({ ma, k, v }, s) => ma.attention({ data: new Float32Array(24), shape: s.shape }, k, v), type: RangeError, arg: 'q.shape', says: ['3.5'],
    after: (s) => readsOnce(s.g),
  }],
  ['q.shape is a revoked Proxy', {
    call: ({ ma, k, v }) => {
      const { proxy, revoke } = Proxy.revocable([1, 2, 3, 4], {});
      revoke();
      return ma.attention({ data: new Float32Array(24), shape: proxy }, k, v);
    },
    type: TypeError, arg: 'q.shape',
  }],
  ['options is a revoked Proxy', {
    call: ({ ma, q, k, v }) => {
      const { proxy, revoke } = Proxy.revocable({}, {});
      revoke();
      return ma.attention(q, k, v, proxy);
    },
    type: TypeError, arg: 'options',
  }],

  // ---------------------------------------------------------------- getters and Proxies: options
  ['options Proxy: causal answers "yes" first, true later', {
    setup: () => {
      const g = changing(['yes', true]);
      return { g, options: new Proxy({ causal: true }, { get: (t, key) => (key === 'causal' ? g.get() : t[key]) }) };
    },
    call: ({ ma, q, k, v }, s) => ma.attention(q, k, v, s.options), type: TypeError, arg: 'causal', says: ['yes'], after: (s) => readsOnce(s.g),
  }],
  ['options getter: scale "0.5" first, 0.5 later', {
    setup: () => { const options = {}; return { options, g: withGetter(options, 'scale', ['0.5', 0.5]) }; },
    call: ({ ma, q, k, v }, s) => ma.attention(q, k, v, s.options), type: TypeError, arg: 'scale', says: ['0.5'], after: (s) => readsOnce(s.g),
  }],
  ['rope getter: theta "1e4" first, 1e4 later', {
    setup: () => { const rope = {}; return { options: { rope }, g: withGetter(rope, 'theta', ['1e4', 1e4]) }; },
    call: ({ ma, q, k, v }, s) => ma.attention(q, k, v, s.options), type: TypeError, arg: 'rope.theta', says: ['1e4'], after: (s) => readsOnce(s.g),
  }],
  ['options getter: rope with odd dims 3 first, 2 later', {
    setup: () => { const options = {}; return { options, g: withGetter(options, 'rope', [{ dims: 3 }, { dims: 2 }]) }; },
    call: ({ ma, q, k, v }, s) => ma.attention(q, k, v, s.options), type: RangeError, arg: 'rope.dims', says: ['even', '3'], after: (s) => readsOnce(s.g),
  }],
  ['rope is a Proxy whose layout answers "gptj" first', {
    setup: () => {
      const g = changing(['gptj', 'halves']);
      return { g, options: { rope: new Proxy({ layout: 'halves' }, { get: (t, key) => (key === 'layout' ? g.get() : t[key]) }) } };
    },
    call: ({ ma, q, k, v }, s) => ma.attention(q, k, v, s.options), type: TypeError, arg: 'rope.layout', says: ['gptj'], after: (s) => readsOnce(s.g),
  }],
  ['rope theta inherited from a prototype is not read (dims 3 is the error)', {
    call: ({ ma, q, k, v }) => ma.attention(q, k, v, { rope: Object.assign(Object.create({ theta: 'polluted' }), { dims: 3 }) }),
    type: RangeError, arg: 'rope.dims', says: ['even'],
  }],
  ['rope with an unknown field', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { rope: { base: 10000 } }), type: TypeError, arg: 'rope', says: ['base'] }],
  ['rope offset -1', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { rope: { offset: -1 } }), type: RangeError, arg: 'rope.offset', says: ['-1'] }],
  ['rope offset 1.5', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { rope: { offset: 1.5 } }), type: RangeError, arg: 'rope.offset', says: ['1.5'] }],
  ['rope dims beyond D', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { rope: { dims: 6 } }), type: RangeError, arg: 'rope.dims', says: ['D = 4'] }],
  ['rope is a string', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { rope: 'llama' }), type: TypeError, arg: 'rope' }],
  // RoPE's fields one by one, and the values a base derives: theta^(-2i/dims) and the angles
  // overflow float64 for a subnormal or tiny base at dims 64 (D = 4 never overflows).
  ['rope theta 5e-324 at D = 64 (its frequencies overflow)', {
    call: ({ ma }) => ma.attention(tensor([1, 1, 1, 64]), tensor([1, 1, 2, 64]), tensor([1, 1, 2, 64]), { rope: { theta: 5e-324 } }),
    type: RangeError, arg: 'rope.theta', says: ['too small', 'dims = 64'],
  }],
  ['rope theta 5e-324 at dims 28 of D = 64 (its angles overflow)', {
    call: ({ ma }) => ma.attention(tensor([1, 1, 1, 64]), tensor([1, 1, 2, 64]), tensor([1, 1, 2, 64]), { rope: { theta: 5e-324, dims: 28 } }),
    type: RangeError, arg: 'rope.theta', says: ['dims = 28'],
  }],
  ['rope getter: theta 5e-324 first, 10000 later (D = 64)', {
    setup: () => { const rope = {}; return { rope, g: withGetter(rope, 'theta', [5e-324, 10000]) }; },
    call: ({ ma }, s) => ma.attention(tensor([1, 1, 1, 64]), tensor([1, 1, 2, 64]), tensor([1, 1, 2, 64]), { rope: s.rope }),
    type: RangeError, arg: 'rope.theta', says: ['too small'], after: (s) => readsOnce(s.g),
  }],
  ['rope theta is a BigInt', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { rope: { theta: 10000n } }), type: TypeError, arg: 'rope.theta', says: ['10000'] }],
  ['rope theta is a string', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { rope: { theta: '10000' } }), type: TypeError, arg: 'rope.theta' }],
  ['rope theta is an object whose valueOf says 10000 (never called)', {
    setup: () => { const s = { calls: 0 }; s.theta = { valueOf: () => { s.calls++; return 10000; } }; return s; },
    call: ({ ma, q, k, v }, s) => ma.attention(q, k, v, { rope: { theta: s.theta } }), type: TypeError, arg: 'rope.theta',
    after: (s) => assert.equal(s.calls, 0, 'valueOf must not be called'),
  }],
  ['rope theta -0', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { rope: { theta: -0 } }), type: RangeError, arg: 'rope.theta', says: ['> 0'] }],
  ['rope theta NaN', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { rope: { theta: NaN } }), type: RangeError, arg: 'rope.theta', says: ['nan'] }],
  ['rope dims 1.5', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { rope: { dims: 1.5 } }), type: RangeError, arg: 'rope.dims', says: ['1.5'] }],
  ['rope dims -2', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { rope: { dims: -2 } }), type: RangeError, arg: 'rope.dims', says: ['-2'] }],
  ['rope dims 2^31', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { rope: { dims: 2 ** 31 } }), type: RangeError, arg: 'rope.dims', says: ['2147483648'] }],
  ['rope dims NaN', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { rope: { dims: NaN } }), type: RangeError, arg: 'rope.dims', says: ['NaN'] }],
  ['rope dims "4"', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { rope: { dims: '4' } }), type: TypeError, arg: 'rope.dims' }],
  ['rope getter: dims 3 first, 4 later', {
    setup: () => { const rope = {}; return { rope, g: withGetter(rope, 'dims', [3, 4]) }; },
    call: ({ ma, q, k, v }, s) => ma.attention(q, k, v, { rope: s.rope }), type: RangeError, arg: 'rope.dims', says: ['even'], after: (s) => readsOnce(s.g),
  }],
  ...['neox', 'HALVES', 'toString', '__proto__', ''].map((layout) => [`rope layout '${layout}'`, {
    call: ({ ma, q, k, v }) => ma.attention(q, k, v, { rope: { layout } }), type: TypeError, arg: 'rope.layout', says: ["'halves' or 'interleaved'"],
  }]),
  ['rope offset 2^53', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { rope: { offset: 2 ** 53 } }), type: RangeError, arg: 'rope.offset', says: ['9007199254740992'] }],
  ['rope offset -2^53', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { rope: { offset: -(2 ** 53) } }), type: RangeError, arg: 'rope.offset', says: ['-9007199254740992'] }],
  ['rope offset 2^31', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { rope: { offset: 2 ** 31 } }), type: RangeError, arg: 'rope.offset', says: ['2147483648'] }],
  ['rope getter: offset -1 first, 0 later', {
    setup: () => { const rope = {}; return { rope, g: withGetter(rope, 'offset', [-1, 0]) }; },
    call: ({ ma, q, k, v }, s) => ma.attention(q, k, v, { rope: s.rope }), type: RangeError, arg: 'rope.offset', says: ['-1'], after: (s) => readsOnce(s.g),
  }],
  ['rope is an Array', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { rope: [10000] }), type: TypeError, arg: 'rope' }],
  ['rope is an Array subclass with an odd map()', {
    call: ({ ma, q, k, v }) => {
      class Odd extends Array { map() { return { theta: 10000 }; } }
      return ma.attention(q, k, v, { rope: Odd.from([10000]) });
    },
    type: TypeError, arg: 'rope',
  }],
  ['rope is a revoked Proxy', {
    call: ({ ma, q, k, v }) => {
      const { proxy, revoke } = Proxy.revocable({ theta: 10000 }, {});
      revoke();
      return ma.attention(q, k, v, { rope: proxy });
    },
    type: TypeError, arg: 'rope',
  }],
  ['rope is a Proxy whose keys trap throws', {
    call: ({ ma, q, k, v }) => ma.attention(q, k, v, { rope: new Proxy({}, { ownKeys: () => { throw new Error('no keys'); } }) }), type: TypeError, arg: 'rope', says: ['no keys'],
  }],
  ['attend with a rope of its own on a cache', { call: ({ cache, cacheQ }) => cache.attend(cacheQ, { rope: {} }), type: RangeError, arg: 'rope', says: ["cache's own"] }],
  ['a cache with rope theta 1e-320 at headDim 64', {
    call: ({ ma }) => ma.createKVCache({ capacity: 4, headDim: 64, rope: { theta: 1e-320 } }), type: RangeError, arg: 'rope.theta', says: ['dims = 64'],
  }],
  ['a cache config getter: rope theta 5e-324 first, then 10000 (headDim 64)', {
    setup: () => { const rope = {}; return { rope, g: withGetter(rope, 'theta', [5e-324, 10000]) }; },
    call: ({ ma }, s) => ma.createKVCache({ capacity: 4, headDim: 64, rope: s.rope }), type: RangeError, arg: 'rope.theta', after: (s) => readsOnce(s.g),
  }],
  ['a cache with rope dims 1.5', { call: ({ ma }) => ma.createKVCache({ capacity: 4, headDim: 4, rope: { dims: 1.5 } }), type: RangeError, arg: 'rope.dims' }],
  ['a cache with rope dims above headDim', { call: ({ ma }) => ma.createKVCache({ capacity: 4, headDim: 4, rope: { dims: 6 } }), type: RangeError, arg: 'rope.dims', says: ['D = 4'] }],
  ['a cache with rope layout \'neox\'', { call: ({ ma }) => ma.createKVCache({ capacity: 4, headDim: 4, rope: { layout: 'neox' } }), type: TypeError, arg: 'rope.layout' }],
  ['a cache with rope offset 2^53', { call: ({ ma }) => ma.createKVCache({ capacity: 4, headDim: 4, rope: { offset: 2 ** 53 } }), type: RangeError, arg: 'rope.offset' }],
  // ALiBi slopes times distances up to 2^31 must stay finite in float32; sinks in float32's range.
  ['alibiSlopes 1e30 (times 2^31 beyond float32)', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { alibiSlopes: [0.5, 1e30] }), type: RangeError, arg: 'alibiSlopes[1]', says: ['2^31'] }],
  ['alibiSlopes -3.4e38', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { alibiSlopes: [-3.4e38, 0.5] }), type: RangeError, arg: 'alibiSlopes[0]', says: ['2^31'] }],
  ['alibiSlopes with a hole', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { alibiSlopes: [0.5, , ] }), type: TypeError, arg: 'alibiSlopes', says: ['entry 1'] }],  // eslint-disable-line no-sparse-arrays
  ['alibiSlopes: an Array subclass whose map() hides a slope of 1e30', {
    call: ({ ma, q, k, v }) => {
      class Odd extends Array { map() { return [0.5, 0.5]; } }
      return ma.attention(q, k, v, { alibiSlopes: Odd.from([0.5, 1e30]) });
    },
    type: RangeError, arg: 'alibiSlopes[1]',
  }],
  ['sinks Number.MAX_VALUE (infinite in float32)', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { sinks: [Number.MAX_VALUE, 0] }), type: RangeError, arg: 'sinks[0]' }],
  ['sinks with a hole', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { sinks: [, 0] }), type: TypeError, arg: 'sinks', says: ['entry 0'] }],  // eslint-disable-line no-sparse-arrays
  ['options getter: keyLengths [9] first, [5] later', {
    setup: () => { const options = {}; return { options, g: withGetter(options, 'keyLengths', [[9], [5]]) }; },
    call: ({ ma, q, k, v }, s) => ma.attention(q, k, v, s.options), type: RangeError, arg: 'keyLengths[0]', says: ['9', 'Lk = 5'], after: (s) => readsOnce(s.g),
  }],
  ['allowed.data getter: a 1-byte array first, then the full mask', {
    setup: () => { const allowed = { shape: [3, 5] }; return { allowed, g: withGetter(allowed, 'data', [new Uint8Array(1), new Uint8Array(15).fill(1)]) }; },
    call: ({ ma, q, k, v }, s) => ma.attention(q, k, v, { allowed: s.allowed }), type: RangeError, arg: 'allowed.data', says: ['15', 'given 1'], after: (s) => readsOnce(s.g),
  }],
  ['allowed.data: a Uint8Array subclass claiming 15 elements, holding 1', {
    call: ({ ma, q, k, v }) => {
      class Liar extends Uint8Array { get length() { return 15; } get byteLength() { return 15; } }
      return ma.attention(q, k, v, { allowed: { data: new Liar(1), shape: [3, 5] } });
    },
    type: RangeError, arg: 'allowed.data', says: ['given 1'],
  }],
  ['bias.data is a Proxy around a Float32Array', {
    call: ({ ma, q, k, v }) => ma.attention(q, k, v, { bias: { data: new Proxy(new Float32Array(5), {}), shape: [5] } }), type: TypeError, arg: 'bias.data',
  }],
  ['keyLengths is a Proxy of an array claiming a billion entries', {
    call: ({ ma, q, k, v }) => ma.attention(q, k, v, { keyLengths: new Proxy([5], { get: (t, key) => (key === 'length' ? 1e9 : t[key]) }) }),
    type: RangeError, arg: 'keyLengths', says: ['1000000000'],
  }],
  ['keyLengths entry getter: 6 first, then 5', {
    setup: () => { const keyLengths = [0]; return { keyLengths, g: withGetter(keyLengths, 0, [6, 5]) }; },
    call: ({ ma, q, k, v }, s) => ma.attention(q, k, v, { keyLengths: s.keyLengths }), type: RangeError, arg: 'keyLengths[0]', says: ['6'], after: (s) => readsOnce(s.g),
  }],
  ['alibiSlopes entries are strings', {
    call: ({ ma, q, k, v }) => ma.attention(q, k, v, { alibiSlopes: ['0.5', '0.25'] }), type: TypeError, arg: 'alibiSlopes', says: ['0.5'],
  }],

  // ---------------------------------------------------------------- detached, resizable, shared
  ['q.data detached before the call', {
    call: ({ ma, k, v }) => ma.attention({ data: detach(new Float32Array(24)), shape: Q }, k, v), type: RangeError, arg: 'q.data', says: ['given 0'],
  }],
  ['q.data detached by allowed\'s getter, after q was checked', {
    setup: () => {
      const q = tensor(Q);
      const allowed = { shape: [5] };
      Object.defineProperty(allowed, 'data', { get: () => { detach(q.data); return new Uint8Array(5).fill(1); } });
      return { q, allowed };
    },
    call: ({ ma, k, v }, s) => ma.attention(s.q, k, v, { allowed: s.allowed }), type: RangeError, arg: 'q.data', says: ['changed'],
  }],
  ['k.data on a resizable ArrayBuffer, shrunk by bias\'s getter', {
    setup: () => {
      const buffer = new ArrayBuffer(80, { maxByteLength: 4096 });
      const k = { data: new Float32Array(buffer), shape: K };  // length-tracking
      const bias = { shape: [5] };
      Object.defineProperty(bias, 'data', { get: () => { buffer.resize(8); return new Float32Array(5); } });
      return { k, bias };
    },
    call: ({ ma, q, v }, s) => ma.attention(q, s.k, v, { bias: s.bias }), type: RangeError, arg: 'k.data', says: ['changed', 'now 2'],
  }],
  ['v.data on a resizable ArrayBuffer, grown by an allowed getter', {
    setup: () => {
      const buffer = new ArrayBuffer(80, { maxByteLength: 1 << 20 });
      const v = { data: new Float32Array(buffer), shape: K };
      const allowed = { shape: [5] };
      Object.defineProperty(allowed, 'data', { get: () => { buffer.resize(1 << 20); return new Uint8Array(5); } });
      return { v, allowed };
    },
    call: ({ ma, q, k }, s) => ma.attention(q, k, s.v, { allowed: s.allowed }), type: RangeError, arg: 'v.data', says: ['changed'],
  }],
  ['bias.data detached', {
    call: ({ ma, q, k, v }) => ma.attention(q, k, v, { bias: { data: detach(new Float32Array(5)), shape: [5] } }), type: RangeError, arg: 'bias.data', says: ['given 0'],
  }],
  ['q.data on a SharedArrayBuffer, one element short', {
    call: ({ ma, k, v }) => ma.attention({ data: new Float32Array(new SharedArrayBuffer(92)), shape: Q }, k, v), type: RangeError, arg: 'q.data', says: ['24', 'given 23'],
  }],
  ['q.data a Float64Array on a SharedArrayBuffer', {
    call: ({ ma, k, v }) => ma.attention({ data: new Float64Array(new SharedArrayBuffer(192)), shape: Q }, k, v), type: TypeError, arg: 'q.data', says: ['Float64Array'],
  }],

  // ---------------------------------------------------------------- wrong kinds
  ['q.data a Float64Array', { call: ({ ma, k, v }) => ma.attention(tensor(Q, 0, Float64Array), k, v), type: TypeError, arg: 'q.data', says: ['Float64Array'] }],
  ['v.data an Int32Array', { call: ({ ma, q, k }) => ma.attention(q, k, tensor(K, 0, Int32Array)), type: TypeError, arg: 'v.data', says: ['Int32Array'] }],
  ['k.data a plain array', { call: ({ ma, q, v }) => ma.attention(q, { data: new Array(20).fill(0), shape: K }, v), type: TypeError, arg: 'k.data', says: ['array'] }],
  ['q.data a DataView', { call: ({ ma, k, v }) => ma.attention({ data: new DataView(new ArrayBuffer(96)), shape: Q }, k, v), type: TypeError, arg: 'q.data', says: ['DataView'] }],
  ['q.data an ArrayBuffer', { call: ({ ma, k, v }) => ma.attention({ data: new ArrayBuffer(96), shape: Q }, k, v), type: TypeError, arg: 'q.data' }],
  ['allowed.data a Float32Array', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { allowed: tensor([5], 1) }), type: TypeError, arg: 'allowed.data', says: ['Uint8Array'] }],
  ['allowed.data a Uint8ClampedArray', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { allowed: tensor([5], 1, Uint8ClampedArray) }), type: TypeError, arg: 'allowed.data', says: ['Uint8ClampedArray'] }],
  ['bias.data a Float64Array', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { bias: tensor([5], 0, Float64Array) }), type: TypeError, arg: 'bias.data', says: ['Float64Array'] }],
  ['keyLengths a Float32Array', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { keyLengths: new Float32Array([5]) }), type: TypeError, arg: 'keyLengths', says: ['Float32Array'] }],
  ['keyLengths a BigInt64Array', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { keyLengths: new BigInt64Array([5n]) }), type: TypeError, arg: 'keyLengths', says: ['BigInt64Array'] }],
  ['segments.query a Uint32Array', {
    call: ({ ma, q, k, v }) => ma.attention(q, k, v, { segments: { query: new Uint32Array(3), key: new Int32Array(5) } }), type: TypeError, arg: 'segments.query', says: ['Uint32Array'],
  }],
  ['alibiSlopes a Float64Array', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { alibiSlopes: new Float64Array(2) }), type: TypeError, arg: 'alibiSlopes', says: ['Float64Array'] }],

  // ---------------------------------------------------------------- shapes
  ['a negative dimension', { call: ({ ma, k, v }) => ma.attention({ data: new Float32Array(24), shape: [1, 2, -3, -4] }, k, v), type: RangeError, arg: 'q.shape', says: ['-3'] }],
  ['a NaN dimension', { call: ({ ma, k, v }) => ma.attention({ data: new Float32Array(24), shape: [1, 2, NaN, 4] }, k, v), type: RangeError, arg: 'q.shape', says: ['NaN'] }],
  ['a fractional dimension', { call: ({ ma, k, v }) => ma.attention({ data: new Float32Array(24), shape: [1, 2, 1.5, 8] }, k, v), type: RangeError, arg: 'q.shape', says: ['1.5'] }],
  ['a null dimension (was read as 0)', { call: ({ ma, q, v }) => ma.attention(q, { data: new Float32Array(20), shape: [null, 1, 20, 1] }, v), type: TypeError, arg: 'k.shape', says: ['null'] }],
  ['a string dimension', { call: ({ ma, k, v }) => ma.attention({ data: new Float32Array(24), shape: [1, 2, '3', 4] }, k, v), type: TypeError, arg: 'q.shape', says: ['string 3'] }],
  ['an infinite dimension', { call: ({ ma, k, v }) => ma.attention({ data: new Float32Array(24), shape: [1, 2, Infinity, 4] }, k, v), type: RangeError, arg: 'q.shape', says: ['Infinity'] }],
  ['a dimension of 2^53 (not a safe integer)', { call: ({ ma, k, v }) => ma.attention({ data: new Float32Array(0), shape: [0, 1, 2 ** 53, 4] }, k, v), type: RangeError, arg: 'q.shape', says: ['9007199254740992'] }],
  ['a dimension of 2^31 next to a 0 (was reported as -2147483648)', {
    call: ({ ma }) => ma.attention(tensor([1, 2, 3, 0]), tensor([1, 1, 2 ** 31, 0]), tensor([1, 1, 2 ** 31, 0])), type: RangeError, arg: 'k', says: ['given 2147483648', '8388608'],
  }],
  ['2^32 elements (the product overflows 32 bits)', { call: ({ ma, k, v }) => ma.attention({ data: new Float32Array(24), shape: [65536, 65536, 1, 1] }, k, v), type: RangeError, arg: 'q', says: ['bytes'] }],
  ['2^80 elements (the product overflows 64 bits)', { call: ({ ma, k, v }) => ma.attention({ data: new Float32Array(24), shape: [2 ** 20, 2 ** 20, 2 ** 20, 2 ** 20] }, k, v), type: RangeError, arg: 'q', says: ['bytes'] }],
  ['3 GiB of q (between the 2 GiB limit and 2^32: was a misleading out-of-memory)', {
    call: ({ ma, k, v }) => ma.attention({ data: new Float32Array(24), shape: [1, 1, 3, 268435456] }, k, v), type: RangeError, arg: 'q', says: ['3221225472', '2147483647'],
  }],
  ['an output of 2^49 bytes from empty-looking inputs', {
    call: ({ ma }) => ma.attention(tensor([1, 2 ** 16, 2 ** 15, 0]), tensor([1, 1, 1, 0]), tensor([1, 1, 1, 2 ** 16])), type: RangeError, arg: 'output', says: ['bytes'],
  }],
  ['an lse of 2^50 bytes from empty tensors', {
    call: ({ ma }) => ma.attention(tensor([2 ** 16, 2 ** 16, 2 ** 16, 0]), tensor([2 ** 16, 1, 1, 0]), tensor([2 ** 16, 1, 1, 0]), { returnLse: true }), type: RangeError, arg: 'returnLse', says: ['bytes'],
  }],
  ['weights of 6.4 GB', { call: ({ ma }) => ma.attention(tensor([1, 1, 40000, 1]), tensor([1, 1, 40000, 1]), tensor([1, 1, 40000, 1]), { returnWeights: true }), type: RangeError, arg: 'returnWeights', says: ['bytes'] }],
  ['5 dimensions', { call: ({ ma, k, v }) => ma.attention({ data: new Float32Array(24), shape: [1, 1, 2, 3, 4] }, k, v), type: RangeError, arg: 'q.shape', says: ['4 dimensions'] }],
  ['no shape', { call: ({ ma, q, v }) => ma.attention(q, { data: new Float32Array(20) }, v), type: TypeError, arg: 'k.shape' }],
  ['a shape that is a string', { call: ({ ma, k, v }) => ma.attention({ data: new Float32Array(24), shape: '1,2,3,4' }, k, v), type: TypeError, arg: 'q.shape' }],

  // ---------------------------------------------------------------- the contract's "Bad input"
  ['shape mismatch: k batch 2, q batch 1', { call: ({ ma, q, v }) => ma.attention(q, tensor([2, 1, 5, 4]), v), type: RangeError, arg: 'k', says: ['2', '1'] }],
  ['data length that does not match the shape', { call: ({ ma, k, v }) => ma.attention({ data: new Float32Array(23), shape: Q }, k, v), type: RangeError, arg: 'q.data', says: ['24', '23'] }],
  ['Hq not a multiple of Hkv', { call: ({ ma }) => ma.attention(tensor([1, 3, 3, 4]), tensor([1, 2, 5, 4]), tensor([1, 2, 5, 4])), type: RangeError, arg: 'k', says: ['2', '3'] }],
  ['a key length outside [0, Lk]', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { keyLengths: [6] }), type: RangeError, arg: 'keyLengths[0]', says: ['6'] }],
  ['a query length outside [0, Lq]', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { queryLengths: [-1] }), type: RangeError, arg: 'queryLengths[0]', says: ['-1'] }],
  ['a mask that cannot broadcast', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { allowed: tensor([4], 1, Uint8Array) }), type: RangeError, arg: 'allowed', says: ['4', '5'] }],
  ['a window below -1', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { window: [-2, 0] }), type: RangeError, arg: 'window', says: ['-2'] }],
  ['a negative softcap', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { softcap: -1 }), type: RangeError, arg: 'softcap', says: ['-1'] }],
  ['a non-finite scale', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { scale: NaN }), type: RangeError, arg: 'scale', says: ['NaN'] }],
  ['a scale beyond float32', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { scale: 1e39 }), type: RangeError, arg: 'scale', says: ['1e+39'] }],
  ['softcap 1e-40 (subnormal in float: scale / softcap overflows, NaN)', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { softcap: 1e-40 }), type: RangeError, arg: 'softcap', says: ['1e-40'] }],
  ['softcap 1e-50 (0 in float: silently off)', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { softcap: 1e-50 }), type: RangeError, arg: 'softcap', says: ['1e-50'] }],
  ['softcap 1e39 (infinite in float)', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { softcap: 1e39 }), type: RangeError, arg: 'softcap', says: ['1e+39'] }],
  ['scale / softcap beyond float (1e10 / 1e-30)', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { scale: 1e10, softcap: 1e-30 }), type: RangeError, arg: 'softcap', says: ['overflows'] }],
  ['window [\'3\', 0] (a string, as scale: \'3\' is)', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { window: ['3', 0] }), type: TypeError, arg: 'window', says: ['string 3'] }],
  ['prefix \'2\'', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { prefix: '2' }), type: TypeError, arg: 'prefix', says: ['string 2'] }],
  ['ragged nested segment ids', {
    call: ({ ma, q, k, v }) => ma.attention(q, k, v, { segments: { query: [[0, 0]], key: [[0, 0, 0, 0, 0]] } }), type: RangeError, arg: 'segments.query[0]', says: ['3', 'given 2'],
  }],
  ['nested segment ids with a row per head instead of per batch', {
    call: ({ ma, q, k, v }) => ma.attention(q, k, v, { segments: { query: [[0, 0, 0], [0, 0, 0]], key: [[0, 0, 0, 0, 0]] } }), type: RangeError, arg: 'segments.query', says: ['1', 'given 2'],
  }],
  ['segments without key ids', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { segments: { query: [0, 0, 0] } }), type: TypeError, arg: 'segments' }],
  ['segments given as an array', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { segments: [[0, 0, 0], [0, 0, 0, 0, 0]] }), type: TypeError, arg: 'segments' }],
  ['an unknown option', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { casual: true }), type: TypeError, arg: 'options', says: ['casual'] }],

  // ---------------------------------------------------------------- prototype pollution
  ['align: \'toString\' (a name from Object.prototype)', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { align: 'toString' }), type: TypeError, arg: 'align', says: ['toString'] }],
  ['fullyMasked: \'constructor\'', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { fullyMasked: 'constructor' }), type: TypeError, arg: 'fullyMasked', says: ['constructor'] }],
  ['layout: \'__proto__\'', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, { layout: '__proto__' }), type: TypeError, arg: 'layout' }],
  ['an own \'__proto__\' option (JSON.parse)', { call: ({ ma, q, k, v }) => ma.attention(q, k, v, JSON.parse('{"__proto__": {"causal": true}}')), type: TypeError, arg: 'options', says: ['__proto__'] }],
  ['k without shape while Object.prototype.shape is polluted', {
    setup: () => { Object.prototype.shape = K; },  // eslint-disable-line no-extend-native
    cleanup: () => { delete Object.prototype.shape; },
    call: ({ ma, q, v }) => ma.attention(q, { data: new Float32Array(20) }, v), type: TypeError, arg: 'k.shape',
  }],
  ['q without data while Object.prototype.data holds a long array', {
    setup: () => { Object.prototype.data = new Float32Array(1 << 16); },  // eslint-disable-line no-extend-native
    cleanup: () => { delete Object.prototype.data; },
    call: ({ ma, k, v }) => ma.attention({ shape: Q }, k, v), type: TypeError, arg: 'q.data',
  }],
  ['a cache dtype of \'toString\'', { call: ({ ma }) => ma.createKVCache({ batch: 1, kvHeads: 1, capacity: 4, headDim: 4, dtype: 'toString' }), type: TypeError, arg: 'dtype', says: ['toString'] }],
  ['a cache capacity inherited from a prototype', {
    call: ({ ma }) => ma.createKVCache(Object.assign(Object.create({ capacity: 8 }), { batch: 1, kvHeads: 1, headDim: 4 })), type: TypeError, arg: 'capacity', says: ['undefined'],
  }],

  // ---------------------------------------------------------------- KV cache misuse
  ['append past capacity (sequence 1 holds 7 of 8)', { call: ({ cache, kv }) => cache.append(kv(2, Math.sin), kv(2, Math.cos)), type: RangeError, arg: 'sequence[1]', says: ['capacity is 8'] }],
  ['append float16 halves to a float32 cache', {
    call: ({ cache }) => cache.append({ data: new Uint16Array(8), shape: [2, 1, 1, 4] }, { data: new Uint16Array(8), shape: [2, 1, 1, 4] }), type: TypeError, arg: 'k.data', says: ['Uint16Array'],
  }],
  ['append 16-bit values to a cache of float16 keys and bfloat16 values (whose bits differ)', {
    setup: ({ ma }) => ({ c: ma.createKVCache({ batch: 1, kvHeads: 1, capacity: 4, headDim: 4, dtype: 'float16', valueDtype: 'bfloat16' }) }),
    call: (ctx, s) => s.c.append({ data: new Uint16Array(4), shape: [1, 1, 1, 4] }, { data: new Uint16Array(4), shape: [1, 1, 1, 4] }), type: TypeError, arg: 'k.data', says: ['Uint16Array'],
    cleanup: (s) => s.c.dispose(), caches: (s) => [s.c],
  }],
  ['a cache dtype spelled as C++ spells it (bf16)', { call: ({ ma }) => ma.createKVCache({ batch: 1, kvHeads: 1, capacity: 4, headDim: 4, dtype: 'bf16' }), type: TypeError, arg: 'dtype', says: ['bf16', 'bfloat16'] }],
  ['append halves for k, floats for v (float16 cache)', {
    setup: ({ ma }) => ({ c: ma.createKVCache({ batch: 1, kvHeads: 1, capacity: 4, headDim: 4, dtype: 'float16' }) }),
    call: (ctx, s) => s.c.append({ data: new Uint16Array(4), shape: [1, 1, 1, 4] }, { data: new Float32Array(4), shape: [1, 1, 1, 4] }), type: TypeError, arg: 'v.data', says: ['Uint16Array'],
    cleanup: (s) => s.c.dispose(), caches: (s) => [s.c],
  }],
  ['append counts above T', { call: ({ cache, kv }) => cache.append(kv(1, Math.sin), kv(1, Math.cos), { counts: [2, 0] }), type: RangeError, arg: 'counts[0]', says: ['2'] }],
  ['append counts of the wrong length', { call: ({ cache, kv }) => cache.append(kv(1, Math.sin), kv(1, Math.cos), { counts: [1] }), type: RangeError, arg: 'counts', says: ['2', '1'] }],
  ['append k with the wrong head dim', { call: ({ cache }) => cache.append(tensor([2, 1, 1, 8]), tensor([2, 1, 1, 4])), type: RangeError, arg: 'k', says: ['8'] }],
  ['append with an unknown option', { call: ({ cache, kv }) => cache.append(kv(1, Math.sin), kv(1, Math.cos), { count: [1, 1] }), type: TypeError, arg: 'options', says: ['count'] }],
  ['truncate beyond the length', { call: ({ cache }) => cache.truncate([4, 7]), type: RangeError, arg: 'lengths[0]', says: ['3', '4'] }],
  ['truncate with the wrong count', { call: ({ cache }) => cache.truncate([1]), type: RangeError, arg: 'lengths', says: ['2', '1'] }],
  ['truncate with strings', { call: ({ cache }) => cache.truncate(['1', '1']), type: TypeError, arg: 'lengths', says: ['string 1'] }],
  ['attend with keyLengths', { call: ({ cache, cacheQ }) => cache.attend(cacheQ, { keyLengths: [3, 7] }), type: TypeError, arg: 'keyLengths' }],
  ['attend q with the wrong head dim', { call: ({ cache }) => cache.attend(tensor([2, 2, 1, 8])), type: RangeError, arg: 'q', says: ['8'] }],
  ['attend with softcap 1e-45', { call: ({ cache, cacheQ }) => cache.attend(cacheQ, { softcap: 1e-45 }), type: RangeError, arg: 'softcap' }],
  ['a cache beyond the sequence limit', { call: ({ ma }) => ma.createKVCache({ batch: 1, kvHeads: 1, capacity: 2 ** 23 + 1, headDim: 1 }), type: RangeError, arg: 'capacity', says: ['8388608'] }],
  ['a cache beyond the byte limit', { call: ({ ma }) => ma.createKVCache({ batch: 64, kvHeads: 64, capacity: 2 ** 20, headDim: 64 }), type: RangeError, arg: 'capacity', says: ['overflow'] }],
  ['attend with sinks of the wrong length', { call: ({ cache, cacheQ }) => cache.attend(cacheQ, { sinks: [0.5] }), type: RangeError, arg: 'sinks', says: ['2', '1'] }],
  ['attend with a NaN sink', { call: ({ cache, cacheQ }) => cache.attend(cacheQ, { sinks: [0, NaN] }), type: RangeError, arg: 'sinks[1]', says: ['finite'] }],
  ['attend with sinks as strings', { call: ({ cache, cacheQ }) => cache.attend(cacheQ, { sinks: ['1', '2'] }), type: TypeError, arg: 'sinks' }],
  ['attend with a tree whose parent is not earlier', { call: ({ cache, cacheQ }) => cache.attend(cacheQ, { tree: [0] }), type: RangeError, arg: 'tree[0]', says: ['earlier'] }],
  ['attend with a tree of the wrong length', { call: ({ cache, cacheQ }) => cache.attend(cacheQ, { tree: [-1, 0, 1] }), type: RangeError, arg: 'tree', says: ['Lq = 1'] }],
  ['attend with a tree that is a number', { call: ({ cache, cacheQ }) => cache.attend(cacheQ, { tree: 3 }), type: TypeError, arg: 'tree' }],
  ['mergeAttention of nothing', { call: ({ ma }) => ma.mergeAttention([]), type: RangeError, arg: 'parts', says: ['at least one'] }],
  ['mergeAttention of a non-array', { call: ({ ma }) => ma.mergeAttention({ output: 1 }), type: TypeError, arg: 'parts' }],
  ['mergeAttention of parts with different shapes', {
    call: ({ ma }) => ma.mergeAttention([
      { output: { data: new Float32Array(8), shape: [1, 1, 2, 4] }, lse: { data: new Float32Array(2), shape: [1, 1, 2] } },
      { output: { data: new Float32Array(4), shape: [1, 1, 1, 4] }, lse: { data: new Float32Array(1), shape: [1, 1, 1] } },
    ]), type: RangeError, arg: 'parts[1].output', says: ['[1, 1, 2, 4]'],
  }],
  ['mergeAttention with an lse of the wrong shape', {
    call: ({ ma }) => ma.mergeAttention([{ output: { data: new Float32Array(8), shape: [1, 1, 2, 4] }, lse: { data: new Float32Array(4), shape: [1, 1, 4] } }]),
    type: RangeError, arg: 'parts[0].lse', says: ['[1, 1, 2]'],
  }],
  ['mergeAttention with an unknown field', {
    call: ({ ma }) => ma.mergeAttention([{ output: { data: new Float32Array(4), shape: [1, 1, 1, 4] }, lse: { data: new Float32Array(1), shape: [1, 1, 1] }, weights: 1 }]),
    type: TypeError, arg: 'parts[0]', says: ['weights'],
  }],
  // mergeAttention: the caller's array is read by index, once; its own map/iterator never runs
  // (once, a subclass's map() returned records that made the copy overrun its block).
  ['mergeAttention of an Array subclass whose map() forges records', {
    call: ({ ma }) => {
      class Forged extends Array {
        map() { return [{ dims: [1, 1, 1, 4], output: { array: new Float32Array(1 << 18).fill(7), kind: 'Float32Array', count: 1 << 18, bytes: 16 }, lse: { array: new Float32Array(1), kind: 'Float32Array', count: 1, bytes: 4 } }]; }
        flatMap() { return [0, 0]; }
        forEach() {}
      }
      const parts = Object.setPrototypeOf([{ output: { data: new Float32Array(1 << 18), shape: [1, 1, 1, 4] }, lse: { data: new Float32Array(1), shape: [1, 1, 1] } }], Forged.prototype);
      return ma.mergeAttention(parts);
    },
    type: RangeError, arg: 'parts[0].output.data', says: ['4', 'given 262144'],
  }],
  ['mergeAttention of a sparse list [A, <hole>, A]', {
    call: ({ ma }) => {
      const A = { output: { data: new Float32Array(4), shape: [1, 1, 1, 4] }, lse: { data: new Float32Array(1), shape: [1, 1, 1] } };
      return ma.mergeAttention([A, , A]);  // eslint-disable-line no-sparse-arrays
    },
    type: TypeError, arg: 'parts[1]', says: ['{ output, lse }', 'undefined'],
  }],
  ['mergeAttention of [<hole>, A]', {
    call: ({ ma }) => ma.mergeAttention([, { output: { data: new Float32Array(4), shape: [1, 1, 1, 4] }, lse: { data: new Float32Array(1), shape: [1, 1, 1] } }]),  // eslint-disable-line no-sparse-arrays
    type: TypeError, arg: 'parts[0]', says: ['{ output, lse }'],
  }],
  ['mergeAttention of a Proxy claiming 2^40 parts (must not loop)', {
    call: ({ ma }) => ma.mergeAttention(new Proxy([], { get: (t, key) => (key === 'length' ? 2 ** 40 : t[key]) })),
    type: RangeError, arg: 'parts', says: ['65536', String(2 ** 40)],
  }],
  ['mergeAttention of a non-object part', {
    call: ({ ma }) => ma.mergeAttention([7]), type: TypeError, arg: 'parts[0]', says: ['number 7'],
  }],
  ['mergeAttention of no rows whose shapes differ', {
    call: ({ ma }) => ma.mergeAttention([
      { output: { data: new Float32Array(0), shape: [2 ** 45, 1, 0, 8] }, lse: { data: new Float32Array(0), shape: [2 ** 45, 1, 0] } },
      { output: { data: new Float32Array(0), shape: [2 ** 45, 1, 0, 9] }, lse: { data: new Float32Array(0), shape: [2 ** 45, 1, 0] } },
    ]), type: RangeError, arg: 'parts[1].output', says: ['[35184372088832, 1, 0, 8]'],
  }],
  // Index lists read once (their length too): keep's tree and path, attend's tree.
  ['keep with a tree whose length answers 2^30 and then 1', {
    setup: () => { const g = changing([2 ** 30, 1]); return { g, tree: new Proxy([-1], { get: (t, key) => (key === 'length' ? g.get() : t[key]) }) }; },
    call: ({ cache }, s) => cache.keep(0, s.tree, [0]), type: RangeError, arg: 'tree', says: ['8388608', String(2 ** 30)], after: (s) => readsOnce(s.g),
  }],
  ['keep with a path longer than its tree', { call: ({ cache }) => cache.keep(0, [-1, 0], [0, 1, 1]), type: RangeError, arg: 'path', says: ['2', '3'] }],
  ['keep of a sparse path', { call: ({ cache }) => cache.keep(0, [-1, 0], [0, , ]), type: TypeError, arg: 'path', says: ['entry 1'] }],  // eslint-disable-line no-sparse-arrays
  ['attend with a tree whose length answers 2^30 and then 1', {
    setup: () => { const g = changing([2 ** 30, 1]); return { g, tree: new Proxy([-1], { get: (t, key) => (key === 'length' ? g.get() : t[key]) }) }; },
    call: ({ cache, cacheQ }, s) => cache.attend(cacheQ, { tree: s.tree }), type: RangeError, arg: 'tree', says: ['Lq = 1', String(2 ** 30)], after: (s) => readsOnce(s.g),
  }],
  ['attend a paged fork with a NaN sink', { call: ({ paged, cacheQ }) => paged.attend(cacheQ, { sinks: [NaN, 0] }), type: RangeError, arg: 'sinks[0]', says: ['finite'] }],
  ['append past a paged cache\'s capacity', { call: ({ paged, kv }) => paged.append(kv(4, Math.sin), kv(4, Math.cos)), type: RangeError, arg: 'sequence[0]', says: ['capacity is 8'] }],
  ['fork a paged cache onto its live fork', { call: ({ paged }) => paged.fork(0, 1), type: RangeError, arg: 'dst', says: ['empty'] }],
  ['keep on a q8 ring a tree longer than its window', { call: ({ ring }) => ring.keep(0, [-1, 0, 1, 2, 3, 4], [0]), type: RangeError, arg: 'tree', says: ['6 nodes'] }],
  ['append halves to a q8 ring', {
    call: ({ ring }) => ring.append({ data: new Uint16Array(8), shape: [2, 1, 1, 4] }, { data: new Uint16Array(8), shape: [2, 1, 1, 4] }), type: TypeError, arg: 'k.data', says: ['Uint16Array'],
  }],
  ['fork onto a live sequence', { call: ({ cache }) => cache.fork(0, 1), type: RangeError, arg: 'dst', says: ['empty'] }],
  ['fork from a sequence out of range', { call: ({ cache }) => cache.fork(5, 1), type: RangeError, arg: 'src', says: ['5'] }],
  ['fork with a string index', { call: ({ cache }) => cache.fork('0', 1), type: TypeError, arg: 'src' }],
  ['keep a path that is not a child', { call: ({ cache }) => cache.keep(1, [-1, 0, 0], [0, 2, 1]), type: RangeError, arg: 'path[2]', says: ['not a child'] }],
  ['keep a tree longer than the sequence', { call: ({ cache }) => cache.keep(0, [-1, 0, 1, 2], [0]), type: RangeError, arg: 'tree', says: ['4 nodes'] }],
  ['keep with path entries as strings', { call: ({ cache }) => cache.keep(0, [-1], ['0']), type: TypeError, arg: 'path' }],
  ['a cache with sinkTokens but no window', { call: ({ ma }) => ma.createKVCache({ capacity: 4, headDim: 4, sinkTokens: 1 }), type: RangeError, arg: 'sinkTokens', says: ['window'] }],
  ['a cache with pageSize -1', { call: ({ ma }) => ma.createKVCache({ capacity: 4, headDim: 4, pageSize: -1 }), type: RangeError, arg: 'pageSize', says: ['-1'] }],
  ['a cache of kvHeads \'2\'', { call: ({ ma }) => ma.createKVCache({ batch: 1, kvHeads: '2', capacity: 4, headDim: 4 }), type: TypeError, arg: 'kvHeads' }],
  ...['append', 'attend', 'truncate', 'reset', 'lengths', 'byteLength', 'fork', 'keep'].map((op) => [`cache ${op} after dispose()`, {
    setup: ({ ma }) => { const c = ma.createKVCache({ batch: 1, kvHeads: 1, capacity: 4, headDim: 4 }); c.dispose(); return { c }; },
    call: (ctx, { c }) => ({
      append: () => c.append(tensor([1, 1, 1, 4]), tensor([1, 1, 1, 4])), attend: () => c.attend(tensor([1, 1, 1, 4])),
      truncate: () => c.truncate([0]), reset: () => c.reset(), lengths: () => c.lengths, byteLength: () => c.byteLength,
      fork: () => c.fork(0, 0), keep: () => c.keep(0, [-1], [0]),
    })[op](),
    type: RangeError, arg: 'cache', says: ['dispose'],
  }]),

  // ---------------------------------------------------------------- Workspace misuse
  ['workspace run after dispose()', {
    setup: ({ ma }) => { const w = ma.createWorkspace({ q: Q, k: K, v: K }); w.dispose(); return { w }; },
    call: (ctx, { w }) => w.run(), type: RangeError, arg: 'workspace', says: ['dispose'],
  }],
  ['workspace run with another layout', { call: ({ ws }) => ws.run({ layout: 'blhd' }), type: RangeError, arg: 'layout' }],
  ['workspace run asking for weights', { call: ({ ws }) => ws.run({ returnWeights: true }), type: TypeError, arg: 'options', says: ['returnWeights'] }],
  ['workspace run with a polluted-name option', { call: ({ ws }) => ws.run({ fullyMasked: 'toString' }), type: TypeError, arg: 'fullyMasked' }],
  ['workspace with a string dimension', { call: ({ ma }) => ma.createWorkspace({ q: [1, 2, 3, '4'], k: K, v: K }), type: TypeError, arg: 'q.shape' }],
  ['workspace of 3 GiB', { call: ({ ma }) => ma.createWorkspace({ q: [1, 1, 3, 268435456], k: K, v: K }), type: RangeError, arg: 'q', says: ['2147483647'] }],
];

// MASKATTN_HOSTILE_ROW=<exact row name>: run that row only (replaying one, or checking an old build).
const ONLY = process.env.MASKATTN_HOSTILE_ROW;

test('the hostile table has at least 60 rows', () => {
  assert.ok(ROWS.length >= 60, `${ROWS.length} rows`);
  assert.equal(new Set(ROWS.map(([name]) => name)).size, ROWS.length, 'row names are unique');
});

for (const build of BUILDS) {
  describe(`${build.name} build: hostile input`, () => {
    let ma;
    let guard;
    before(async () => {
      ma = await init(build.options);
      guard = heapGuard(ma);
    });
    after(() => guard.dispose());

    test(`${ROWS.length} rows: the right error, named; nothing written`, () => {
      const problems = [];
      for (const [name, row] of ROWS) {
        if (ONLY !== undefined && name !== ONLY) continue;
        const ctx = { ma, ...base(), cache: guard.cache, ring: guard.ring, paged: guard.paged, ws: guard.ws, kv: guard.kv, cacheQ: guard.cacheQ };
        let state;
        try {
          state = row.setup ? row.setup(ctx) : undefined;
          const record = guard.run(() => row.call(ctx, state));
          const e = record.error;
          if (!e) throw new Error('no error: the mistake was accepted');
          const Own = row.type === TypeError ? MaskAttnTypeError : MaskAttnRangeError;
          if (!(e instanceof Own)) throw new Error(`threw ${e?.constructor?.name} (${e?.name}: ${e?.message}), expected the library's ${row.type.name}`);
          if (e.argument !== row.arg) throw new Error(`argument is '${e.argument}', expected '${row.arg}' ("${e.message}")`);
          for (const s of row.says ?? [])
            if (!e.message.includes(s)) throw new Error(`message "${e.message}" should say "${s}"`);
          row.after?.(state);
          guard.check(record, name, row.caches ? row.caches(state) : []);
        } catch (error) {
          problems.push(`${name}: ${error.message}`);
        } finally {
          if (row.cleanup) row.cleanup(state);
        }
      }
      assert.ok(problems.length === 0, `\n  ${problems.join('\n  ')}`);
    });

    test('getters are read once: a getter that changes its answer cannot make a copy overflow', () => {
      const { q, k, v } = base();
      const plain = ma.attention(q, k, v, { causal: true, allowed: { data: new Uint8Array(15).fill(1), shape: [3, 5] } }).output.data;
      // q.data: the right array for the checks, a long one afterwards; the mask: the full mask,
      // then a 1-byte array (the kernel must never read past it).
      const q2 = { shape: Q };
      const gq = withGetter(q2, 'data', [q.data, new Float32Array(1 << 16).fill(9)]);
      const allowed = { shape: [3, 5] };
      const ga = withGetter(allowed, 'data', [new Uint8Array(15).fill(1), new Uint8Array(1)]);
      const options = {};
      const gc = withGetter(options, 'causal', [true, 'not a boolean']);
      Object.defineProperty(options, 'allowed', { value: allowed, enumerable: true });
      const record = guard.run(() => ma.attention(q2, k, v, options));
      assert.equal(record.error, null, record.error?.message);
      assert.deepEqual(record.returned.output.data, plain);
      for (const g of [gq, ga, gc]) readsOnce(g);
      guard.check({ ...record, wasmCalls: 1 }, 'read-once call');
    });

    test('prototype pollution takes no effect (attention, Workspace, KV cache)', () => {
      const { q, k, v } = base();
      const run = () => {
        const ws = ma.createWorkspace({ q: Q, k: K, v: K });
        ws.q.set(q.data); ws.k.set(k.data); ws.v.set(v.data);
        ws.run();
        const cache = ma.createKVCache({ batch: 1, kvHeads: 1, capacity: 8, headDim: 4 });
        cache.append(k, v);
        const out = [ma.attention(q, k, v).output.data, Float32Array.from(ws.output), cache.attend(q, { causal: false }).output.data];
        ws.dispose();
        cache.dispose();
        return out;
      };
      const clean = run();
      const polluted = {
        causal: true, scale: 100, keyLengths: [1], queryLengths: [0], window: [0, 0], prefix: 3, softcap: 1, fullyMasked: 'nan',
        align: 'top-left', layout: 'blhd', returnWeights: true, returnLse: true, returnStats: true, allowed: { data: new Uint8Array(1), shape: [1] },
        bias: { data: new Float32Array([-Infinity]), shape: [1] }, segments: { query: [1, 1, 1], key: [2, 2, 2, 2, 2] }, alibiSlopes: [9, 9],
        querySegments: new Int32Array(3), keySegments: new Int32Array(5), allowedShape: [9, 9, 9, 9], counts: [0], dims: [1, 1, 1, 1],
        dtype: 'float16', window_: 1, kvHeads: 9, valueDim: 9, threads: 9, simd: false,
      };
      try {
        Object.assign(Object.prototype, polluted);  // eslint-disable-line no-extend-native
        const dirty = run();
        for (let n = 0; n < clean.length; ++n) assert.deepEqual(dirty[n], clean[n], `result ${n}`);
      } finally {
        for (const key of Object.keys(polluted)) delete Object.prototype[key];
      }
    });

    test('limits come from the library, and are enforced before anything is allocated', () => {
      assert.deepEqual({ ...ma.limits }, { maxBytes: 2 ** 31 - 1, maxSequenceLength: 2 ** 23, maxRingLength: 2 ** 31 - 1 });
      const { k, v } = base();
      // 2 GiB - 4 bytes + 4 more: one float over the limit, named with the limit.
      const over = (ma.limits.maxBytes + 1) / 4;
      const record = guard.run(() => ma.attention({ data: new Float32Array(24), shape: [1, 1, 1, over] }, k, v));
      assert.ok(record.error instanceof RangeError && record.error.argument === 'q', record.error?.message);
      assert.match(record.error.message, /2147483647/);
      assert.equal(record.mallocs.length, 0, 'nothing allocated');
      guard.check(record, 'over the limit');
      // Lengths: the library's own limit, quoted.
      assert.throws(() => ma.attention(tensor([1, 1, ma.limits.maxSequenceLength + 1, 0]), tensor([1, 1, 1, 0]), tensor([1, 1, 1, 1])),
        (e) => e instanceof RangeError && e.argument === 'q' && e.message.includes(String(ma.limits.maxSequenceLength)));
    });

    test('empty tensors with a huge batch: an empty answer at once (no 2^40 rows to visit)', () => {
      const empty = (shape) => ({ data: new Float32Array(0), shape });
      const started = performance.now();
      const r = ma.attention(empty([2 ** 40, 2, 3, 0]), empty([2 ** 40, 1, 5, 0]), empty([2 ** 40, 1, 5, 0]), { causal: true });
      assert.deepEqual(r.output.shape, [2 ** 40, 2, 3, 0]);
      assert.equal(r.output.data.length, 0);
      assert.ok(performance.now() - started < 1000);
    });

    test('mergeAttention reads its parts once, by index, and sizes every block from what it read', () => {
      const { q, k, v } = base();
      const half = (lo, hi) => ma.attention(q, { data: k.data.slice(lo * 4, hi * 4), shape: [1, 1, hi - lo, 4] },
        { data: v.data.slice(lo * 4, hi * 4), shape: [1, 1, hi - lo, 4] }, { returnLse: true });
      const A = half(0, 2);
      const Bp = half(2, 5);
      const plain = ma.mergeAttention([A, Bp]);
      // A Proxy whose length answers 2 then 5000, and whose entries are getters read once.
      const g = changing([2, 5000]);
      const reads = [0, 0];
      const parts = new Proxy([A, Bp], {
        get: (t, key) => {
          if (key === 'length') return g.get();
          if (key === '0' || key === '1') reads[Number(key)] += 1;
          return t[key];
        },
      });
      const record = guard.run(() => ma.mergeAttention(parts));
      assert.equal(record.error, null, record.error?.message);
      readsOnce(g);
      assert.deepEqual(reads, [1, 1], 'each part is read once');
      assert.deepEqual(record.returned.output.data, plain.output.data);
      assert.deepEqual(record.returned.lse.data, plain.lse.data);
      guard.check({ ...record, wasmCalls: 1 }, 'merge through a Proxy');
      // An Array subclass with its own map/flatMap/forEach/iterator: none of them runs.
      class Odd extends Array {
        map() { throw new Error('map ran'); }
        flatMap() { throw new Error('flatMap ran'); }
        forEach() { throw new Error('forEach ran'); }
        [Symbol.iterator]() { throw new Error('the iterator ran'); }
      }
      const odd = Object.setPrototypeOf([A, Bp], Odd.prototype);
      const r2 = guard.run(() => ma.mergeAttention(odd));
      assert.equal(r2.error, null, r2.error?.message);
      assert.deepEqual(r2.returned.output.data, plain.output.data);
      guard.check({ ...r2, wasmCalls: 1 }, 'merge of an Array subclass');
    });

    test('mergeAttention of parts with no rows: an empty answer at once, nothing allocated', () => {
      for (const dims of [[2 ** 45, 1, 0, 8], [2 ** 31, 2 ** 31, 0, 8], [2 ** 32, 1, 0, 8], [1, 2 ** 40, 0, 0], [0, 3, 2, 8]]) {
        const part = { output: { data: new Float32Array(0), shape: dims }, lse: { data: new Float32Array(0), shape: dims.slice(0, 3) } };
        const started = performance.now();
        const record = guard.run(() => ma.mergeAttention([part, part, part]));
        assert.equal(record.error, null, record.error?.message);
        assert.ok(performance.now() - started < 1000, `[${dims}]: ${performance.now() - started} ms`);
        assert.deepEqual(record.returned.output.shape, dims);
        assert.deepEqual(record.returned.lse.shape, dims.slice(0, 3));
        assert.equal(record.returned.output.data.length + record.returned.lse.data.length, 0);
        assert.equal(record.mallocs.length, 0, 'nothing allocated');
        guard.check(record, `merge of no rows [${dims}]`);
      }
    });

    test('quantized caches read back finite at ±FLT_MAX, within the documented bound', () => {
      const FLT_MAX = 3.4028234663852886e38;
      const D = 64;
      const x = new Float32Array(2 * D);
      for (let i = 0; i < 32; ++i) {
        x[i] = [FLT_MAX, -FLT_MAX, FLT_MAX / 4][i % 3];  // row 0, block 0: ±FLT_MAX
        x[32 + i] = -0;                                  // row 0, block 1: -0
        x[D + i] = [1e-37, -1e-38, 3e-39][i % 3];        // row 1: a scale whose reciprocal overflows, subnormals
        x[D + 32 + i] = (i % 2 ? -1 : 1) * 1e-45 * i;
      }
      for (const dtype of ['q8', 'q4']) {
        const c = ma.createKVCache({ capacity: 2, headDim: D, dtype, keyRotation: 'none' });
        try {
          c.append({ data: x, shape: [1, 1, 2, D] }, { data: x, shape: [1, 1, 2, D] });
          const r = c.read(0);
          for (const [side, got] of [['key', r.key.data], ['value', r.value.data]]) {
            for (let i = 0; i < 2 * D; ++i) assert.ok(Number.isFinite(got[i]), `${dtype} ${side} ${i}: ${got[i]}`);
            // Block 0 of row 0 (amax FLT_MAX) and of row 1 (amax 1e-37: a normal scale).
            for (const [b0, amax] of [[0, FLT_MAX], [D, 1e-37]]) {
              const bound = (dtype === 'q8' ? amax / 254 : amax / 8) * (1 + 1e-5);
              for (let i = b0; i < b0 + 32; ++i) assert.ok(Math.abs(got[i] - x[i]) <= bound, `${dtype} ${side} ${i}: ${got[i]} for ${x[i]}`);
            }
          }
        } finally {
          c.dispose();
        }
      }
    });

    test('mask helpers with a zero dimension answer at once; a typed array\'s length getter is not what they read', async () => {
      const { createCausalMask, createWindowMask, fromKeyPaddingMask, toAdditiveMask, createPaddingMask } = await import('maskattn');
      const started = performance.now();
      assert.equal(createCausalMask(2 ** 40, 0).data.length, 0);
      assert.equal(createWindowMask(0, 2 ** 40, [1, 0]).data.length, 0);
      assert.ok(performance.now() - started < 1000);
      class Short extends Uint8Array { get length() { return 2; } }
      const kpm = fromKeyPaddingMask({ data: new Short([1, 0, 0, 1, 1, 0]), shape: [2, 3] });
      assert.deepEqual(Array.from(kpm.data), [0, 1, 1, 0, 0, 1]);
      assert.equal(toAdditiveMask({ data: new Short([1, 0, 1]), shape: [3] }).data.length, 3);
      assert.throws(() => createPaddingMask(new Proxy([], { get: (t, key) => (key === 'length' ? 2 ** 40 : t[key]) }), 4),
        (e) => e instanceof MaskAttnRangeError && e.argument === 'lengths' && e.message.includes(String(2 ** 40)));
    });

    test('segments with Lk = 0, and nested ids per batch, work', () => {
      const { q } = base();
      const empty = tensor([1, 1, 0, 4]);
      const r = ma.attention(q, empty, empty, { segments: { query: [0, 0, 0], key: [] } });
      assert.ok(r.output.data.every((x) => x === 0), 'fully masked rows give 0');
      const r2 = ma.attention(q, empty, empty, { segments: { query: [[0, 0, 0]], key: [[]] } });
      assert.deepEqual(r2.output.data, r.output.data);
      const { k, v } = base();
      const nested = ma.attention(q, k, v, { segments: { query: [[0, 1, 1]], key: [[0, 0, 1, 1, 1]] } }).output.data;
      const flat = ma.attention(q, k, v, { segments: { query: Int32Array.of(0, 1, 1), key: [0, 0, 1, 1, 1] } }).output.data;
      assert.deepEqual(nested, flat);
    });

    test('views of wasm memory as inputs, even when memory grows before they are copied', () => {
      const { q, k, v } = base();
      const expected = ma.attention(q, k, v, { causal: true }).output.data;
      const ws = ma.createWorkspace({ q: Q, k: K, v: K });
      try {
        ws.q.set(q.data); ws.k.set(k.data); ws.v.set(v.data);
        assert.deepEqual(ma.attention({ data: ws.q, shape: Q }, { data: ws.k, shape: K }, { data: ws.v, shape: K }, { causal: true }).output.data, expected);
        // A mask getter grows wasm memory (old views of it are detached) after q, k, v were read.
        const hog = [];
        const allowed = { shape: [5] };
        Object.defineProperty(allowed, 'data', { get: () => { hog.push(ma.createWorkspace({ q: [1, 1, 1, 1], k: [1, 1, 1 << 24, 1], v: [1, 1, 1, 1] })); return new Uint8Array(5).fill(1); } });
        const out = ma.attention({ data: ws.q, shape: Q }, { data: ws.k, shape: K }, { data: ws.v, shape: K }, { causal: true, allowed }).output.data;
        assert.deepEqual(out, expected);
        hog.forEach((h) => h.dispose());
      } finally {
        ws.dispose();
      }
    });
  });
}
