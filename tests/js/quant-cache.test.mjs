// Quantized KV caches (dtype 'q8' / 'q4', keyDtype / valueDtype, keyRotation, read()) on every
// build. The format's promises are checked from the documentation (docs/semantics.md, "Quantized
// caches"): per-block bounds (q8 |x̂ - x| <= amax/254, q4 <= amax/8), per-block scales, non-finite
// blocks, the byte length. Attention is checked against the float64 reference (reference.mjs) over
// the cache's own contents (read()):
//   - queries whose blocks are exact multiples of their q8 step are not changed by the kernel's
//     quantization: ATOL 1e-5, as for float caches;
//   - any other queries: within the documented bound (e^(2δ) - 1) max|V| + 1e-5, with δ from
//     Cauchy-Schwarz: scale ||q|| sqrt(D) max ||k̂|| / 254.
import { BUILDS } from './builds.mjs';  // first: turns on relaxed SIMD in Node 20
import { describe, test, before } from 'node:test';
import assert from 'node:assert/strict';
import { throwsArg } from './throws.mjs';
import { init } from 'maskattn';
import { referenceAttention, rng, uniform, mismatch } from './reference.mjs';

const ATOL = 1e-5;

/** Queries q8 represents exactly: per block of 32, integers in [-127, 127] (one of them 127) times 2^-e. */
function exactQueries(random, rows, D) {
  const q = new Float32Array(rows * D);
  for (let r = 0; r < rows; ++r)
    for (let b0 = 0; b0 < D; b0 += 32) {
      const step = 2 ** -(5 + Math.floor(random() * 4));
      const len = Math.min(32, D - b0);
      for (let i = 0; i < len; ++i) q[r * D + b0 + i] = step * Math.round((random() * 2 - 1) * 127);
      q[r * D + b0 + Math.floor(random() * len)] = 127 * step;
    }
  return q;
}

/** read(b) of every sequence as full [1, H, L, D] histories (rows before `start` are zero, never attended). */
function contents(cache, b) {
  const { kvHeads: H, headDim: D, valueDim: Dv } = cache.config;
  const r = cache.read(b);
  const n = r.key.shape[1];
  const L = r.start + n;
  const k = new Float32Array(H * L * D);
  const v = new Float32Array(H * L * Dv);
  for (let h = 0; h < H; ++h) {
    k.set(r.key.data.subarray(h * n * D, (h + 1) * n * D), (h * L + r.start) * D);
    v.set(r.value.data.subarray(h * n * Dv, (h + 1) * n * Dv), (h * L + r.start) * Dv);
  }
  return { k: { data: k, shape: [1, H, L, D] }, v: { data: v, shape: [1, H, L, Dv] }, start: r.start, n };
}

/** cache.attend(q) against the reference over read(), sequence by sequence. */
function checkAttend(cache, q, Hq, Lq, options, exact, what) {
  const { batch: B, headDim: D, valueDim: Dv, window } = cache.config;
  const got = cache.attend({ data: q, shape: [B, Hq, Lq, D] }, options).output.data;
  for (let b = 0; b < B; ++b) {
    const { k, v } = contents(cache, b);
    const qb = { data: q.subarray(b * Hq * Lq * D, (b + 1) * Hq * Lq * D), shape: [1, Hq, Lq, D] };
    const ro = { causal: true, ...options };
    if (window > 0) ro.window = [window - 1, 0];
    const want = referenceAttention(qb, k, v, ro).output.data;
    const mine = got.subarray(b * Hq * Lq * Dv, (b + 1) * Hq * Lq * Dv);
    let vmax = 0;
    for (const x of v.data) vmax = Math.max(vmax, Math.abs(x));
    // SIMD128 runs P·V over q8/q4 values in integers, weights rounded to 16 bits: at most
    // (64 / 65534) max|V̂| more (docs/semantics.md).
    const pvRounding = ['q8', 'q4'].includes(cache.config.valueDtype) ? (64 / 65534) * vmax : 0;
    if (exact) {
      assert.equal(mismatch(mine, want, { atol: ATOL + pvRounding }), null, `${what}, sequence ${b}`);
      continue;
    }
    let kmax = 0;
    for (let j = 0; j < k.data.length / D; ++j) {
      let s = 0;
      for (let d = 0; d < D; ++d) s += k.data[j * D + d] ** 2;
      kmax = Math.max(kmax, Math.sqrt(s));
    }
    for (let row = 0; row < Hq * Lq; ++row) {
      let qn = 0;
      for (let d = 0; d < D; ++d) qn += qb.data[row * D + d] ** 2;
      const delta = (Math.sqrt(qn) / Math.sqrt(D)) * Math.sqrt(D) * kmax / 254;
      const bound = (Math.exp(2 * delta) - 1) * vmax + ATOL + pvRounding;
      for (let c = 0; c < Dv; ++c) {
        const e = want[row * Dv + c];
        const a = mine[row * Dv + c];
        assert.ok(Math.abs(a - e) <= bound, `${what}, sequence ${b} row ${row} col ${c}: ${a} vs ${e} (bound ${bound})`);
      }
    }
  }
}

for (const buildInfo of BUILDS) {
  describe(`${buildInfo.name} build: quantized KV caches`, () => {
    let ma;
    before(async () => {
      ma = await init(buildInfo.options);
    });

    test('read() keeps each block within its bound; scales are per block; byteLength', () => {
      const random = rng(11);
      for (const dtype of ['q8', 'q4']) {
        for (const D of [32, 40, 64]) {
          const cache = ma.createKVCache({ kvHeads: 2, capacity: 8, headDim: D, dtype, keyRotation: 'none' });
          const T = 5;
          const k = uniform(random, 2 * T * D);
          const v = uniform(random, 2 * T * D);
          for (let i = 0; i < Math.min(32, D); ++i) k[i] *= 1e3;      // a block of 1e3...
          for (let i = 32; i < D; ++i) k[i] *= 1e-3;                  // ...next to one of 1e-3
          cache.append({ data: k, shape: [1, 2, T, D] }, { data: v, shape: [1, 2, T, D] });
          const r = cache.read(0);
          assert.equal(r.start, 0);
          assert.deepEqual(r.key.shape, [2, T, D]);
          assert.deepEqual(r.value.shape, [2, T, D]);
          for (const [x, got] of [[k, r.key.data], [v, r.value.data]]) {
            for (let row = 0; row < 2 * T; ++row)
              for (let b0 = 0; b0 < D; b0 += 32) {
                const end = Math.min(D, b0 + 32);
                let amax = 0;
                for (let i = b0; i < end; ++i) amax = Math.max(amax, Math.abs(x[row * D + i]));
                const bound = dtype === 'q8' ? amax / 254 * (1 + 1e-5) + amax * 1e-6 : amax / 8 * (1 + 1e-6);
                for (let i = b0; i < end; ++i)
                  assert.ok(Math.abs(got[row * D + i] - x[row * D + i]) <= bound,
                    `${dtype} D=${D} row ${row} element ${i}: ${got[row * D + i]} vs ${x[row * D + i]} (bound ${bound})`);
              }
          }
          const blocks = Math.ceil(D / 32);
          assert.equal(cache.byteLength, 2 * 8 * 2 * blocks * (dtype === 'q8' ? 36 : 20));
          cache.dispose();
        }
      }
      const float32Cache = ma.createKVCache({ kvHeads: 8, capacity: 64, headDim: 128 });
      const q8Cache = ma.createKVCache({ kvHeads: 8, capacity: 64, headDim: 128, dtype: 'q8' });
      const q4Cache = ma.createKVCache({ kvHeads: 8, capacity: 64, headDim: 128, dtype: 'q4' });
      assert.ok(q8Cache.byteLength / float32Cache.byteLength <= 0.3);
      assert.ok(q4Cache.byteLength / float32Cache.byteLength <= 0.17);
      assert.equal(q4Cache.config.keyDtype, 'q4');
      assert.equal(q4Cache.config.keyRotation, 'automatic');
      for (const c of [float32Cache, q8Cache, q4Cache]) c.dispose();
    });

    test('NaN in a block reads back NaN for that block only, and shows only where attended', () => {
      for (const dtype of ['q8', 'q4']) {
        const random = rng(5);
        const cache = ma.createKVCache({ capacity: 80, headDim: 64, dtype, keyRotation: 'none' });
        const k = uniform(random, 70 * 64);
        const v = uniform(random, 70 * 64);
        k[10 * 64 + 40] = NaN;       // key of position 10, second block
        v[20 * 64 + 3] = Infinity;   // value of position 20, first block
        cache.append({ data: k, shape: [1, 1, 70, 64] }, { data: v, shape: [1, 1, 70, 64] });
        const r = cache.read(0);
        for (let i = 0; i < 64; ++i) {
          assert.equal(Number.isNaN(r.key.data[10 * 64 + i]), i >= 32, `key element ${i}`);
          assert.equal(Number.isNaN(r.value.data[20 * 64 + i]), i < 32, `value element ${i}`);
        }
        const q = { data: exactQueries(random, 1, 64), shape: [1, 1, 1, 64] };
        for (const x of cache.attend(q, { window: [40, 0] }).output.data) assert.ok(Number.isFinite(x), `${dtype}: masked NaN leaked`);
        for (const x of cache.attend(q).output.data) assert.ok(Number.isNaN(x), `${dtype}: attended NaN must show`);
        cache.dispose();
      }
    });

    test('attend equals the reference over read() through a generation, on every dtype pair', () => {
      const cases = [
        { dtype: 'q8' },
        { dtype: 'q4', keyRotation: 'none' },
        { dtype: 'q8', valueDtype: 'q4' },
        { dtype: 'float16', valueDtype: 'q8' },
      ];
      for (const cfg of cases) {
        const what = JSON.stringify(cfg);
        const random = rng(3);
        const cache = ma.createKVCache({ batch: 2, kvHeads: 2, capacity: 400, headDim: 40, valueDim: 48, ...cfg });
        const append = (T, counts) => cache.append(
          { data: uniform(random, 2 * 2 * T * 40), shape: [2, 2, T, 40] },
          { data: uniform(random, 2 * 2 * T * 48), shape: [2, 2, T, 48] }, { counts });
        append(100, [100, 45]);
        checkAttend(cache, exactQueries(random, 2 * 4 * 3, 40), 4, 3, {}, true, `${what} prompt`);
        append(1, [1, 1]);
        checkAttend(cache, exactQueries(random, 2 * 4, 40), 4, 1, {}, true, `${what} decode step`);
        cache.truncate([99, 46]);
        append(280, [280, 280]);
        checkAttend(cache, exactQueries(random, 2 * 4, 40), 4, 1, { alibiSlopes: [0.5, 0.25, 0.125, 0.0625], softcap: 20 }, true,
          `${what} long, ALiBi, softcap`);
        checkAttend(cache, exactQueries(random, 2 * 4, 40), 4, 1, { fullyMasked: 'uniform', window: [3, 0] }, true, `${what} window`);
        cache.dispose();
      }
    });

    test('a window ring: read() starts at the oldest position held', () => {
      const random = rng(8);
      const cache = ma.createKVCache({ capacity: 100, window: 97, headDim: 32, dtype: 'q8', valueDtype: 'q4' });
      const bytes = cache.byteLength;
      for (let step = 0; step < 3; ++step) {
        const T = step === 0 ? 130 : 37;
        cache.append({ data: uniform(random, T * 32), shape: [1, 1, T, 32] }, { data: uniform(random, T * 32), shape: [1, 1, T, 32] });
        assert.equal(cache.read(0).start, cache.lengths[0] - 100);
        checkAttend(cache, exactQueries(random, 2 * 4, 32), 2, 4, {}, true, `ring step ${step}`);
      }
      assert.equal(cache.byteLength, bytes);
      cache.dispose();
    });

    test('any queries stay within the documented bound; rotated q4 keys too', () => {
      for (const cfg of [{ dtype: 'q8' }, { dtype: 'q4' }, { dtype: 'q4', keyRotation: 'hadamard', valueDtype: 'float32' }]) {
        const random = rng(21);
        const cache = ma.createKVCache({ kvHeads: 2, capacity: 300, headDim: 64, ...cfg });
        cache.append({ data: uniform(random, 2 * 300 * 64), shape: [1, 2, 300, 64] }, { data: uniform(random, 2 * 300 * 64), shape: [1, 2, 300, 64] });
        checkAttend(cache, uniform(random, 4 * 2 * 64, -2, 2), 4, 2, {}, false, JSON.stringify(cfg));
        cache.dispose();
      }
    });

    test('backend.quantDot; every integer dot product the module accepts matches the reference', () => {
      // Node 20's Liftoff gets i32x4.relaxed_dot_i8x16_i7x16_add_s wrong (the probe at module start
      // refuses it); its i16x8 form is exact. The module's setQuantDot (a test hook) runs the others.
      const want = buildInfo.options.simd === false ? 'scalar' : buildInfo.build.includes('relaxed') ? 'relaxed-i8-i16x8' : 'i16';
      assert.equal(ma.backend.quantDot, want);
      // How the engine lowers the add form, read at start from its answer on bytes outside the i7
      // range (Node 20's Liftoff gives twice the sum there too: 'unknown'); none without relaxed SIMD.
      const lowering = ma._m.relaxedDotLowering();
      if (buildInfo.build.includes('relaxed')) assert.ok(['unknown', 'x86-pairs-saturated', 'x86-vnni', 'signed-bytes'].includes(lowering), lowering);
      else assert.equal(lowering, 'none');
      const modes = ['i16', 'relaxed-i8-i16x8', 'relaxed-i8', 'scalar'].filter((m) => ma._m.setQuantDot(m));
      assert.deepEqual(modes, buildInfo.options.simd === false ? ['scalar'] : buildInfo.build.includes('relaxed') ? ['i16', 'relaxed-i8-i16x8'] : ['i16']);
      const random = rng(31);
      try {
        for (const dtype of ['q8', 'q4'])
          // Query heads per KV head 1, 2, 4: the kernel's register blocks of 1 and 2 rows (and a 4-row group).
          for (const group of [1, 2, 4]) {
            const cache = ma.createKVCache({ kvHeads: 2, capacity: 300, headDim: 96, dtype, keyRotation: 'none' });
            cache.append({ data: uniform(random, 2 * 290 * 96), shape: [1, 2, 290, 96] }, { data: uniform(random, 2 * 290 * 96), shape: [1, 2, 290, 96] });
            const exact = exactQueries(random, 2 * group, 96), any = uniform(random, 2 * group * 96, -3, 3);
            for (const m of modes) {
              ma._m.setQuantDot(m);
              checkAttend(cache, exact, 2 * group, 1, {}, true, `${dtype}, ${group} query heads per KV head, ${m}, exact queries`);
              checkAttend(cache, any, 2 * group, 1, {}, false, `${dtype}, ${group} query heads per KV head, ${m}`);
            }
            cache.dispose();
          }
      } finally {
        ma._m.setQuantDot(want);
      }
    });

    test('bad dtypes, rotations and read() arguments are named; nothing is written', () => {
      throwsArg(() => ma.createKVCache({ capacity: 4, headDim: 32, dtype: 'int8' }), TypeError, 'dtype');
      throwsArg(() => ma.createKVCache({ capacity: 4, headDim: 32, keyDtype: 'q2' }), TypeError, 'keyDtype');
      throwsArg(() => ma.createKVCache({ capacity: 4, headDim: 32, valueDtype: 8 }), TypeError, 'valueDtype');
      throwsArg(() => ma.createKVCache({ capacity: 4, headDim: 32, keyRotation: 'random' }), TypeError, 'keyRotation');
      throwsArg(() => ma.createKVCache({ capacity: 4, headDim: 32, keyRotation: 'hadamard' }), RangeError, 'keyRotation');
      throwsArg(() => ma.createKVCache({ capacity: 4, headDim: 33, dtype: 'q4', keyRotation: 'hadamard' }), RangeError, 'keyRotation');
      const cache = ma.createKVCache({ batch: 2, capacity: 4, headDim: 32, dtype: 'q8' });
      throwsArg(() => cache.read(2), RangeError, 'b');
      throwsArg(() => cache.read(0.5), RangeError, 'b');
      throwsArg(() => cache.read('0'), TypeError, 'b');
      const halves = new Uint16Array(2 * 32);
      throwsArg(() => cache.append({ data: halves, shape: [2, 1, 1, 32] }, { data: halves, shape: [2, 1, 1, 32] }), TypeError, 'k.data');
      assert.deepEqual([...cache.lengths], [0, 0]);
      const r = cache.read(1);
      assert.deepEqual(r.key.shape, [1, 0, 32]);
      assert.equal(r.start, 0);
      cache.dispose();
      throwsArg(() => cache.read(0), RangeError, 'cache');
    });
  });
}
