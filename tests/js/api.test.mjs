// The JavaScript API against the float64 reference (tests/js/reference.mjs), on both builds
// (SIMD128 and scalar): every option, both layouts, GQA, broadcast masks, fully-masked policies,
// extra outputs, the Workspace path, initialisation, errors and out-of-memory.
//
// Tolerance policy (one line each, as the contract asks):
//   ATOL = 1e-5 absolute on O, weights and lse for unit-scale inputs: the kernel accumulates in fp32
//   and the reference in f64; the contract bounds the gap by 1e-5 absolute for such inputs.
//   Where inputs are not unit-scale (huge logits, huge biases) the contract's other bound applies:
//   at most 2x the error of a naive fp32 implementation (reference.mjs with 'f32'), never below ATOL.
// Inputs come from a seeded generator; a failure message carries the case name and seed.
import { BUILDS, expectedBackend } from './builds.mjs';  // first: turns on relaxed SIMD in Node 20
import { describe, test, before } from 'node:test';
import assert from 'node:assert/strict';
import { throwsArg } from './throws.mjs';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import path from 'node:path';
import { Tensor as OrtTensor } from 'onnxruntime-web';
import {
  init, simdSupported, relaxedSimdSupported, threadsSupported, version, MaskAttn, Workspace,
} from 'maskattn';
import { referenceAttention, rng, uniform, mismatch } from './reference.mjs';

const ATOL = 1e-5;
const here = fileURLToPath(new URL('.', import.meta.url));

// ------------------------------------------------------------------------------------ helpers

/** Random q, k, v for logical sizes s = { B, Hq, Hkv, Lq, Lk, D, Dv } in `layout`. */
function inputs(s, seed, layout = 'bhld', amplitude = 1) {
  const random = rng(seed);
  const shape = (H, L, D) => (layout === 'blhd' ? [s.B, L, H, D] : [s.B, H, L, D]);
  const make = (H, L, D) => {
    const data = uniform(random, s.B * H * L * D, -amplitude, amplitude);
    return { data, shape: shape(H, L, D) };
  };
  return { q: make(s.Hq, s.Lq, s.D), k: make(s.Hkv, s.Lk, s.D), v: make(s.Hkv, s.Lk, s.Dv ?? s.D), random };
}

/** Runs the library with weights and lse, compares all three with the reference; returns both. */
function check(ma, name, q, k, v, options = {}, { atol = ATOL, naiveBound = false } = {}) {
  const result = ma.attention(q, k, v, { ...options, returnWeights: true, returnLse: true });
  const ref = referenceAttention(q, k, v, options);
  const naive = naiveBound ? referenceAttention(q, k, v, options, 'f32') : null;
  assert.deepEqual(result.output.shape, ref.output.shape, `${name}: output shape`);
  assert.deepEqual(result.weights.shape, ref.weights.shape, `${name}: weights shape`);
  assert.deepEqual(result.lse.shape, ref.lse.shape, `${name}: lse shape`);
  for (const part of ['output', 'weights', 'lse']) {
    assert.ok(result[part].data instanceof Float32Array, `${name}: ${part} is a Float32Array`);
    const bad = mismatch(result[part].data, ref[part].data, { atol, naive: naive?.[part].data });
    assert.equal(bad, null, `${name}: ${part} differs from the reference: ${bad}`);
  }
  return { result, ref };
}

function tensor(data, shape) {
  return { data, shape };
}

const SWEEP = [1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129];

// The case table: [name, logical sizes, layout, options(s, random) -> options]. Each row says why.
const S = { B: 2, Hq: 3, Hkv: 3, Lq: 9, Lk: 9, D: 16, Dv: 16 };
const RECT = { B: 2, Hq: 2, Hkv: 2, Lq: 5, Lk: 13, D: 8, Dv: 8 };      // Lq < Lk (chunked prefill)
const TALL = { B: 2, Hq: 2, Hkv: 2, Lq: 13, Lk: 5, D: 8, Dv: 8 };      // Lq > Lk: early rows see nothing bottom-right
const GQA = { B: 2, Hq: 8, Hkv: 2, Lq: 7, Lk: 11, D: 8, Dv: 8 };
const bits = (random, n, pAllow) => Uint8Array.from({ length: n }, () => (random() < pAllow ? 1 : 0));
const biasValues = (random, n, pMasked) => Float32Array.from({ length: n }, () => (random() < pMasked ? -Infinity : 2 * random() - 1));

const CASES = [
  ['no mask', S, 'bhld', () => ({})],
  ['causal, Lq == Lk (both alignments agree)', S, 'bhld', () => ({ causal: true })],
  ['causal bottom-right, Lq < Lk', RECT, 'bhld', () => ({ causal: true })],
  ['causal top-left, Lq < Lk', RECT, 'bhld', () => ({ causal: true, align: 'top-left' })],
  ['causal bottom-right, Lq > Lk (fully masked leading rows)', TALL, 'bhld', () => ({ causal: true })],
  ['causal top-left, Lq > Lk', TALL, 'bhld', () => ({ causal: true, align: 'top-left' })],
  ['decode: Lq = 1, long Lk, causal', { B: 2, Hq: 4, Hkv: 2, Lq: 1, Lk: 300, D: 16, Dv: 16 }, 'bhld', () => ({ causal: true })],
  ['long decode: Lq = 1, Lk = 4099, D = 64, MQA, key lengths', { B: 2, Hq: 4, Hkv: 1, Lq: 1, Lk: 4099, D: 64, Dv: 64 }, 'bhld', () => ({ causal: true, keyLengths: [4099, 3000] })],
  ['prefill 257 x 257, D = 128, random allowed + bias', { B: 1, Hq: 2, Hkv: 1, Lq: 257, Lk: 257, D: 128, Dv: 128 }, 'blhd', (s, r) => ({
    causal: true, allowed: tensor(bits(r, s.Lq * s.Lk, 0.9), [s.Lq, s.Lk]), bias: tensor(biasValues(r, s.Lk, 0.05), [s.Lk]),
  })],
  ['key/query lengths 0, partial and full, causal bottom-right', { ...RECT, B: 4 }, 'bhld',
    () => ({ causal: true, keyLengths: [13, 0, 6, 9], queryLengths: Int32Array.from([5, 3, 0, 2]) })],
  ['key/query lengths, causal top-left', { ...RECT, B: 3 }, 'bhld',
    () => ({ causal: true, align: 'top-left', keyLengths: [13, 4, 1], queryLengths: [2, 5, 5] })],
  ['key lengths without causal', { ...S, B: 3 }, 'bhld', () => ({ keyLengths: Int32Array.from([1, 9, 4]) })],
  ['window (2, 1) without causal', RECT, 'bhld', () => ({ window: [2, 1] })],
  ['window (3, 0) with causal (local attention)', S, 'bhld', () => ({ causal: true, window: [3, 0] })],
  ['window (0, 0): the diagonal only', RECT, 'bhld', () => ({ window: [0, 0] })],
  ['window (-1, 2): unbounded left', TALL, 'bhld', () => ({ window: [-1, 2], align: 'top-left' })],
  ['window with key lengths (diagonal moves with kLen)', { ...RECT, B: 2 }, 'bhld', () => ({ window: [1, 1], keyLengths: [7, 13] })],
  ['prefix 3 + causal (prefix-LM)', S, 'bhld', () => ({ causal: true, prefix: 3 })],
  ['prefix + window + causal + key lengths', { ...RECT, B: 2 }, 'bhld', () => ({ causal: true, window: [1, 0], prefix: 2, keyLengths: [13, 1] })],
  ['segments (packed documents), flat Int32Array, causal', { B: 2, Hq: 2, Hkv: 2, Lq: 10, Lk: 10, D: 8, Dv: 8 }, 'bhld',
    () => ({ causal: true, segments: { query: Int32Array.from([0, 0, 0, 1, 1, 2, 2, 2, 2, 2, 5, 5, 5, 5, 5, 6, 6, 6, 7, 7]), key: Int32Array.from([0, 0, 0, 1, 1, 2, 2, 2, 2, 2, 5, 5, 5, 5, 5, 6, 6, 6, 7, 7]) } })],
  ['segments as nested arrays, different query and key ids', { B: 2, Hq: 1, Hkv: 1, Lq: 4, Lk: 6, D: 8, Dv: 8 }, 'bhld',
    () => ({ segments: { query: [[1, 2, 3, 1], [0, 0, 9, 9]], key: [[1, 1, 2, 2, 4, 4], [9, 0, 9, 0, 9, 0]] } })],
  ['allowed [Lk]', S, 'bhld', (s, r) => ({ allowed: tensor(bits(r, s.Lk, 0.6), [s.Lk]) })],
  ['allowed [Lq, Lk]', RECT, 'bhld', (s, r) => ({ allowed: tensor(bits(r, s.Lq * s.Lk, 0.6), [s.Lq, s.Lk]) })],
  ['allowed [B, 1, 1, Lk] (key padding)', S, 'bhld', (s, r) => ({ allowed: tensor(bits(r, s.B * s.Lk, 0.7), [s.B, 1, 1, s.Lk]) })],
  ['allowed [B, Hq, Lq, Lk] with causal', RECT, 'bhld', (s, r) => ({ causal: true, allowed: tensor(bits(r, s.B * s.Hq * s.Lq * s.Lk, 0.7), [s.B, s.Hq, s.Lq, s.Lk]) })],
  ['allowed [Hq, 1, 1] (per head) with values other than 0/1', { ...S, Hq: 3 }, 'bhld', () => ({ allowed: tensor(Uint8Array.from([0, 7, 255]), [3, 1, 1]) })],
  ['bias [Lk] with -inf', S, 'bhld', (s, r) => ({ bias: tensor(biasValues(r, s.Lk, 0.3), [s.Lk]) })],
  ['bias [Lq, Lk]', RECT, 'bhld', (s, r) => ({ bias: tensor(biasValues(r, s.Lq * s.Lk, 0), [s.Lq, s.Lk]) })],
  ['bias [B, 1, 1, Lk] with -inf padding', S, 'bhld', (s, r) => ({ bias: tensor(biasValues(r, s.B * s.Lk, 0.4), [s.B, 1, 1, s.Lk]) })],
  ['bias [B, Hq, Lq, Lk] with -inf + allowed [Lq, Lk] + causal', RECT, 'bhld', (s, r) => ({
    causal: true, bias: tensor(biasValues(r, s.B * s.Hq * s.Lq * s.Lk, 0.2), [s.B, s.Hq, s.Lq, s.Lk]),
    allowed: tensor(bits(r, s.Lq * s.Lk, 0.8), [s.Lq, s.Lk]),
  })],
  ['bias with -1e4, -1e9, -3.4e38 on some keys (not masks: they underflow)', S, 'bhld',
    () => ({ bias: tensor(Float32Array.from([0, -1e4, 0.5, -1e9, 0, -3.4e38, 0.25, 0, -1e4]), [9]) })],
  ['ALiBi + causal', GQA, 'bhld', () => ({ causal: true, alibiSlopes: [0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625] })],
  ['ALiBi bottom-right with Lq < Lk, no causal (|d(i) - j| both sides)', RECT, 'bhld', () => ({ alibiSlopes: Float32Array.from([0.3, 1.1]) })],
  ['ALiBi top-left with key lengths', { ...RECT, B: 2 }, 'bhld', () => ({ align: 'top-left', alibiSlopes: [0.7, 0.2], keyLengths: [8, 13] })],
  ['softcap 0.5 (strongly capping) with bias', S, 'bhld', (s, r) => ({ softcap: 0.5, scale: 1, bias: tensor(biasValues(r, s.Lk, 0.2), [s.Lk]) })],
  ['softcap 30 with large inputs + causal', S, 'bhld', () => ({ softcap: 30, scale: 2, causal: true })],
  ['GQA 8 query heads / 2 kv heads, causal', GQA, 'bhld', () => ({ causal: true })],
  ['MQA 4 / 1 with key lengths', { B: 2, Hq: 4, Hkv: 1, Lq: 6, Lk: 9, D: 8, Dv: 8 }, 'bhld', () => ({ keyLengths: [9, 2] })],
  ['blhd layout, GQA, causal, key lengths', GQA, 'blhd', () => ({ causal: true, keyLengths: [11, 5] })],
  ['blhd layout with allowed, bias and window', GQA, 'blhd', (s, r) => ({
    window: [4, 1], allowed: tensor(bits(r, s.B * s.Lk, 0.8), [s.B, 1, 1, s.Lk]), bias: tensor(biasValues(r, s.Hq * s.Lq * s.Lk, 0.1), [s.Hq, s.Lq, s.Lk]),
  })],
  ['Dv < D', { B: 1, Hq: 2, Hkv: 2, Lq: 6, Lk: 6, D: 8, Dv: 3 }, 'bhld', () => ({ causal: true })],
  ['Dv > D, blhd', { B: 2, Hq: 2, Hkv: 1, Lq: 5, Lk: 7, D: 5, Dv: 12 }, 'blhd', () => ({ causal: true })],
  ['explicit scale 0.3', S, 'bhld', () => ({ scale: 0.3 })],
  ['scale 0: uniform over allowed keys', S, 'bhld', () => ({ scale: 0, causal: true })],
  ['negative scale', S, 'bhld', () => ({ scale: -0.7, causal: true })],
  ['D = 0: scale defaults to 1, uniform weights', { B: 2, Hq: 2, Hkv: 2, Lq: 4, Lk: 6, D: 0, Dv: 5 }, 'bhld', () => ({ causal: true })],
  ['Lk = 0: every row fully masked', { B: 2, Hq: 2, Hkv: 2, Lq: 3, Lk: 0, D: 4, Dv: 4 }, 'bhld', () => ({})],
  ['Lq = 0', { B: 2, Hq: 2, Hkv: 2, Lq: 0, Lk: 5, D: 4, Dv: 4 }, 'bhld', () => ({ causal: true })],
  ['B = 0', { B: 0, Hq: 2, Hkv: 2, Lq: 3, Lk: 5, D: 4, Dv: 4 }, 'bhld', () => ({})],
  ['H = 0', { B: 2, Hq: 0, Hkv: 0, Lq: 3, Lk: 5, D: 4, Dv: 4 }, 'bhld', () => ({})],
  ['everything at once (blhd, GQA, top-left)', { B: 3, Hq: 4, Hkv: 2, Lq: 12, Lk: 17, D: 8, Dv: 6 }, 'blhd', (s, r) => ({
    causal: true, align: 'top-left', keyLengths: [17, 10, 0], queryLengths: [12, 7, 3], window: [6, 2], prefix: 2,
    segments: { query: Int32Array.from({ length: s.B * s.Lq }, (_, n) => (n % s.Lq < 9 ? 1 : 2)), key: Int32Array.from({ length: s.B * s.Lk }, (_, n) => (n % s.Lk < 11 ? 1 : 2)) },
    allowed: tensor(bits(r, s.B * s.Lk, 0.9), [s.B, 1, 1, s.Lk]), bias: tensor(biasValues(r, s.Lq * s.Lk, 0.05), [s.Lq, s.Lk]),
    alibiSlopes: [0.5, 0.25, 0.125, 0.0625], softcap: 20, fullyMasked: 'uniform',
  })],
  ['everything at once, bottom-right, nan policy', { B: 2, Hq: 4, Hkv: 1, Lq: 9, Lk: 21, D: 16, Dv: 8 }, 'bhld', (s, r) => ({
    causal: true, keyLengths: [21, 12], queryLengths: [9, 4], window: [5, -1], prefix: 3,
    bias: tensor(biasValues(r, s.B * s.Lk, 0.1), [s.B, 1, 1, s.Lk]), alibiSlopes: [1, 0.5, 0.25, 0.125], softcap: 10, fullyMasked: 'nan',
  })],
];

// ------------------------------------------------------------------------------------ module-level

test('simdSupported() is true in Node 20, and version matches package.json', async () => {
  assert.equal(simdSupported(), true);
  const { default: pkg } = await import('maskattn/package.json', { with: { type: 'json' } });
  assert.equal(version, pkg.version);
});

test('init is idempotent: one instance per build; auto picks SIMD128 here', async () => {
  const [a, b] = await Promise.all([init({ simd: true }), init({ simd: true })]);
  assert.equal(a, b);
  assert.equal(await init(), a);
  assert.equal(await init({ simd: 'auto' }), a);
  const s = await init({ simd: false });
  assert.notEqual(s, a);
  assert.equal(await init({ simd: false }), s);
  assert.ok(a instanceof MaskAttn);
});

test('init rejects bad options (a throw or a rejected promise)', async () => {
  const fails = async (fn, argument, text) => {
    let error = null;
    try {
      await fn();
    } catch (e) {
      error = e;
    }
    assert.ok(error instanceof TypeError, `TypeError for ${argument}, got ${error}`);
    assert.equal(error.argument, argument);
    assert.ok(error.message.includes(text), error.message);
  };
  await fails(() => init({ simd: 'yes' }), 'simd', 'yes');
  await fails(() => init(42), 'options', '42');
});

// A fresh copy of the module (its own instance cache): Node keys ES modules by URL, query included.
let freshCount = 0;
const freshModule = () => import(new URL(`../../js/load.js?fresh=${++freshCount}`, import.meta.url).href);

test('init options: wasmBinary, and a failed load can be retried', async () => {
  const m = await freshModule();
  const bytes = readFileSync(new URL('../../dist/maskattn-simd.wasm', import.meta.url));
  const broken = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 99]);  // a wasm header, then garbage
  const plain = { simd: true, relaxed: false, threads: 1 };  // the build whose bytes these are
  await assert.rejects(m.init({ ...plain, wasmBinary: broken }));
  const ma = await m.init({ ...plain, wasmBinary: bytes });
  assert.equal(ma.backend.arch, 'simd128');
  assert.equal(await m.init(plain), ma);
});

test('init options: locateFile says where the .wasm comes from', async () => {
  const m = await freshModule();
  const requests = [];
  const server = createServer((req, res) => {
    requests.push(req.url);
    const file = new URL(`../../dist/${path.basename(req.url)}`, import.meta.url);
    res.writeHead(200, { 'Content-Type': 'application/wasm' });
    res.end(readFileSync(file));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const calls = [];
    const ma = await m.init({
      simd: false,
      locateFile: (file, build) => {
        calls.push([file, build]);
        return `http://127.0.0.1:${server.address().port}/wasm/${file}`;
      },
    });
    assert.deepEqual(calls, [['maskattn-scalar.wasm', 'maskattn-scalar']]);
    assert.deepEqual(requests, ['/wasm/maskattn-scalar.wasm']);
    assert.equal(ma.backend.arch, 'scalar');
  } finally {
    server.close();
  }
});

test('engines without SIMD128: auto picks the scalar build, simd: true rejects', async () => {
  const m = await freshModule();
  const validate = WebAssembly.validate;
  WebAssembly.validate = () => false;  // as on an engine without SIMD128 (the probe fails)
  try {
    assert.equal(m.simdSupported(), false);
    await assert.rejects(m.init({ simd: true }), (e) => e instanceof RangeError && e.argument === 'simd' && /SIMD128/.test(e.message));
    const ma = await m.init();
    assert.equal(ma.backend.simd, false);
    assert.equal(ma.backend.arch, 'scalar');
    assert.equal(await m.init({ simd: false }), ma);
  } finally {
    WebAssembly.validate = validate;
  }
});

test('every WebAssembly build takes the same masking decisions (SIMD128, scalar, relaxed, threads)', async () => {
  const [simd, ...others] = await Promise.all(BUILDS.map((b) => init(b.options)));
  const s = { B: 2, Hq: 4, Hkv: 2, Lq: 33, Lk: 65, D: 8, Dv: 8 };
  const { q, k, v, random } = inputs(s, 777);
  const options = {
    causal: true, window: [20, 3], keyLengths: [65, 30], queryLengths: [33, 17], prefix: 4,
    allowed: tensor(bits(random, s.Lq * s.Lk, 0.85), [s.Lq, s.Lk]), returnWeights: true,
  };
  const a = simd.attention(q, k, v, options);
  for (const other of others) {
    const b = other.attention(q, k, v, options);
    for (let n = 0; n < a.weights.data.length; ++n)
      assert.equal(a.weights.data[n] === 0, b.weights.data[n] === 0, `weight ${n}: masked in ${other.backend.build} only`);
    assert.equal(mismatch(a.output.data, b.output.data, { atol: ATOL }), null, other.backend.build);
  }
});

// ------------------------------------------------------------------------------------ per build

for (const buildInfo of BUILDS) {
  describe(`${buildInfo.name} build`, () => {
    let ma;
    before(async () => {
      ma = await init(buildInfo.options);
    });

    test('backend fields', () => {
      assert.deepEqual({ ...ma.backend }, expectedBackend(buildInfo, version));
      assert.ok(Object.isFrozen(ma.backend));
    });

    for (const [name, s, layout, makeOptions] of CASES) {
      test(`matches the reference: ${name}`, () => {
        const seed = name.length * 131 + s.Lq * 7 + s.Lk;
        const { q, k, v, random } = inputs(s, seed, layout, name.startsWith('softcap 30') ? 3 : 1);
        check(ma, `${name} (seed ${seed})`, q, k, v, { ...makeOptions(s, random), ...(layout === 'blhd' ? { layout } : {}) });
      });
    }

    test('lengths around every SIMD width and tile size (causal, key padding, both alignments)', () => {
      for (const L of SWEEP) {
        const s = { B: 1, Hq: 1, Hkv: 1, Lq: L, Lk: L, D: 5, Dv: 3 };
        const { q, k, v } = inputs(s, 1000 + L);
        check(ma, `Lq = Lk = ${L}, causal`, q, k, v, { causal: true });
        check(ma, `Lq = Lk = ${L}, keyLengths ${L - 1}`, q, k, v, { keyLengths: [L - 1], window: [L >> 1, 0] });
        const d = { B: 1, Hq: 2, Hkv: 1, Lq: 3, Lk: L, D: 4, Dv: 4 };
        const x = inputs(d, 2000 + L);
        check(ma, `Lq = 3, Lk = ${L}, bottom-right`, x.q, x.k, x.v, { causal: true });
        check(ma, `Lq = 3, Lk = ${L}, top-left`, x.q, x.k, x.v, { causal: true, align: 'top-left' });
      }
      for (const D of [1, 2, 3, 4, 5, 7, 8, 9, 17, 33, 64, 65]) {
        const s = { B: 1, Hq: 1, Hkv: 1, Lq: 4, Lk: 9, D, Dv: D };
        const { q, k, v } = inputs(s, 3000 + D);
        check(ma, `D = Dv = ${D}`, q, k, v, { causal: true });
      }
    });

    test('random masks on tile-boundary sizes (mixed tiles everywhere)', () => {
      for (const L of [15, 16, 17, 63, 64, 65, 127, 128, 129]) {
        const s = { B: 2, Hq: 2, Hkv: 1, Lq: L, Lk: L + 3, D: 8, Dv: 5 };
        const { q, k, v, random } = inputs(s, 5000 + L);
        const seg = (n, len) => Int32Array.from({ length: n }, (_, i) => Math.floor((i % len) / 23));
        check(ma, `L = ${L}, random allowed/bias, segments, lengths`, q, k, v, {
          allowed: tensor(bits(random, s.B * s.Lq * s.Lk, 0.8), [s.B, 1, s.Lq, s.Lk]),
          bias: tensor(biasValues(random, s.Hq * s.Lk, 0.1), [s.Hq, 1, s.Lk]),
          segments: { query: seg(s.B * s.Lq, s.Lq), key: seg(s.B * s.Lk, s.Lk) },
          keyLengths: [s.Lk, L >> 1], queryLengths: [L, L - 1], window: [L >> 2, 5],
        });
      }
    });

    test('dims instead of shape: onnxruntime-web tensors and look-alikes', () => {
      const s = { B: 1, Hq: 2, Hkv: 1, Lq: 4, Lk: 6, D: 8, Dv: 8 };
      const { q, k, v } = inputs(s, 41);
      const ort = (t) => new OrtTensor('float32', t.data, t.shape);
      const expected = ma.attention(q, k, v, { causal: true }).output.data;
      const viaOrt = ma.attention(ort(q), ort(k), ort(v), { causal: true });
      assert.deepEqual(viaOrt.output.data, expected);
      assert.deepEqual(viaOrt.output.shape, [1, 2, 4, 8]);
      const dimsOnly = (t) => ({ data: t.data, dims: Object.freeze([...t.shape]), type: 'float32' });
      const bias = { data: new Float32Array(6).fill(0.25), dims: [6] };
      const r = ma.attention(dimsOnly(q), dimsOnly(k), dimsOnly(v), { causal: true, bias });
      assert.equal(mismatch(r.output.data, referenceAttention(q, k, v, { causal: true, bias }).output.data, { atol: ATOL }), null);
    });

    test('results are copies: inputs untouched, outputs survive later calls', () => {
      const s = { B: 1, Hq: 1, Hkv: 1, Lq: 5, Lk: 5, D: 4, Dv: 4 };
      const { q, k, v } = inputs(s, 5);
      const before = [q.data.slice(), k.data.slice(), v.data.slice()];
      const r1 = ma.attention(q, k, v, { causal: true });
      const kept = r1.output.data.slice();
      assert.deepEqual([q.data, k.data, v.data], before);
      assert.equal(r1.output.data.byteLength, r1.output.data.buffer.byteLength, 'output owns its buffer');
      const big = inputs({ B: 1, Hq: 1, Hkv: 1, Lq: 64, Lk: 64, D: 64, Dv: 64 }, 6);
      ma.attention(big.q, big.k, big.v);
      assert.deepEqual(r1.output.data, kept);
      const r2 = ma.attention(q, k, v, { causal: true });
      assert.deepEqual(r2.output.data, kept, 'same inputs, same bits');
    });

    test('fully masked rows: zero, nan and uniform policies', () => {
      // Rows with nothing to attend, for four different reasons: key length 0 (batch 1), query
      // padding (rows >= 4 of batch 0), bias -inf on every key of row 2 in head 1, and bottom-right
      // causal rows whose diagonal is negative (batch 2: Lq 6 > kLen 3).
      const s = { B: 3, Hq: 2, Hkv: 1, Lq: 6, Lk: 5, D: 8, Dv: 4 };
      const { q, k, v } = inputs(s, 99);
      const bias = new Float32Array(s.Hq * s.Lq * s.Lk);
      bias.fill(-Infinity, (1 * s.Lq + 2) * s.Lk, (1 * s.Lq + 3) * s.Lk);
      const base = {
        causal: true, keyLengths: [5, 0, 3], queryLengths: [4, 6, 6], bias: tensor(bias, [s.Hq, s.Lq, s.Lk]),
      };
      for (const fullyMasked of [undefined, 'zero', 'nan', 'uniform']) {
        const options = fullyMasked ? { ...base, fullyMasked } : base;
        const { result, ref } = check(ma, `policy ${fullyMasked ?? 'default'}`, q, k, v, options);
        const rows = ref.fullyMasked;
        assert.ok(rows.reduce((a, b) => a + b) >= 10, 'the problem has many fully masked rows');
        const lse = result.lse.data;
        rows.forEach((m, row) => {
          if (!m) return;
          assert.equal(lse[row], -Infinity, `lse of fully masked row ${row} is -inf under every policy`);
          const o = result.output.data.subarray(row * s.Dv, (row + 1) * s.Dv);
          const w = result.weights.data.subarray(row * s.Lk, (row + 1) * s.Lk);
          if ((fullyMasked ?? 'zero') === 'zero') {
            assert.ok(o.every((x) => x === 0) && w.every((x) => x === 0), `row ${row}: zeros`);
          } else if (fullyMasked === 'nan') {
            assert.ok(o.every(Number.isNaN) && w.every(Number.isNaN), `row ${row}: NaN`);
          } else {
            assert.ok(w.every((x) => Math.abs(x - 1 / s.Lk) < 1e-7), `row ${row}: 1/Lk weights`);
          }
        });
        if ((fullyMasked ?? 'zero') !== 'nan') {
          assert.ok(!result.output.data.some(Number.isNaN), 'no NaN anywhere');
          assert.ok(!result.weights.data.some(Number.isNaN), 'no NaN in weights');
        }
      }
      // Lk = 0 with uniform: nothing to average, so 0 (and lse -inf).
      const e = inputs({ B: 1, Hq: 1, Hkv: 1, Lq: 2, Lk: 0, D: 3, Dv: 3 }, 7);
      const r = ma.attention(e.q, e.k, e.v, { fullyMasked: 'uniform', returnLse: true, returnWeights: true });
      assert.deepEqual(Array.from(r.output.data), [0, 0, 0, 0, 0, 0]);
      assert.deepEqual(Array.from(r.lse.data), [-Infinity, -Infinity]);
      assert.equal(r.weights.data.length, 0);
    });

    test('masked keys are never read: NaN in padding cannot leak', () => {
      const s = { B: 2, Hq: 2, Hkv: 2, Lq: 4, Lk: 8, D: 4, Dv: 4 };
      const { q, k, v } = inputs(s, 1234);
      const keyLengths = [5, 8];
      const allowedKeys = Uint8Array.from([1, 1, 0, 1, 1, 1, 1, 1]);  // key 2 masked for every row
      const biasKeys = Float32Array.from([0, 0, 0, 0, 0, 0, -Infinity, 0]);  // key 6 too
      const poison = (t, b, h, j, D) => t.data.fill(NaN, ((b * s.Hkv + h) * s.Lk + j) * D, ((b * s.Hkv + h) * s.Lk + j + 1) * D);
      const clean = { q: tensor(q.data.slice(), q.shape), k: tensor(k.data.slice(), k.shape), v: tensor(v.data.slice(), v.shape) };
      for (let h = 0; h < 2; ++h) {
        for (const j of [5, 6, 7]) { poison(k, 0, h, j, s.D); poison(v, 0, h, j, s.Dv); }  // padding of batch 0
        for (const b of [0, 1]) for (const j of [2, 6]) { poison(k, b, h, j, s.D); poison(v, b, h, j, s.Dv); }
      }
      // Query padding rows are not read either.
      q.data.fill(NaN, ((1 * s.Hq + 1) * s.Lq + 3) * s.D, ((1 * s.Hq + 1) * s.Lq + 4) * s.D);
      const options = { keyLengths, queryLengths: [4, 3], allowed: tensor(allowedKeys, [s.Lk]), bias: tensor(biasKeys, [1, 1, 1, s.Lk]) };
      const r = ma.attention(q, k, v, options);
      assert.ok(!r.output.data.some(Number.isNaN), 'no NaN leaked from masked keys or padding rows');
      const ref = referenceAttention(clean.q, clean.k, clean.v, options);
      assert.equal(mismatch(r.output.data, ref.output.data, { atol: ATOL }), null);
    });

    test('NaN and +inf in attended data propagate (never hidden)', () => {
      const s = { B: 1, Hq: 1, Hkv: 1, Lq: 3, Lk: 4, D: 4, Dv: 4 };
      const { q, k, v } = inputs(s, 4321);
      k.data[1 * s.D + 2] = NaN;  // key 1: attended by rows 1 and 2 (causal), not by row 0
      const r = ma.attention(q, k, v, { causal: true, align: 'top-left' });
      assert.ok(r.output.data.subarray(0, 4).every(Number.isFinite), 'row 0 does not attend key 1');
      assert.ok(r.output.data.subarray(4).every(Number.isNaN), 'rows 1 and 2 are NaN');
      const fresh = inputs(s, 4321);
      const bias = tensor(Float32Array.from([0, Infinity, 0, 0]), [4]);
      const r2 = ma.attention(fresh.q, fresh.k, fresh.v, { bias });
      assert.ok(r2.output.data.every(Number.isNaN), '+inf bias: the row output is NaN');
      const biasNaN = tensor(Float32Array.from([0, 0, NaN, 0]), [4]);
      const r3 = ma.attention(fresh.q, fresh.k, fresh.v, { bias: biasNaN, causal: true, align: 'top-left' });
      assert.ok(r3.output.data.subarray(0, 8).every(Number.isFinite), 'rows 0, 1 do not attend key 2');
      assert.ok(r3.output.data.subarray(8).every(Number.isNaN), 'NaN bias is not a mask: row 2 is NaN');
    });

    test('large logits and huge biases: within 2x a naive fp32 implementation', () => {
      const s = { B: 1, Hq: 2, Hkv: 2, Lq: 17, Lk: 17, D: 16, Dv: 16 };
      // |s| up to ~1e4: q, k entries in [-25, 25] with scale 1.
      const big = inputs(s, 8080, 'bhld', 25);
      check(ma, 'logits ~1e4', big.q, big.k, big.v, { scale: 1, causal: true }, { naiveBound: true });
      check(ma, 'logits ~1e4, negative scale', big.q, big.k, big.v, { scale: -1 }, { naiveBound: true });
      const { q, k, v } = inputs(s, 8081);
      for (const c of [-1e4, -1e9, -3.4e38]) {
        // Every allowed key of the row gets the same huge bias: no longer a mask, the softmax is
        // over those (fp32-rounded) logits.
        const bias = tensor(new Float32Array(s.Lk).fill(c), [s.Lk]);
        check(ma, `constant bias ${c}`, q, k, v, { bias, causal: true }, { naiveBound: true });
      }
    });

    test('a constant bias is shift invariant (within fp32 rounding of the logits)', () => {
      const s = { B: 2, Hq: 2, Hkv: 2, Lq: 9, Lk: 9, D: 16, Dv: 16 };
      const { q, k, v } = inputs(s, 55);
      const plain = ma.attention(q, k, v, { causal: true, keyLengths: [9, 4] }).output.data;
      for (const c of [1, 3.5, -7, -100]) {
        const bias = tensor(new Float32Array(s.Lk).fill(c), [s.Lk]);
        const shifted = ma.attention(q, k, v, { causal: true, keyLengths: [9, 4], bias }).output.data;
        // Adding c rounds each logit by at most ulp(|c|)/2 in fp32; |v| <= 1, so O moves by at
        // most about 2 * ulp(|c|) (plus the usual few fp32 ulps of the sum).
        const ulp = 2 ** (Math.floor(Math.log2(Math.abs(c))) - 23);
        assert.equal(mismatch(shifted, plain, { atol: 2 * ulp + 1e-6 }), null, `bias ${c}`);
      }
    });

    test('returnWeights / returnLse / returnStats only when asked', () => {
      const s = { B: 1, Hq: 1, Hkv: 1, Lq: 256, Lk: 256, D: 16, Dv: 16 };
      const { q, k, v } = inputs(s, 17);
      const plain = ma.attention(q, k, v, { causal: true });
      assert.deepEqual(Object.keys(plain), ['output']);
      const off = ma.attention(q, k, v, { causal: true, returnWeights: false, returnLse: false, returnStats: false });
      assert.deepEqual(Object.keys(off), ['output']);
      const causal = ma.attention(q, k, v, { causal: true, returnStats: true, returnLse: true });
      assert.deepEqual(Object.keys(causal).sort(), ['lse', 'output', 'stats']);
      assert.deepEqual(causal.output.data, plain.output.data);
      const full = ma.attention(q, k, v, { returnStats: true }).stats;
      for (const st of [causal.stats, full]) {
        assert.deepEqual(Object.keys(st).sort(), ['threadsUsed', 'tilesFull', 'tilesMixed', 'tilesSkipped']);
        for (const x of Object.values(st)) assert.ok(Number.isInteger(x) && x >= 0);
      }
      assert.ok(causal.stats.tilesSkipped > 0, 'causal skips whole tiles above the diagonal');
      assert.ok(causal.stats.tilesMixed > 0, 'the diagonal tiles are mixed');
      assert.equal(full.tilesSkipped, 0);
      assert.equal(full.tilesMixed, 0);
      // Weights rows sum to 1 over the attended keys.
      const w = ma.attention(q, k, v, { causal: true, returnWeights: true }).weights.data;
      for (let i = 0; i < s.Lq; i += 37) {
        let sum = 0;
        for (let j = 0; j < s.Lk; ++j) sum += w[i * s.Lk + j];
        assert.ok(Math.abs(sum - 1) < 1e-5, `row ${i} sums to ${sum}`);
        assert.ok(w.subarray(i * s.Lk + i + 1, (i + 1) * s.Lk).every((x) => x === 0), `row ${i}: zero above the diagonal`);
      }
    });

    // -------------------------------------------------------------------------------- Workspace

    test('Workspace: zero-copy views, run twice, equal to attention()', () => {
      const s = { B: 2, Hq: 4, Hkv: 2, Lq: 7, Lk: 12, D: 8, Dv: 6 };
      const { q, k, v, random } = inputs(s, 2024);
      const ws = ma.createWorkspace({ q: q.shape, k: k.shape, v: v.shape, returnWeights: true, returnLse: true });
      try {
        assert.ok(ws instanceof Workspace);
        assert.deepEqual(ws.shapes, { q: [2, 4, 7, 8], k: [2, 2, 12, 8], v: [2, 2, 12, 6], output: [2, 4, 7, 6], weights: [2, 4, 7, 12], lse: [2, 4, 7] });
        for (const [name, n] of [['q', q.data.length], ['k', k.data.length], ['v', v.data.length], ['output', 2 * 4 * 7 * 6], ['weights', 2 * 4 * 7 * 12], ['lse', 2 * 4 * 7]]) {
          assert.ok(ws[name] instanceof Float32Array, name);
          assert.equal(ws[name].length, n, `${name} length`);
          assert.equal(ws[name].buffer, ws.q.buffer, `${name} is a view of wasm memory`);
        }
        // Zero-copy: a write through one view is seen through a fresh one.
        ws.q.set(q.data);
        ws.k.set(k.data);
        ws.v.set(v.data);
        assert.deepEqual(ws.q, q.data);
        const opts1 = { causal: true, keyLengths: [12, 5], bias: tensor(biasValues(random, s.Lk, 0.2), [s.Lk]) };
        const outputView = ws.output;
        const r1 = ws.run(opts1);
        assert.deepEqual(r1, {});
        const expected1 = ma.attention(q, k, v, { ...opts1, returnWeights: true, returnLse: true });
        assert.deepEqual(ws.output, expected1.output.data, 'run() == attention(), bit for bit');
        assert.deepEqual(outputView, expected1.output.data, 'a view taken before run() shows the result (no growth in between)');
        assert.deepEqual(ws.weights, expected1.weights.data);
        assert.deepEqual(ws.lse, expected1.lse.data);
        const ref = referenceAttention(q, k, v, opts1);
        assert.equal(mismatch(ws.output, ref.output.data, { atol: ATOL }), null);
        // Second run, other options, same buffers.
        const opts2 = { window: [2, 2], alibiSlopes: [1, 0.5, 0.25, 0.125], fullyMasked: 'nan', queryLengths: [7, 2], returnStats: true };
        const r2 = ws.run(opts2);
        assert.deepEqual(Object.keys(r2), ['stats']);
        const { returnStats, ...rest2 } = opts2;
        const expected2 = ma.attention(q, k, v, { ...rest2, returnWeights: true, returnLse: true });
        assert.deepEqual(ws.output, expected2.output.data);
        assert.deepEqual(ws.weights, expected2.weights.data);
        assert.deepEqual(ws.lse, expected2.lse.data);
        // Same options again: same bits.
        ws.run(opts1);
        assert.deepEqual(ws.output, expected1.output.data);
      } finally {
        ws.dispose();
      }
    });

    test('Workspace: blhd layout, no extra outputs', () => {
      const s = { B: 2, Hq: 2, Hkv: 1, Lq: 5, Lk: 9, D: 4, Dv: 4 };
      const { q, k, v } = inputs(s, 303, 'blhd');
      const ws = ma.createWorkspace({ q: q.shape, k: k.shape, v: v.shape, layout: 'blhd' });
      try {
        assert.equal(ws.weights, null);
        assert.equal(ws.lse, null);
        assert.deepEqual(ws.shapes.output, [2, 5, 2, 4]);
        ws.q.set(q.data); ws.k.set(k.data); ws.v.set(v.data);
        ws.run({ causal: true, layout: 'blhd' });
        assert.deepEqual(ws.output, ma.attention(q, k, v, { causal: true, layout: 'blhd' }).output.data);
        throwsArg(() => ws.run({ layout: 'bhld' }), RangeError, 'layout', 'blhd', 'bhld');
      } finally {
        ws.dispose();
      }
    });

    test('Workspace: views valid after wasm memory grows', () => {
      const s = { B: 1, Hq: 2, Hkv: 2, Lq: 6, Lk: 6, D: 8, Dv: 8 };
      const { q, k, v } = inputs(s, 4242);
      const ws = ma.createWorkspace({ q: q.shape, k: k.shape, v: v.shape });
      let big = null;
      try {
        const held = ws.q;
        held.set(q.data);
        ws.k.set(k.data);
        ws.v.set(v.data);
        const memoryBefore = held.buffer;
        // Force growth: a workspace larger than all of the current memory (its pages are never
        // touched, so this costs address space, not RAM).
        const n = Math.ceil(memoryBefore.byteLength / 4) + (1 << 20);
        big = ma.createWorkspace({ q: [1, 1, 1, 1], k: [1, 1, n, 1], v: [1, 1, n, 1] });
        assert.notEqual(ws.q.buffer, memoryBefore, 'memory grew (new ArrayBuffer)');
        assert.ok(ws.q.buffer.byteLength > memoryBefore.byteLength);
        // Views read from the workspace after growth are live and hold the data written before.
        assert.deepEqual(ws.q, q.data);
        assert.deepEqual(ws.k, k.data);
        ws.run({ causal: true });
        assert.deepEqual(ws.output, ma.attention(q, k, v, { causal: true }).output.data);
        // A view kept across growth must never silently alias other memory: it is either still
        // live or detached (length 0), in which case re-reading from the workspace is the way.
        // (Shared memory, in the threaded builds, never detaches: an old view still sees the same bytes.)
        const live = held.buffer instanceof SharedArrayBuffer ? ((ws.q[0] = 12.5), held[0] === 12.5) : held.buffer === ws.q.buffer;
        assert.ok(held.length === 0 || live, 'held view: live or detached');
      } finally {
        big?.dispose();
        ws.dispose();
      }
    });

    test('Workspace: errors, validation before writing, dispose', () => {
      const s = { B: 1, Hq: 1, Hkv: 1, Lq: 4, Lk: 4, D: 4, Dv: 4 };
      const ws = ma.createWorkspace({ q: [1, 1, 4, 4], k: [1, 1, 4, 4], v: [1, 1, 4, 4] });
      const { q, k, v } = inputs(s, 9);
      ws.q.set(q.data); ws.k.set(k.data); ws.v.set(v.data);
      ws.output.fill(7);
      throwsArg(() => ws.run({ keyLengths: [5] }), RangeError, 'keyLengths[0]', '5', '4');
      throwsArg(() => ws.run({ window: [-3, 0] }), RangeError, 'window', '-3');
      throwsArg(() => ws.run({ bias: tensor(new Float32Array(3), [3]) }), RangeError, 'bias', '3', '4');
      assert.ok(ws.output.every((x) => x === 7), 'a failed run writes nothing');
      throwsArg(() => ws.run({ returnWeights: true }), TypeError, 'options', 'returnWeights');
      throwsArg(() => ws.run({ causa: true }), TypeError, 'options', 'causa');
      throwsArg(() => ws.run(null), TypeError, 'options', 'null');
      ws.run();
      assert.ok(!ws.output.every((x) => x === 7));
      ws.dispose();
      throwsArg(() => ws.q, RangeError, 'workspace', 'dispose');
      throwsArg(() => ws.output, RangeError, 'workspace', 'dispose');
      throwsArg(() => ws.run(), RangeError, 'workspace', 'dispose');
      ws.dispose();  // twice is harmless
      throwsArg(() => ma.createWorkspace(null), TypeError, 'shapes', 'null');
      throwsArg(() => ma.createWorkspace({ q: [1, 4, 4], k: [1, 1, 4, 4], v: [1, 1, 4, 4] }), RangeError, 'q.shape', '4 dimensions', '[1,4,4]');
      throwsArg(() => ma.createWorkspace({ q: [1, 1, 4, 4], k: [1, 1, 4, 4], v: [1, 1, 4, 4], returnLse: 1 }), TypeError, 'returnLse', '1');
    });

    // -------------------------------------------------------------------------------- errors

    test('wrong typed-array types: TypeError with argument', () => {
      const s = { B: 1, Hq: 2, Hkv: 1, Lq: 3, Lk: 4, D: 4, Dv: 4 };
      const { q, k, v } = inputs(s, 11);
      const f64 = (t) => ({ data: Float64Array.from(t.data), shape: t.shape });
      throwsArg(() => ma.attention(f64(q), k, v), TypeError, 'q.data', 'Float32Array', 'Float64Array');
      throwsArg(() => ma.attention(q, { data: Array.from(k.data), shape: k.shape }, v), TypeError, 'k.data', 'Float32Array', 'array');
      throwsArg(() => ma.attention(q, k, { data: new Uint8Array(16), shape: v.shape }), TypeError, 'v.data', 'Float32Array', 'Uint8Array');
      throwsArg(() => ma.attention(q, k, v, { allowed: tensor(new Float32Array(4), [4]) }), TypeError, 'allowed.data', 'Uint8Array', 'Float32Array');
      throwsArg(() => ma.attention(q, k, v, { bias: tensor(new Float64Array(4), [4]) }), TypeError, 'bias.data', 'Float32Array', 'Float64Array');
      throwsArg(() => ma.attention(q, k, v, { keyLengths: new Float32Array([4]) }), TypeError, 'keyLengths', 'Int32Array', 'Float32Array');
      throwsArg(() => ma.attention(q, k, v, { keyLengths: [1.5] }), TypeError, 'keyLengths', 'integer', '1.5');
      throwsArg(() => ma.attention(q, k, v, { queryLengths: new Uint32Array([3]) }), TypeError, 'queryLengths', 'Int32Array', 'Uint32Array');
      throwsArg(() => ma.attention(q, k, v, { alibiSlopes: new Float64Array(2) }), TypeError, 'alibiSlopes', 'Float32Array', 'Float64Array');
      throwsArg(() => ma.attention(q, k, v, { segments: { query: new Float32Array(3), key: new Int32Array(4) } }), TypeError, 'segments.query', 'Int32Array', 'Float32Array');
      throwsArg(() => ma.attention(q, k, v, { segments: { query: new Int32Array(3) } }), TypeError, 'segments', 'key');
      throwsArg(() => ma.attention(null, k, v), TypeError, 'q', 'null');
      throwsArg(() => ma.attention(q, { data: k.data }, v), TypeError, 'k.shape', 'undefined');
      throwsArg(() => ma.attention(q, k, v, null), TypeError, 'options', 'null');
      throwsArg(() => ma.attention(q, k, v, { causal: 1 }), TypeError, 'causal', '1');
      throwsArg(() => ma.attention(q, k, v, { returnWeights: 'yes' }), TypeError, 'returnWeights', 'yes');
      throwsArg(() => ma.attention(q, k, v, { scale: '0.5' }), TypeError, 'scale', '0.5');
      throwsArg(() => ma.attention(q, k, v, { softcap: '2' }), TypeError, 'softcap', '2');
      throwsArg(() => ma.attention(q, k, v, { layout: 'bshd' }), TypeError, 'layout', 'bshd');
      throwsArg(() => ma.attention(q, k, v, { align: 'left' }), TypeError, 'align', 'left');
      throwsArg(() => ma.attention(q, k, v, { fullyMasked: 'ignore' }), TypeError, 'fullyMasked', 'ignore');
      throwsArg(() => ma.attention(q, k, v, { window: 3 }), TypeError, 'window', '3');
    });

    test('unknown option: TypeError naming it', () => {
      const { q, k, v } = inputs({ B: 1, Hq: 1, Hkv: 1, Lq: 2, Lk: 2, D: 2, Dv: 2 }, 1);
      throwsArg(() => ma.attention(q, k, v, { casual: true }), TypeError, 'options', 'casual');
      throwsArg(() => ma.attention(q, k, v, { key_lengths: [2] }), TypeError, 'options', 'key_lengths');
    });

    test('wrong lengths, shapes and values: RangeError naming the argument, expected and given', () => {
      const s = { B: 2, Hq: 4, Hkv: 2, Lq: 3, Lk: 5, D: 4, Dv: 6 };
      const { q, k, v } = inputs(s, 12);
      const t = (data, shape) => tensor(data, shape);
      throwsArg(() => ma.attention(t(q.data.subarray(1), q.shape), k, v), RangeError, 'q.data', `${q.data.length}`, `${q.data.length - 1}`);
      throwsArg(() => ma.attention(t(q.data, [2, 4, 12]), k, v), RangeError, 'q.shape', '4 dimensions', '[2,4,12]');
      throwsArg(() => ma.attention(t(q.data, [2, 4, -3, -4]), k, v), RangeError, 'q.shape', '-3');
      throwsArg(() => ma.attention(t(q.data, [2, 4, 1.5, 16]), k, v), RangeError, 'q.shape', '1.5');
      throwsArg(() => ma.attention(q, t(new Float32Array(2 * 3 * 5 * 4), [2, 3, 5, 4]), t(new Float32Array(2 * 3 * 5 * 6), [2, 3, 5, 6])), RangeError, 'k', 'divide', '4', '3');
      throwsArg(() => ma.attention(q, k, v, { keyLengths: [5] }), RangeError, 'keyLengths', '2', '1');
      throwsArg(() => ma.attention(q, k, v, { keyLengths: [5, 6] }), RangeError, 'keyLengths[1]', 'Lk = 5', '6');
      throwsArg(() => ma.attention(q, k, v, { queryLengths: [-1, 3] }), RangeError, 'queryLengths[0]', 'Lq = 3', '-1');
      throwsArg(() => ma.attention(q, k, v, { allowed: t(new Uint8Array(3), [3]) }), RangeError, 'allowed', 'expected 1 or 5', 'given 3');
      throwsArg(() => ma.attention(q, k, v, { allowed: t(new Uint8Array(3 * 3 * 5), [3, 3, 5]) }), RangeError, 'allowed', 'expected 1 or 4', 'given 3');
      throwsArg(() => ma.attention(q, k, v, { bias: t(new Float32Array(5), [5, 1, 1, 1]) }), RangeError, 'bias', 'expected 1 or 2', 'given 5');
      throwsArg(() => ma.attention(q, k, v, { bias: t(new Float32Array(5), [1, 1, 1, 1, 5]) }), RangeError, 'bias.shape', '1 to 4 dimensions', '[1,1,1,1,5]');
      throwsArg(() => ma.attention(q, k, v, { bias: t(new Float32Array(4), [5]) }), RangeError, 'bias.data', '5', '4');
      throwsArg(() => ma.attention(q, k, v, { window: [-2, 0] }), RangeError, 'window', '-1', '-2');
      throwsArg(() => ma.attention(q, k, v, { window: [0, 1.5] }), RangeError, 'window', '1.5');
      throwsArg(() => ma.attention(q, k, v, { prefix: -1 }), RangeError, 'prefix', '0', '-1');
      throwsArg(() => ma.attention(q, k, v, { softcap: -1 }), RangeError, 'softcap', '0', '-1');
      throwsArg(() => ma.attention(q, k, v, { softcap: NaN }), RangeError, 'softcap', 'NaN');
      throwsArg(() => ma.attention(q, k, v, { scale: Infinity }), RangeError, 'scale', 'finite', 'Infinity');
      throwsArg(() => ma.attention(q, k, v, { scale: NaN }), RangeError, 'scale', 'finite', 'NaN');
      throwsArg(() => ma.attention(q, k, v, { alibiSlopes: [1, 2] }), RangeError, 'alibiSlopes', '4', '2');
      throwsArg(() => ma.attention(q, k, v, { alibiSlopes: [1, NaN, 1, 1] }), RangeError, 'alibiSlopes[1]', 'finite', 'nan');
      throwsArg(() => ma.attention(q, k, v, { segments: { query: [0, 0, 0], key: new Int32Array(10) } }), RangeError, 'segments.query', '6', '3');
      throwsArg(() => ma.attention(q, k, v, { segments: { query: new Int32Array(6), key: new Int32Array(9) } }), RangeError, 'segments.key', '10', '9');
      // Sequence lengths are limited to 2^23 (cheap to ask with D = 0: no data).
      const L = 2 ** 23 + 1;
      throwsArg(() => ma.attention(t(new Float32Array(0), [1, 1, L, 0]), t(new Float32Array(0), [1, 1, 3, 0]), t(new Float32Array(3), [1, 1, 3, 1])), RangeError, 'q', '8388608', `${L}`);
      // Byte counts beyond wasm32 memory.
      throwsArg(() => ma.attention(t(new Float32Array(0), [65536, 65536, 65536, 1]), k, v), RangeError, 'q', 'bytes');
    });

    test('q, k and v shapes that disagree: RangeError naming the tensor, expected and given dims', () => {
      // q [B=2, Hq=4, Lq=3, D=4]; k and v must agree on B, D (k), Hkv and Lk (v). Each case gives
      // one wrong dimension, once larger and once smaller than expected (a larger one must not be
      // accepted just because the buffer is big enough).
      const shape = (dims) => tensor(new Float32Array(dims.reduce((a, b) => a * b, 1)).fill(0.5), dims);
      const q = shape([2, 4, 3, 4]);
      const cases = [
        ['k batch 3 (q has 2)', [2, 3], () => [shape([3, 2, 5, 4]), shape([3, 2, 5, 6])], 'k'],
        ['k batch 1 (q has 2)', [2, 1], () => [shape([1, 2, 5, 4]), shape([2, 2, 5, 6])], 'k'],
        ['k head dim 5 (q has 4)', [4, 5], () => [shape([2, 2, 5, 5]), shape([2, 2, 5, 6])], 'k'],
        ['k head dim 3 (q has 4)', [4, 3], () => [shape([2, 2, 5, 3]), shape([2, 2, 5, 6])], 'k'],
        ['v batch 3 (q has 2)', [2, 3], () => [shape([2, 2, 5, 4]), shape([3, 2, 5, 6])], 'v'],
        ['v heads 4 (k has 2)', [2, 4], () => [shape([2, 2, 5, 4]), shape([2, 4, 5, 6])], 'v'],
        ['v heads 1 (k has 2)', [2, 1], () => [shape([2, 2, 5, 4]), shape([2, 1, 5, 6])], 'v'],
        ['v length 7 (k has 5)', [5, 7], () => [shape([2, 2, 5, 4]), shape([2, 2, 7, 6])], 'v'],
        ['v length 4 (k has 5)', [5, 4], () => [shape([2, 2, 5, 4]), shape([2, 2, 4, 6])], 'v'],
      ];
      const problems = [];
      for (const [name, [expected, given], make, argument] of cases) {
        const [k, v] = make();
        for (const layout of ['bhld', 'blhd']) {
          const swap = (t) => (layout === 'blhd' ? tensor(t.data, [t.shape[0], t.shape[2], t.shape[1], t.shape[3]]) : t);
          try {
            ma.attention(swap(q), swap(k), swap(v), { layout });
            problems.push(`${name}, ${layout}: accepted`);
          } catch (e) {
            const says = (n) => new RegExp(`\\b${n}\\b`).test(e.message);
            if (!(e instanceof RangeError) || e.argument !== argument || !says(expected) || !says(given))
              problems.push(`${name}, ${layout}: ${e.name} argument=${e.argument} "${e.message}" (want RangeError on ${argument} saying ${expected} and ${given})`);
          }
        }
      }
      assert.ok(problems.length === 0, `shape mismatches not reported as required:\n  ${problems.join('\n  ')}`);
    });

    test('returnWeights beyond wasm32 memory: RangeError before any allocation', () => {
      const q = tensor(new Float32Array(40000), [1, 1, 40000, 1]);
      const k = tensor(new Float32Array(40000), [1, 1, 40000, 1]);
      throwsArg(() => ma.attention(q, k, k, { returnWeights: true }), RangeError, 'returnWeights', 'bytes', '[1, 1, 40000, 40000]');
    });

    // -------------------------------------------------------------------------------- memory

    // Out of memory for real: every size below is within the library's limits (maskattn.limits:
    // 2^31 - 1 bytes per buffer), but wasm32 memory (4 GiB) cannot hold it at that moment. fill()
    // takes memory in blocks of 1 GiB down to 1 MiB until less than 1 MiB is left (address space
    // only: nothing writes to the blocks, so they cost no RAM); release(size) frees one block of
    // that size, so exactly that much room (and under 1 MiB more) is free.
    const fill = () => {
      const blocks = [];
      for (let size = 2 ** 30; size >= 2 ** 20; size /= 4) {
        for (;;) {
          try {
            blocks.push({ size, ws: ma.createWorkspace({ q: [1, 1, 1, 1], k: [1, 1, size / 4, 1], v: [1, 1, 1, 1] }) });
          } catch (e) {
            if (e.argument !== 'memory') throw e;
            break;
          }
        }
      }
      return {
        release(size) {
          const i = blocks.findIndex((b) => b.size === size);
          assert.ok(i >= 0, `no block of ${size} bytes to release`);
          blocks.splice(i, 1)[0].ws.dispose();
        },
        dispose: () => blocks.forEach((b) => b.ws.dispose()),
      };
    };

    test('out of memory in attention() leaves the heap intact (no block handed out twice)', () => {
      // The failed call had already taken blocks for q, k, v and the output; they must be freed
      // exactly once. Two workspaces of those sizes must then get separate memory.
      const n = 20000;
      const x = tensor(new Float32Array(n), [1, 1, n, 1]);
      const full = fill();
      try {
        full.release(2 ** 20);  // room for q, k, v and the output (80 kB each), not for 1.6 GB of weights
        throwsArg(() => ma.attention(x, x, x, { returnWeights: true, returnLse: true }), RangeError, 'memory',
          `out of memory: could not allocate ${n * n * 4} bytes in WebAssembly memory`);
      } finally {
        full.dispose();
      }
      const shapes = { q: [1, 1, n, 1], k: [1, 1, n, 1], v: [1, 1, n, 1] };
      const a = ma.createWorkspace(shapes);
      const b = ma.createWorkspace(shapes);
      try {
        const names = ['q', 'k', 'v', 'output'];
        for (const [ws, base] of [[a, 10], [b, 20]]) names.forEach((name, i) => ws[name].fill(base + i));
        for (const [ws, base] of [[a, 10], [b, 20]])
          names.forEach((name, i) => assert.ok(ws[name].every((y) => y === base + i), `workspace ${base / 10}'s ${name} was overwritten: blocks share memory`));
      } finally {
        a.dispose();
        b.dispose();
      }
    });

    // Threaded builds too: out-of-memory near the 4 GB maximum throws std::bad_alloc above 2 GiB
    // of wasm memory, where Emscripten 3.1.6's pthreads glue indexed the exception's refcount
    // with a signed shift (fixed after the link: bindings/fix_exception_refcount.cmake).
    test('out of memory: RangeError, and the module stays usable', () => {
      const small = inputs({ B: 1, Hq: 2, Hkv: 1, Lq: 5, Lk: 7, D: 8, Dv: 8 }, 31337);
      const normal = () => check(ma, 'after out-of-memory', small.q, small.k, small.v, { causal: true, keyLengths: [6] });
      // 1. attention(): JavaScript's malloc of the weights (1.6 GB, within the limit) fails; the
      //    call's other blocks are freed.
      const n = 20000;
      const x = tensor(new Float32Array(n), [1, 1, n, 1]);
      let full = fill();
      try {
        full.release(2 ** 20);
        throwsArg(() => ma.attention(x, x, x, { returnWeights: true }), RangeError, 'memory',
          `out of memory: could not allocate ${n * n * 4} bytes in WebAssembly memory`);
        normal();
        // 2. createWorkspace(): its k (40 MB) fits in a freed 64 MiB, its v (40 MB) does not; k is freed.
        full.release(2 ** 26);
        throwsArg(() => ma.createWorkspace({ q: [1, 1, 1, 1], k: [1, 1, 10_000_000, 1], v: [1, 1, 10_000_000, 1] }), RangeError, 'memory',
          'out of memory: could not allocate 40000000 bytes for v');
        normal();
        // 4. A KV cache that cannot be had (the library's std::vector of K/V storage, 1 GB in all,
        //    with 256 MiB free): std::bad_alloc in C++, caught by the binding, becomes this RangeError.
        full.release(2 ** 28);
        throwsArg(() => ma.createKVCache({ capacity: 8_000_000, headDim: 16 }), RangeError, 'memory',
          'out of memory: the WebAssembly heap cannot hold this cache\'s keys and values');
        normal();
      } finally {
        full.dispose();
      }
      // 3. Inside the library: the decode kernel's accumulators (a register block of 32 rows of
      //    Dv = 2M floats, 256 MB here) are within the limit and pass the library's own pre-check
      //    (the address space could hold them), but the filled memory leaves no room:
      //    std::bad_alloc in C++ becomes this RangeError, exactly (not the pre-check's message).
      //    (Its split-K partials, 64 MB over 4M keys until they were sized by the rows there are,
      //    no longer serve: 32 chunks of one row.)
      const Dv = 2_000_000;
      const ws = ma.createWorkspace({ q: [1, 1, 1, 4], k: [1, 1, 2, 4], v: [1, 1, 2, Dv] });
      full = fill();
      try {
        const oom = 'out of memory: the WebAssembly heap cannot hold this problem\'s scratch space';
        throwsArg(() => ws.run(), RangeError, 'memory', oom);
        throwsArg(() => ws.run({ causal: true }), RangeError, 'memory', oom);  // and again
      } finally {
        full.dispose();
        ws.dispose();
      }
      normal();
    });
  });
}

test('integers beyond int32/int64: rejected or honoured, never wrapped; messages tell the given value', async () => {
  const ma = await init({ simd: true });
  const { q, k, v } = inputs({ B: 1, Hq: 1, Hkv: 1, Lq: 3, Lk: 5, D: 4, Dv: 4 }, 64);
  const problems = [];
  // Lengths and segment ids are int32 in the kernel: a value outside [0, L] is an error even when
  // it would wrap (2^32 + 3 == 3 in an Int32Array).
  for (const [name, options, argument] of [
    ['keyLengths [2^32 + 3]', { keyLengths: [2 ** 32 + 3] }, /^keyLengths/],
    ['queryLengths [2^32 + 1]', { queryLengths: [2 ** 32 + 1] }, /^queryLengths/],
    ['segment id 2^32 (would equal 0)', { segments: { query: [0, 0, 0], key: [2 ** 32, 2 ** 32, 0, 0, 0] } }, /^segments/],
  ]) {
    try {
      ma.attention(q, k, v, options);
      problems.push(`${name}: accepted`);
    } catch (e) {
      if (!(e instanceof RangeError || e instanceof TypeError) || !argument.test(e.argument ?? ''))
        problems.push(`${name}: ${e.name} argument=${e.argument} "${e.message}"`);
    }
  }
  // A prefix or window beyond every position is unbounded in effect: either accepted (same result
  // as the largest meaningful value) or rejected with a message that quotes the value given.
  for (const [name, options, same] of [
    ['prefix 1e20', { prefix: 1e20, causal: true }, { prefix: 5, causal: true }],
    ['window [1e20, 0]', { window: [1e20, 0] }, { window: [-1, 0] }],
  ]) {
    try {
      const r = ma.attention(q, k, v, options);
      assert.deepEqual(r.output.data, ma.attention(q, k, v, same).output.data, name);
    } catch (e) {
      if (!(e instanceof RangeError) || !e.message.includes('100000000000000000000'))
        problems.push(`${name}: ${e.name} argument=${e.argument} "${e.message}" (the value given was 1e20)`);
    }
  }
  assert.ok(problems.length === 0, `\n  ${problems.join('\n  ')}`);
});

test('blocks at wasm addresses >= 2 GiB work (memory may grow to 4 GiB)', () => {
  // The modules are linked with MAXIMUM_MEMORY=4GB, so once 2 GiB are in use, new blocks sit at
  // addresses >= 2^31. An untouched 2 x 1.2 GB workspace gets there without using RAM. Run in a
  // fresh process so that the heap layout (hence the addresses) does not depend on earlier tests.
  const script = `
    import { init } from 'maskattn';
    const out = {};
    for (const [build, initOptions] of [['simd', { simd: true, relaxed: false, threads: 1 }], ['threads', { simd: true, relaxed: false, threads: 2 }], ['scalar', { simd: false }]]) {
      const ma = await init(initOptions);
      const t = (n, shape) => ({ data: Float32Array.from({ length: n }, (_, i) => Math.sin(i + n)), shape });
      const q = t(64, [1, 2, 4, 8]), k = t(48, [1, 1, 6, 8]), v = t(48, [1, 1, 6, 8]);
      const options = { causal: true, keyLengths: [5] };
      const expected = Array.from(ma.attention(q, k, v, options).output.data);
      const hog = ma.createWorkspace({ q: [1, 1, 1, 1], k: [1, 1, 300_000_000, 1], v: [1, 1, 300_000_000, 1] });
      const r = {};
      try { r.attention = Array.from(ma.attention(q, k, v, options).output.data); } catch (e) { r.attention = e.name + ': ' + e.message; }
      try {
        const ws = ma.createWorkspace({ q: q.shape, k: k.shape, v: v.shape });
        ws.q.set(q.data); ws.k.set(k.data); ws.v.set(v.data);
        ws.run(options);
        r.workspace = Array.from(ws.output);
        ws.dispose();
      } catch (e) { r.workspace = e.name + ': ' + e.message; }
      hog.dispose();
      out[build] = { expected, ...r };
    }
    console.log(JSON.stringify(out));
  `;
  const stdout = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: here, encoding: 'utf8' });
  const out = JSON.parse(stdout);
  for (const build of ['simd', 'threads', 'scalar']) {
    for (const path of ['attention', 'workspace']) {
      const got = out[build][path];
      assert.ok(Array.isArray(got), `${build}: ${path} with blocks above 2 GiB threw ${got}`);
      assert.deepEqual(got, out[build].expected, `${build}: ${path} with blocks above 2 GiB`);
    }
  }
});
