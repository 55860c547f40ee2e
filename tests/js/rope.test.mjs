// RoPE in the JavaScript API (docs/semantics.md, "Rotary position embedding"), on every build:
// attention(q, k, v, { rope }) against reference.mjs's own float64 rotation (key j at j + offset,
// query i at Lk - Lq + i + offset), both layouts, dims < D, GQA, causal, blhd; a cache created with
// { rope } stores keys rotated at their absolute positions (read() shows them) and attend() rotates
// the queries: appends in steps equal one attention() with rope over the whole sequence (float32,
// float16, q8, ring); the configuration reports the resolved rope; bad values are named.
import { BUILDS } from './builds.mjs';  // first: turns on relaxed SIMD in Node 20
import { describe, test, before } from 'node:test';
import assert from 'node:assert/strict';
import { throwsArg } from './throws.mjs';
import { init } from 'maskattn';
import { referenceAttention, rotated, rng, uniform, mismatch, roundToHalf } from './reference.mjs';

const tensor = (data, shape) => ({ data, shape });
const randomTensor = (random, B, H, L, D) => tensor(uniform(random, B * H * L * D), [B, H, L, D]);

// The kernel's output against the float64 reference, with the naive fp32 reference as yardstick.
function agrees(label, got, q, k, v, options, tol = {}) {
  const want = referenceAttention(q, k, v, options);
  const naive = referenceAttention(q, k, v, options, 'f32');
  const bad = mismatch(got.output.data, want.output.data, { naive: naive.output.data, ...tol });
  assert.equal(bad, null, `${label}: ${bad}`);
}

// The first n positions of sequence 0 of a [1, H, L, D] tensor.
function prefix(t, n) {
  const [B, H, L, D] = t.shape;
  const data = new Float32Array(B * H * n * D);
  for (let h = 0; h < H; ++h) data.set(t.data.subarray(h * L * D, h * L * D + n * D), h * n * D);
  return tensor(data, [B, H, n, D]);
}
// Positions [from, to) of a [1, H, L, D] tensor.
function slice(t, from, to) {
  const [B, H, L, D] = t.shape;
  const data = new Float32Array(B * H * (to - from) * D);
  for (let h = 0; h < H; ++h) data.set(t.data.subarray((h * L + from) * D, (h * L + to) * D), h * (to - from) * D);
  return tensor(data, [B, H, to - from, D]);
}

const CASES = [
  ['halves, prefill, causal', { B: 1, Hq: 2, Hkv: 2, Lq: 40, Lk: 40, D: 32 }, { causal: true, rope: {} }],
  ['interleaved, GQA decode, offset', { B: 2, Hq: 8, Hkv: 2, Lq: 1, Lk: 150, D: 64 }, { causal: true, rope: { theta: 500000, layout: 'interleaved', offset: 1000 } }],
  ['halves, dims 16 of 48, GQA', { B: 1, Hq: 4, Hkv: 1, Lq: 5, Lk: 70, D: 48 }, { causal: true, rope: { dims: 16 } }],
  ['interleaved, dims 8, window, blhd', { B: 2, Hq: 2, Hkv: 1, Lq: 9, Lk: 33, D: 16, blhd: true }, { causal: true, window: [10, 0], layout: 'blhd', rope: { dims: 8, layout: 'interleaved', offset: 3 } }],
];

for (const buildInfo of BUILDS) {
  describe(`${buildInfo.name} build`, () => {
    let ma;
    before(async () => {
      ma = await init(buildInfo.options);
    });

    for (const [name, s, options] of CASES) {
      test(`attention with rope: ${name}`, () => {
        const random = rng(name.length * 7919);
        const shape = (H, L, D) => (s.blhd ? [s.B, L, H, D] : [s.B, H, L, D]);
        const q = tensor(uniform(random, s.B * s.Hq * s.Lq * s.D), shape(s.Hq, s.Lq, s.D));
        const k = tensor(uniform(random, s.B * s.Hkv * s.Lk * s.D), shape(s.Hkv, s.Lk, s.D));
        const v = tensor(uniform(random, s.B * s.Hkv * s.Lk * s.D), shape(s.Hkv, s.Lk, s.D));
        const got = ma.attention(q, k, v, options);
        agrees(name, got, q, k, v, options);
        const plain = ma.attention(q, k, v, { ...options, rope: undefined });
        assert.notEqual(mismatch(got.output.data, plain.output.data, { atol: 1e-3 }), null, 'rope changes the result');
      });
    }

    for (const [dtype, extra] of [['float32', {}], ['float16', {}], ['q8', {}], ['float32', { window: 40 }]]) {
      test(`cache { rope }: ${dtype}${extra.window ? ' ring' : ''}: appends in steps equal one attention() with rope`, () => {
        const random = rng(dtype.length * 31 + (extra.window ?? 0));
        const H = 2, Hq = 4, D = 32, L = 90;
        const rope = { theta: 10000, layout: 'interleaved', offset: 5 };
        const cache = ma.createKVCache({ kvHeads: H, capacity: extra.window ? 48 : 100, headDim: D, dtype, rope, ...extra });
        try {
          assert.deepEqual({ ...cache.config.rope }, { theta: 10000, dims: D, layout: 'interleaved', offset: 5 });
          // float16 keys are rounded after rotation: the model rounds the rotated keys the same way.
          const k = randomTensor(random, 1, H, L, D);
          const v = randomTensor(random, 1, H, L, D);
          let at = 0;
          for (const n of [50, 30, 1, 1, 8]) {
            cache.append(slice(k, at, at + n), slice(v, at, at + n));
            at += n;
            const Lq = n === 1 ? 1 : 3;
            const q = randomTensor(random, 1, Hq, Lq, D);
            const got = cache.attend(q);
            const window = extra.window ? [extra.window - 1, 0] : undefined;
            const options = { causal: true, window, rope };
            if (dtype === 'float32') {
              agrees(`${dtype} after ${at}`, got, q, prefix(k, at), prefix(v, at), options);
            } else {
              // Over the stored (rotated, rounded or quantized) keys, with only Q rotated by the reference.
              const stored = cache.read(0);
              const kStored = tensor(stored.key.data, [1, ...stored.key.shape]);
              const vStored = tensor(stored.value.data, [1, ...stored.value.shape]);
              const qRot = rotated({ B: 1, H: Hq, L: Lq, D, at: (b, h, l, d) => q.data[(h * Lq + l) * D + d] }, rope, at - Lq);
              const qr = tensor(Float32Array.from({ length: Hq * Lq * D }, (_, n) => qRot.at(0, Math.floor(n / (Lq * D)), Math.floor(n / D) % Lq, n % D)), [1, Hq, Lq, D]);
              const want = referenceAttention(qr, kStored, vStored, { causal: true });
              // q8: the decode kernel quantizes the rotated queries (docs/semantics.md "Quantized caches").
              const bad = mismatch(got.output.data, want.output.data, { atol: dtype === 'q8' ? 2e-2 : 1e-5 });
              assert.equal(bad, null, `${dtype} after ${at}: ${bad}`);
              if (dtype === 'float16') {
                // read() returns the stored keys: rotated (reference.mjs) then rounded to half.
                const kRot = rotated({ B: 1, H, L: at, D, at: (b, h, l, d) => k.data[(h * L + l) * D + d] }, rope, 0, Math.fround);
                let worst = 0;
                for (let h = 0; h < H; ++h)
                  for (let l = 0; l < at; ++l)
                    for (let d = 0; d < D; ++d)
                      worst = Math.max(worst, Math.abs(stored.key.data[(h * at + l) * D + d] - roundToHalf(kRot.at(0, h, l, d))));
                assert.ok(worst <= 2 ** -10, `stored keys are the rotated keys rounded: worst ${worst}`);
              }
            }
          }
        } finally {
          cache.dispose();
        }
      });
    }

    test('Workspace.run with rope equals attention with rope', () => {
      const random = rng(4242);
      const q = randomTensor(random, 1, 4, 6, 16), k = randomTensor(random, 1, 2, 20, 16), v = randomTensor(random, 1, 2, 20, 16);
      const options = { causal: true, rope: { layout: 'interleaved', offset: 17 } };
      const ws = ma.createWorkspace({ q: q.shape, k: k.shape, v: v.shape });
      try {
        ws.q.set(q.data);
        ws.k.set(k.data);
        ws.v.set(v.data);
        ws.run(options);
        const got = { output: { data: ws.output.slice() } };
        assert.deepEqual(got.output.data, ma.attention(q, k, v, options).output.data, 'run() == attention(), bit for bit');
        agrees('workspace', got, q, k, v, options);
      } finally {
        ws.dispose();
      }
    });

    // The base's derived values: theta^(-2i/dims) grows with i for a base below 1, up to
    // theta^(-(dims-2)/dims), and the angles reach that times 2^32; where either overflows float64
    // the base is refused (rope.theta), by attention() and by createKVCache alike. Expected here
    // from logarithms, apart from the library's pow. Accepted bases give finite results, and where
    // their angles stay moderate (bases >= 0.5), the float64 reference's (this file's Math.pow and
    // Math.cos; at angles near 2^32 x 10^298 one ulp of a pow decides the result, so the C++ suite
    // checks those against its own reference, in the same module).
    test('rope bases: refused exactly where the frequencies or the angles would overflow; accepted ones finite', () => {
      const accepted = (theta, dims) =>
        Number.isFinite(theta) && theta > 0 && (dims <= 2 || -Math.log(theta) * ((dims - 2) / dims) + Math.log(2 ** 32) < Math.log(Number.MAX_VALUE));
      const edge = (dims) => Math.exp(Math.log(2 ** 32 / Number.MAX_VALUE) * (dims / (dims - 2)));
      const random = rng(2024);
      for (const D of [4, 26, 28, 64, 512]) {
        const thetas = [5e-324, 1e-320, 1e-310, 2 ** -1022, 1e-300, 1e-299, 1e-30, 0.5, 1, 10000, 1e300, Number.MAX_VALUE, 0, -1, NaN, -Infinity];
        if (edge(D) >= 5e-324) thetas.push(edge(D) * (1 + 1e-9), edge(D) * (1 - 1e-9));
        const q = randomTensor(random, 1, 2, 3, D), k = randomTensor(random, 1, 1, 9, D), v = randomTensor(random, 1, 1, 9, D);
        for (const theta of thetas)
          for (const offset of [0, 2 ** 31 - 1]) {
            const options = { causal: true, rope: { theta, offset } };
            const label = `D ${D}, theta ${theta}, offset ${offset}`;
            if (!accepted(theta, D)) {
              throwsArg(() => ma.attention(q, k, v, options), RangeError, 'rope.theta');
              throwsArg(() => ma.createKVCache({ capacity: 4, headDim: D, rope: { theta, offset } }), RangeError, 'rope.theta');
              continue;
            }
            const got = ma.attention(q, k, v, options);
            assert.ok(got.output.data.every(Number.isFinite), `${label}: finite`);
            if (theta >= 0.5 && offset === 0) agrees(label, got, q, k, v, options);
            const cache = ma.createKVCache({ capacity: 9, headDim: D, rope: { theta, offset } });
            try {
              cache.append(k, v);
              const out = cache.attend(q).output.data;
              assert.ok(out.every(Number.isFinite), `${label}: cache output finite`);
              if (theta >= 0.5 && offset === 0) agrees(`${label} (cache)`, { output: { data: out } }, q, k, v, options);
            } finally {
              cache.dispose();
            }
          }
      }
      // The message says what was given, the dims and the bound.
      const q = randomTensor(random, 1, 1, 1, 64);
      throwsArg(() => ma.attention(q, q, q, { rope: { theta: 1e-320 } }), RangeError, 'rope.theta', 'too small', 'dims = 64', '9.9998886718268');
      throwsArg(() => ma.attention(q, q, q, { rope: { theta: 5e-324, dims: 28 } }), RangeError, 'rope.theta', 'dims = 28');
      assert.ok(ma.attention(q, q, q, { rope: { theta: 5e-324, dims: 26 } }).output.data.every(Number.isFinite), 'dims 26 takes any base');
    });

    test('rope errors are named; a cache refuses a per-call rope', () => {
      const q = tensor(new Float32Array(2 * 8), [1, 1, 2, 8]);
      const k = tensor(new Float32Array(4 * 8), [1, 1, 4, 8]);
      throwsArg(() => ma.attention(q, k, k, { rope: { theta: 0 } }), RangeError, 'rope.theta', 'finite and > 0');
      throwsArg(() => ma.attention(q, k, k, { rope: { theta: Infinity } }), RangeError, 'rope.theta');
      throwsArg(() => ma.attention(q, k, k, { rope: { theta: '10000' } }), TypeError, 'rope.theta');
      throwsArg(() => ma.attention(q, k, k, { rope: { dims: 5 } }), RangeError, 'rope.dims', 'even');
      throwsArg(() => ma.attention(q, k, k, { rope: { dims: 10 } }), RangeError, 'rope.dims', 'D = 8');
      throwsArg(() => ma.attention(q, k, k, { rope: { layout: 'neox' } }), TypeError, 'rope.layout', "'halves' or 'interleaved'");
      throwsArg(() => ma.attention(q, k, k, { rope: { offset: 2 ** 31 } }), RangeError, 'rope.offset');
      throwsArg(() => ma.attention(q, k, k, { rope: { offset: -3 } }), RangeError, 'rope.offset');
      // dims and offset cross as int64 through a float64: beyond 2^53 they are refused here, with the value given.
      throwsArg(() => ma.attention(q, k, k, { rope: { offset: 2 ** 53 } }), RangeError, 'rope.offset', String(2 ** 53));
      throwsArg(() => ma.attention(q, k, k, { rope: { offset: -1e300 } }), RangeError, 'rope.offset', '1e+300');
      throwsArg(() => ma.attention(q, k, k, { rope: { offset: 2 ** 40 } }), RangeError, 'rope.offset', String(2 ** 40));
      throwsArg(() => ma.attention(q, k, k, { rope: { dims: 2 ** 31 } }), RangeError, 'rope.dims', String(2 ** 31));
      throwsArg(() => ma.attention(q, k, k, { rope: { dims: -(2 ** 60) } }), RangeError, 'rope.dims', String(-(2 ** 60)));
      throwsArg(() => ma.attention(q, k, k, { rope: { dims: NaN } }), RangeError, 'rope.dims', 'NaN');
      throwsArg(() => ma.attention(q, k, k, { rope: { theta: 10000n } }), TypeError, 'rope.theta', '10000');
      const odd = tensor(new Float32Array(2 * 7), [1, 1, 2, 7]);
      const oddK = tensor(new Float32Array(4 * 7), [1, 1, 4, 7]);
      throwsArg(() => ma.attention(odd, oddK, oddK, { rope: {} }), RangeError, 'rope.dims', 'odd');
      throwsArg(() => ma.createKVCache({ capacity: 8, headDim: 8, rope: { dims: 3 } }), RangeError, 'rope.dims');
      throwsArg(() => ma.createKVCache({ capacity: 8, headDim: 8, rope: { theta: -1 } }), RangeError, 'rope.theta');
      throwsArg(() => ma.createKVCache({ capacity: 8, headDim: 8, rope: { layout: 1 } }), TypeError, 'rope.layout');
      const cache = ma.createKVCache({ capacity: 8, headDim: 8, rope: {} });
      try {
        assert.deepEqual({ ...cache.config.rope }, { theta: 10000, dims: 8, layout: 'halves', offset: 0 });
        cache.append(k, k);
        throwsArg(() => cache.attend(q, { rope: {} }), RangeError, 'rope', "cache's own");
        const plain = ma.createKVCache({ capacity: 8, headDim: 8 });
        assert.equal(plain.config.rope, null);
        plain.dispose();
      } finally {
        cache.dispose();
      }
    });
  });
}
