// The KV cache of the JavaScript API (ma.createKVCache) on both builds (SIMD128 and scalar):
// cache.attend() must equal plain ma.attention() and the float64 reference (reference.mjs) on the
// cache's logical contents, which this file tracks independently (a JS model of what each sequence
// holds; float16 and bfloat16 caches: the values rounded by reference.mjs's own round-to-nearest-even).
//
// Tolerance policy (as in api.test.mjs): ATOL = 1e-5 absolute on O, weights and lse for unit-scale
// inputs (fp32 accumulation vs the f64 reference). Float16 and bfloat16 rounding and raw 16-bit
// values are compared exactly: a row that attends one key returns that key's value times a weight of
// exactly 1.
import { BUILDS } from './builds.mjs';  // first: turns on relaxed SIMD in Node 20
import { describe, test, before } from 'node:test';
import assert from 'node:assert/strict';
import { throwsArg } from './throws.mjs';
import {
  init, KVCache,
} from 'maskattn';
import {
  referenceAttention, rng, uniform, mismatch, roundToHalf, halfToNumber, halfBits, roundToBf16, bf16ToNumber, bf16Bits,
} from './reference.mjs';

/** The 16-bit storage formats, each by reference.mjs's own model: rounding, value of bits, bits. */
const FORMATS16 = {
  float16: { round: roundToHalf, value: halfToNumber, bits: halfBits },
  bfloat16: { round: roundToBf16, value: bf16ToNumber, bits: bf16Bits },
};
/** Every float dtype a cache stores values of exactly as its format rounds them. */
const FLOAT_DTYPES = ['float32', ...Object.keys(FORMATS16)];
const bytesPerValue = (dtype) => (dtype === 'float32' ? 4 : 2);

const ATOL = 1e-5;

// ------------------------------------------------------------------------------------ helpers

function tensor(data, shape) {
  return { data, shape };
}

/** [B, H, L, D] (or [B, L, H, D] for 'blhd') of random values. */
function randomTensor(random, B, H, L, D, layout = 'bhld') {
  return tensor(uniform(random, B * H * L * D), layout === 'blhd' ? [B, L, H, D] : [B, H, L, D]);
}

/**
 * What a cache holds, tracked in JavaScript: per sequence and KV head, the rows of K and V (as the
 * cache stores them: 16-bit caches round float input, raw 16-bit values are decoded). Knows nothing of
 * rings: it keeps every position; a window is an attention rule on top.
 */
class Model {
  constructor({ batch = 1, kvHeads = 1, headDim, valueDim = headDim, dtype = 'float32' }) {
    Object.assign(this, { B: batch, Hkv: kvHeads, D: headDim, Dv: valueDim, dtype });
    this.rows = Array.from({ length: batch }, () => Array.from({ length: kvHeads }, () => ({ k: [], v: [] })));
  }

  get lengths() {
    return this.rows.map((heads) => heads[0]?.k.length ?? 0);
  }

  _value(data, n) {
    const format = FORMATS16[this.dtype];
    if (data instanceof Uint16Array) return format.value(data[n]);
    return format ? format.round(data[n]) : data[n];
  }

  append(k, v, { counts = null, layout = 'bhld' } = {}) {
    const T = layout === 'blhd' ? k.shape[1] : k.shape[2];
    const at = (H, D) => (layout === 'blhd' ? (b, h, t, d) => ((b * T + t) * H + h) * D + d : (b, h, t, d) => ((b * H + h) * T + t) * D + d);
    const kAt = at(this.Hkv, this.D);
    const vAt = at(this.Hkv, this.Dv);
    for (let b = 0; b < this.B; ++b) {
      const n = counts ? counts[b] : T;
      for (let h = 0; h < this.Hkv; ++h) {
        for (let t = 0; t < n; ++t) {
          this.rows[b][h].k.push(Float64Array.from({ length: this.D }, (_, d) => this._value(k.data, kAt(b, h, t, d))));
          this.rows[b][h].v.push(Float64Array.from({ length: this.Dv }, (_, d) => this._value(v.data, vAt(b, h, t, d))));
        }
      }
    }
  }

  truncate(lengths) {
    this.rows.forEach((heads, b) => heads.forEach((r) => { r.k.length = lengths[b]; r.v.length = lengths[b]; }));
  }

  reset() {
    this.truncate(new Array(this.B).fill(0));
  }

  /** K [B, Hkv, Lmax, D] and V in `layout`, zero beyond each sequence's length, and the lengths. */
  tensors(layout = 'bhld') {
    const lengths = this.lengths;
    const L = Math.max(0, ...lengths);
    const make = (part, D) => {
      const data = new Float32Array(this.B * this.Hkv * L * D);
      this.rows.forEach((heads, b) => heads.forEach((r, h) => r[part].forEach((row, l) => {
        const base = layout === 'blhd' ? ((b * L + l) * this.Hkv + h) * D : ((b * this.Hkv + h) * L + l) * D;
        data.set(row, base);
      })));
      return tensor(data, layout === 'blhd' ? [this.B, L, this.Hkv, D] : [this.B, this.Hkv, L, D]);
    };
    return { k: make('k', this.D), v: make('v', this.Dv), lengths };
  }
}

/** Both a cache and its model: append/truncate/reset go to both. */
function pair(ma, config) {
  const cache = ma.createKVCache(config);
  const model = new Model(config);
  return {
    cache,
    model,
    append(k, v, options) {
      cache.append(k, v, options);
      model.append(k, v, options);
      assert.deepEqual(Array.from(cache.lengths), model.lengths, 'lengths after append');
    },
    truncate(lengths) {
      cache.truncate(lengths);
      model.truncate(lengths);
      assert.deepEqual(Array.from(cache.lengths), model.lengths, 'lengths after truncate');
    },
    reset() {
      cache.reset();
      model.reset();
    },
  };
}

/**
 * The expected result of cache.attend(q, options): plain attention on the model's contents with
 * keyLengths = the cache's lengths (causal unless options say otherwise), and the reference.
 * Under the `uniform` policy a cache averages V over the positions each sequence holds (the
 * contract), not over all max(lengths) keys as plain attention with key padding does: the expected
 * fully masked rows are rewritten to that.
 */
function expected(ma, model, q, options) {
  const layout = options.layout ?? 'bhld';
  const { k, v, lengths } = model.tensors(layout);
  const opts = { causal: true, ...options, keyLengths: lengths };
  delete opts.returnWeights;
  delete opts.returnLse;
  delete opts.returnStats;
  const plain = ma.attention(q, k, v, { ...opts, returnWeights: true, returnLse: true });
  const ref = referenceAttention(q, k, v, opts);
  if (options.fullyMasked === 'uniform') {
    const [B, Hq, Lq, Lk] = ref.weights.shape;
    const group = Hq / model.Hkv;
    for (const [out, w] of [[plain.output.data, plain.weights.data], [ref.output.data, ref.weights.data]]) {
      for (let b = 0; b < B; ++b) {
        for (let h = 0; h < Hq; ++h) {
          for (let i = 0; i < Lq; ++i) {
            const row = (b * Hq + h) * Lq + i;
            if (!ref.fullyMasked[row]) continue;
            const held = model.rows[b][Math.floor(h / group)].v;
            for (let j = 0; j < Lk; ++j) w[row * Lk + j] = j < held.length ? 1 / held.length : 0;
            for (let e = 0; e < model.Dv; ++e) {
              let sum = 0;
              for (const r of held) sum += r[e];
              const o = layout === 'blhd' ? ((b * Lq + i) * Hq + h) * model.Dv + e : row * model.Dv + e;
              out[o] = held.length ? sum / held.length : 0;
            }
          }
        }
      }
    }
  }
  return { plain, ref };
}

/** cache.attend(q, options) against plain attention and the reference on the model. */
function agree(ma, name, cache, model, q, options = {}, { atol = ATOL } = {}) {
  const got = cache.attend(q, { ...options, returnWeights: true, returnLse: true });
  const { plain, ref } = expected(ma, model, q, options);
  for (const part of ['output', 'weights', 'lse']) {
    assert.ok(got[part].data instanceof Float32Array, `${name}: ${part} is a Float32Array`);
    assert.deepEqual(got[part].shape, plain[part].shape, `${name}: ${part} shape`);
    const vsRef = mismatch(got[part].data, ref[part].data, { atol });
    assert.equal(vsRef, null, `${name}: ${part} differs from the reference: ${vsRef}`);
    const vsPlain = mismatch(got[part].data, plain[part].data, { atol });
    assert.equal(vsPlain, null, `${name}: ${part} differs from ma.attention(): ${vsPlain}`);
  }
  return got;
}

const slopes = (n) => Array.from({ length: n }, (_, h) => 2 ** -(h + 1));

// Attention options each check is run with: [name, (sizes, random) -> options]. Each row says why.
const ATTEND_OPTIONS = [
  ['default (causal, bottom-right on each length)', () => ({})],
  ['causal: false (every held position)', () => ({ causal: false })],
  ['window [3, 0] + ALiBi + softcap', (s) => ({ window: [3, 0], alibiSlopes: slopes(s.Hq), softcap: 5 })],
  ['bias [B, 1, 1, Lk] with -inf + allowed [Lq, Lk]', (s, r) => ({
    bias: tensor(Float32Array.from({ length: s.B * s.Lk }, () => (r() < 0.15 ? -Infinity : r() - 0.5)), [s.B, 1, 1, s.Lk]),
    allowed: tensor(Uint8Array.from({ length: s.Lq * s.Lk }, () => (r() < 0.8 ? 1 : 0)), [s.Lq, s.Lk]),
  })],
  ['segments + prefix + scale', (s) => ({
    segments: { query: Int32Array.from({ length: s.B * s.Lq }, (_, n) => (n % s.Lq) % 2), key: Int32Array.from({ length: s.B * s.Lk }, (_, n) => ((n % s.Lk) >> 1) % 2) },
    prefix: 1, scale: 0.3,
  })],
  ['queryLengths (padding rows) with fullyMasked nan', (s) => ({ queryLengths: Array.from({ length: s.B }, (_, b) => Math.max(0, s.Lq - b)), fullyMasked: 'nan' })],
];

// ------------------------------------------------------------------------------------ float16

test('reference.mjs float16 helpers: every half round-trips; ties go to even', () => {
  for (let h = 0; h < 65536; ++h) {
    const x = halfToNumber(h);
    if (Number.isNaN(x)) {
      assert.ok((h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0, `only exponent-31 non-zero-fraction patterns are NaN (${h})`);
      continue;
    }
    assert.equal(roundToHalf(x), x, `half ${h} is its own rounding`);
    assert.equal(halfBits(x), h, `bits of half ${h}`);
  }
  for (let h = 0; h < 0x7bff; ++h) {
    const [a, b] = [halfToNumber(h), halfToNumber(h + 1)];
    const mid = (a + b) / 2;
    if (Math.fround(mid) === mid) assert.equal(roundToHalf(mid), h % 2 === 0 ? a : b, `tie between halves ${h} and ${h + 1}`);
  }
  assert.equal(roundToHalf(65519.99), 65504);
  assert.equal(roundToHalf(65520), Infinity);
  assert.equal(roundToHalf(2 ** -25), 0);
  assert.equal(roundToHalf(3 * 2 ** -25), 2 ** -23);
  assert.ok(Object.is(roundToHalf(-1e-9), -0));
});

for (const buildInfo of BUILDS) {
  describe(`${buildInfo.name} build`, () => {
    let ma;
    before(async () => {
      ma = await init(buildInfo.options);
    });

    // ---------------------------------------------------------------------------- equivalence

    for (const dtype of FLOAT_DTYPES) {
      test(`${dtype}: ragged appends with counts, several appends, GQA, every attention option`, () => {
        const random = rng({ float32: 101, float16: 202, bfloat16: 212 }[dtype]);
        const config = { batch: 3, kvHeads: 2, capacity: 24, headDim: 16, valueDim: 12, dtype };
        const Hq = 8;  // GQA: 4 query heads per KV head
        const p = pair(ma, config);
        try {
          const check = (label, Lq) => {
            const Lk = Math.max(...p.model.lengths);
            const s = { B: 3, Hq, Lq, Lk };
            for (const [name, make] of ATTEND_OPTIONS) {
              const q = randomTensor(random, 3, Hq, Lq, 16);
              agree(ma, `${label}, Lq ${Lq}, ${name}`, p.cache, p.model, q, make(s, random));
            }
          };
          let steps = 0;
          const step = (T, counts) => {
            let k = randomTensor(random, 3, 2, T, 16);
            let v = randomTensor(random, 3, 2, T, 12);
            if (FORMATS16[dtype] && ++steps % 2 === 0) {  // every other step as raw 16-bit values
              k = tensor(Uint16Array.from(k.data, FORMATS16[dtype].bits), k.shape);
              v = tensor(Uint16Array.from(v.data, FORMATS16[dtype].bits), v.shape);
            }
            p.append(k, v, counts ? { counts } : undefined);
          };
          step(7, [7, 3, 4]);               // a ragged prompt
          check('after the prompt', 3);
          step(2);                           // everyone takes both
          check('after a second append', 2);
          for (let n = 0; n < 4; ++n) {     // decode steps; sequence 1 sometimes sits one out
            step(1, Int32Array.from([1, n % 2, 1]));
            check(`decode step ${n}`, 1);
          }
          assert.deepEqual(Array.from(p.cache.lengths), [13, 7, 10]);
          step(3, [0, 3, 1]);
          check('after a ragged chunk', 1);
        } finally {
          p.cache.dispose();
        }
      });
    }

    test('truncate then re-append: the rolled-back positions are replaced, never seen', () => {
      const random = rng(303);
      for (const dtype of FLOAT_DTYPES) {
        const p = pair(ma, { batch: 2, kvHeads: 1, capacity: 16, headDim: 8, dtype });
        try {
          const step = (T) => p.append(randomTensor(random, 2, 1, T, 8), randomTensor(random, 2, 1, T, 8));
          const q = (Lq) => randomTensor(random, 2, 2, Lq, 8);
          step(6);
          step(3);  // speculative tokens
          p.truncate([7, 6]);  // reject some of them
          agree(ma, `${dtype}: after truncate`, p.cache, p.model, q(1));
          agree(ma, `${dtype}: after truncate, no causal`, p.cache, p.model, q(2), { causal: false });
          // Poison: NaN in a re-append's positions that sequence 0 does not take (counts) must not
          // show, and the old values at positions 7, 8 must be gone.
          const k = randomTensor(random, 2, 1, 2, 8);
          const v = randomTensor(random, 2, 1, 2, 8);
          k.data.fill(NaN, 8, 16);  // sequence 0, position t = 1
          v.data.fill(NaN, 8, 16);
          p.append(k, v, { counts: [1, 2] });
          const r = agree(ma, `${dtype}: re-appended`, p.cache, p.model, q(2));
          assert.ok(!r.output.data.some(Number.isNaN), 'nothing of the skipped positions was written');
          p.truncate([0, 8]);
          agree(ma, `${dtype}: one sequence emptied`, p.cache, p.model, q(0));
          step(2);
          agree(ma, `${dtype}: after emptying and appending`, p.cache, p.model, q(2));
          p.reset();
          assert.deepEqual(Array.from(p.cache.lengths), [0, 0]);
          step(4);
          agree(ma, `${dtype}: after reset`, p.cache, p.model, q(3), { alibiSlopes: [0.5, 0.25] });
        } finally {
          p.cache.dispose();
        }
      }
    });

    test('layout blhd for append (k, v) and attend (q, output)', () => {
      const random = rng(404);
      const p = pair(ma, { batch: 2, kvHeads: 2, capacity: 20, headDim: 8, valueDim: 4 });
      try {
        p.append(randomTensor(random, 2, 2, 5, 8, 'blhd'), randomTensor(random, 2, 2, 5, 4, 'blhd'), { layout: 'blhd' });
        p.append(randomTensor(random, 2, 2, 3, 8), randomTensor(random, 2, 2, 3, 4), { counts: [3, 1] });
        const r = agree(ma, 'blhd q', p.cache, p.model, randomTensor(random, 2, 4, 3, 8, 'blhd'), { layout: 'blhd', alibiSlopes: slopes(4) });
        assert.deepEqual(r.output.shape, [2, 3, 4, 4]);
      } finally {
        p.cache.dispose();
      }
    });

    // ---------------------------------------------------------------------------- sliding window

    for (const dtype of FLOAT_DTYPES) {
      test(`${dtype}: window ring wraps around; equals a full cache with window [W - 1, 0]`, () => {
        const random = rng({ float32: 505, float16: 606, bfloat16: 616 }[dtype]);
        const W = 5;
        const capacity = 7;  // >= W + Lq - 1 for Lq <= 3
        const config = { batch: 2, kvHeads: 1, headDim: 8, valueDim: 6, dtype };
        const ring = pair(ma, { ...config, capacity, window: W });
        const full = ma.createKVCache({ ...config, capacity: 64 });
        try {
          assert.equal(ring.cache.byteLength, 2 * 1 * capacity * (8 + 6) * bytesPerValue(dtype));
          const steps = [[3], [1], [2, [2, 0]], [12], [1], [1, [0, 1]], [3], [2], [1], [10, [9, 4]], [1]];
          for (const [T, counts] of steps) {
            const k = randomTensor(random, 2, 1, T, 8);
            const v = randomTensor(random, 2, 1, T, 6);
            ring.append(k, v, counts ? { counts } : undefined);
            full.append(k, v, counts ? { counts } : undefined);
            assert.deepEqual(ring.cache.lengths, full.lengths, 'ring lengths stay absolute (tokens seen)');
            for (const Lq of [1, 2, 3]) {
              if (Math.min(...ring.model.lengths) < Lq) continue;
              const q = randomTensor(random, 2, 4, Lq, 8);
              for (const options of [{}, { alibiSlopes: slopes(4), fullyMasked: 'nan' }, { window: [2, 0], softcap: 3 }]) {
                const name = `T ${T}, lengths [${ring.model.lengths}], Lq ${Lq}, ${JSON.stringify(options)}`;
                // The ring's window composes with an explicit one (the narrower wins).
                const windowed = options.window ? options : { ...options, window: [W - 1, 0] };
                const got = ring.cache.attend(q, { ...options, returnWeights: true, returnLse: true });
                const same = full.attend(q, { ...windowed, returnWeights: true, returnLse: true });
                for (const part of ['output', 'weights', 'lse']) {
                  assert.deepEqual(got[part].shape, same[part].shape, `${name}: ${part} shape`);
                  assert.equal(mismatch(got[part].data, same[part].data, { atol: ATOL }), null, `${name}: ${part}: ring vs full cache`);
                }
                const { ref } = expected(ma, ring.model, q, windowed);
                assert.equal(mismatch(got.output.data, ref.output.data, { atol: ATOL }), null, `${name}: vs reference`);
              }
            }
          }
          assert.deepEqual(Array.from(ring.cache.lengths), [35, 29]);
        } finally {
          ring.cache.dispose();
          full.dispose();
        }
      });
    }

    test('window ring with sink tokens past 2^22 tokens seen: attends what it holds, memory flat', () => {
      // Endless generation in bounded memory: positions count on (to ma.limits.maxRingLength) while
      // the ring holds its capacity; each check against the float64 softmax over read()'s rows.
      const random = rng(4242);
      const W = 6, S = 2, D = 4, T = 1 << 16;
      const cache = ma.createKVCache({ batch: 2, kvHeads: 1, capacity: W + S + 1, headDim: D, window: W, sinkTokens: S, dtype: 'bfloat16' });
      try {
        const bytes = cache.byteLength;
        const k = new Float32Array(2 * T * D), v = new Float32Array(2 * T * D);
        const check = (label) => {
          const Lq = 2;
          const q = randomTensor(random, 2, 1, Lq, D);
          const got = cache.attend(q).output.data;
          for (let b = 0; b < 2; ++b) {
            const { key, value, start, sinks } = cache.read(b);
            const len = cache.lengths[b], n = key.shape[1];
            assert.equal(start + n - sinks, len, `${label}: read() ends at the length`);
            for (let i = 0; i < Lq; ++i) {
              const pos = len - Lq + i;
              const logits = [];
              for (let r = 0; r < n; ++r) {
                const at = r < sinks ? r : start + r - sinks;
                const allowed = at <= pos && (at < S || at > pos - W);
                let dot = 0;
                for (let d = 0; d < D; ++d) dot += q.data[(b * Lq + i) * D + d] * key.data[r * D + d];
                logits.push(allowed ? dot / Math.sqrt(D) : -Infinity);
              }
              const m = Math.max(...logits);
              const w = logits.map((x) => Math.exp(x - m));
              const l = w.reduce((a, x) => a + x, 0);
              for (let c = 0; c < D; ++c) {
                const want = w.reduce((a, x, r) => a + (x / l) * value.data[r * D + c], 0);
                const have = got[(b * Lq + i) * D + c];
                assert.ok(Math.abs(have - want) <= ATOL, `${label}: sequence ${b} row ${i} col ${c}: ${have} vs ${want}`);
              }
            }
          }
        };
        while (cache.lengths[0] < 2 ** 22 + 3000) {
          for (let t = T - 12; t < T; ++t)  // the rows the ring keeps get fresh values
            for (let b = 0; b < 2; ++b)
              for (let d = 0; d < D; ++d) { k[(b * T + t) * D + d] = random() * 2 - 1; v[(b * T + t) * D + d] = random() * 2 - 1; }
          const n = cache.lengths[0] < 2 ** 22 ? T : 3001;
          cache.append(tensor(k.subarray(0, 2 * T * D), [2, 1, T, D]), tensor(v.subarray(0, 2 * T * D), [2, 1, T, D]), { counts: [n, n - 7] });
          if (cache.lengths[0] % (16 * T) < T || n !== T) check(`${cache.lengths[0]} tokens`);
        }
        assert.ok(cache.lengths[1] > 2 ** 22);
        assert.equal(cache.byteLength, bytes, 'the ring holds its slots');
        assert.equal(ma.limits.maxRingLength, 2 ** 31 - 1);
      } finally {
        cache.dispose();
      }
    });

    test('window ring: queries reaching overwritten positions are an error; uniform averages what it holds; truncate', () => {
      const random = rng(555);
      const W = 4;
      const capacity = 6;
      const p = pair(ma, { batch: 2, kvHeads: 1, capacity, headDim: 4, window: W });
      try {
        p.append(randomTensor(random, 2, 1, 10, 4), randomTensor(random, 2, 1, 10, 4), { counts: [10, 5] });
        // Sequence 0 holds positions 4..9; Lq = 3 reaches back to 7 - 3 = 4: fine. Lq = 4: position 3.
        const q = (Lq) => randomTensor(random, 2, 2, Lq, 4);
        const ok = p.cache.attend(q(3), { returnWeights: true });
        assert.deepEqual(ok.weights.shape, [2, 2, 3, 10], 'weights over absolute positions: [B, Hq, Lq, max(lengths)]');
        const lengthsBefore = Array.from(p.cache.lengths);
        throwsArg(() => p.cache.attend(q(4)), RangeError, 'q', 'overwritten', 'sequence 0', 'position 3');
        assert.deepEqual(Array.from(p.cache.lengths), lengthsBefore);
        // Rows with nothing to attend under 'uniform': the mean of V over the positions the ring
        // holds (4..9 for sequence 0, all 5 of sequence 1), weights 1/count on exactly those.
        const r = p.cache.attend(q(1), { queryLengths: [0, 0], fullyMasked: 'uniform', returnWeights: true });
        for (const [b, first, end] of [[0, 4, 10], [1, 0, 5]]) {
          const held = p.model.rows[b][0].v.slice(first, end);
          for (let h = 0; h < 2; ++h) {
            const row = b * 2 + h;
            for (let e = 0; e < 4; ++e) {
              const mean = held.reduce((a, x) => a + x[e], 0) / held.length;
              assert.ok(Math.abs(r.output.data[row * 4 + e] - mean) < ATOL, `sequence ${b}: mean over positions ${first}..${end - 1}`);
            }
            const w = r.weights.data.subarray(row * 10, row * 10 + 10);
            w.forEach((x, j) => assert.ok(Math.abs(x - (j >= first && j < end ? 1 / held.length : 0)) < 1e-7, `sequence ${b} weight ${j}: ${x}`));
          }
        }
        // Truncate keeps what is left of the ring; attention still equals the full problem.
        p.truncate([8, 5]);
        agree(ma, 'ring after truncate', p.cache, p.model, q(1), { window: [W - 1, 0] });
        p.append(randomTensor(random, 2, 1, 3, 4), randomTensor(random, 2, 1, 3, 4));
        agree(ma, 'ring after truncate and append', p.cache, p.model, q(2), { window: [W - 1, 0] });
        // Truncating below what the ring holds: the older positions are gone for good.
        p.truncate([2, 8]);
        throwsArg(() => p.cache.attend(q(1)), RangeError, 'q', 'overwritten');
        p.reset();
        p.append(randomTensor(random, 2, 1, 2, 4), randomTensor(random, 2, 1, 2, 4));
        agree(ma, 'ring after reset', p.cache, p.model, q(2), { window: [W - 1, 0] });
      } finally {
        p.cache.dispose();
      }
    });

    // ---------------------------------------------------------------------------- policies, outputs

    test('every fullyMasked policy: padding rows, -inf rows, an empty sequence', () => {
      const random = rng(707);
      const p = pair(ma, { batch: 3, kvHeads: 1, capacity: 12, headDim: 4, valueDim: 5 });
      try {
        p.append(randomTensor(random, 3, 1, 6, 4), randomTensor(random, 3, 1, 6, 5), { counts: [6, 0, 4] });
        const Lq = 2;
        const Lk = 6;
        const bias = new Float32Array(3 * 2 * Lq * Lk);
        bias.fill(-Infinity, ((0 * 2 + 1) * Lq + 1) * Lk, ((0 * 2 + 1) * Lq + 2) * Lk);  // sequence 0, head 1, row 1
        for (const fullyMasked of [undefined, 'zero', 'nan', 'uniform']) {
          const q = randomTensor(random, 3, 2, Lq, 4);
          const options = { queryLengths: [2, 2, 1], bias: tensor(bias, [3, 2, Lq, Lk]), ...(fullyMasked ? { fullyMasked } : {}) };
          const r = agree(ma, `policy ${fullyMasked ?? 'default'}`, p.cache, p.model, q, options);
          // (sequence, head, row) with nothing to attend: a -inf bias row, the empty sequence (its
          // queries sit before position 0), query padding.
          const rows = [[0, 1, 1], [1, 0, 0], [1, 0, 1], [1, 1, 0], [1, 1, 1], [2, 0, 1], [2, 1, 1]];
          for (const [b, h, i] of rows) {
            const row = (b * 2 + h) * Lq + i;
            assert.equal(r.lse.data[row], -Infinity, `lse of fully masked row ${row}`);
          }
          if ((fullyMasked ?? 'zero') !== 'nan') assert.ok(!r.output.data.some(Number.isNaN), 'no NaN');
        }
      } finally {
        p.cache.dispose();
      }
    });

    test('uniform policy averages what each sequence holds (never unused capacity)', () => {
      const random = rng(808);
      const p = pair(ma, { batch: 2, kvHeads: 1, capacity: 10, headDim: 4 });
      try {
        p.append(randomTensor(random, 2, 1, 5, 4), randomTensor(random, 2, 1, 5, 4), { counts: [5, 3] });
        const q = randomTensor(random, 2, 1, 1, 4);
        const r = agree(ma, 'uniform', p.cache, p.model, q, { queryLengths: [0, 0], fullyMasked: 'uniform' });
        for (let b = 0; b < 2; ++b) {
          const held = p.model.rows[b][0].v;
          for (let e = 0; e < 4; ++e) {
            const mean = held.reduce((a, row) => a + row[e], 0) / held.length;
            assert.ok(Math.abs(r.output.data[b * 4 + e] - mean) < ATOL, `sequence ${b}: mean over its ${held.length} positions`);
          }
        }
      } finally {
        p.cache.dispose();
      }
    });

    test('results: output only unless asked; shapes; returnStats; lengths is a copy', () => {
      const random = rng(909);
      const cache = ma.createKVCache({ batch: 2, kvHeads: 2, capacity: 8, headDim: 4, valueDim: 3 });
      try {
        cache.append(randomTensor(random, 2, 2, 5, 4), randomTensor(random, 2, 2, 5, 3), { counts: [5, 4] });
        const q = randomTensor(random, 2, 4, 2, 4);
        const plain = cache.attend(q);
        assert.deepEqual(Object.keys(plain), ['output']);
        assert.deepEqual(plain.output.shape, [2, 4, 2, 3]);
        const all = cache.attend(q, { returnWeights: true, returnLse: true, returnStats: true });
        assert.deepEqual(Object.keys(all).sort(), ['lse', 'output', 'stats', 'weights']);
        assert.deepEqual(all.weights.shape, [2, 4, 2, 5], 'weights [B, Hq, Lq, max(lengths)]');
        assert.deepEqual(all.lse.shape, [2, 4, 2]);
        assert.deepEqual(all.output.data, plain.output.data, 'extra outputs do not change the output');
        for (const x of Object.values(all.stats)) assert.ok(Number.isInteger(x) && x >= 0);
        assert.equal(plain.output.data.byteLength, plain.output.data.buffer.byteLength, 'the output owns its buffer');
        const lengths = cache.lengths;
        assert.ok(lengths instanceof Int32Array);
        assert.notEqual(cache.lengths, lengths, 'a fresh array on every read');
        lengths[0] = 1;
        assert.deepEqual(Array.from(cache.lengths), [5, 4], 'writing to the copy changes nothing');
        assert.equal(cache.byteLength, 2 * 2 * 8 * (4 + 3) * 4);
        assert.equal(cache.config.valueDim, 3);
        assert.ok(Object.isFrozen(cache.config));
        assert.ok(cache instanceof KVCache);
      } finally {
        cache.dispose();
      }
    });

    // ---------------------------------------------------------------------------- 16-bit storage

    // Each query attends exactly its own position (causal, window [0, 0]), so the output row is
    // V's row and, with D = 1, q = 1 and scale 1, the lse is K's value: both bit for bit.
    const readBack = (cache, Lq, Dv) => {
      const q = tensor(new Float32Array(Lq).fill(1), [1, 1, Lq, 1]);
      const r = cache.attend(q, { window: [0, 0], scale: 1, returnLse: true });
      return { v: r.output.data, k: r.lse.data, Dv };
    };

    // Values at each format's edges: ties, subnormals, overflow, infinities, NaN.
    const SPECIAL = {
      float16: [
        0, 1, -1, 1 + 2 ** -11, 1 + 3 * 2 ** -11, 1 - 2 ** -12, 2049, 2051, -2051, 65504, 65519.99, 65520, -65520, 3.4e38,
        2 ** -24, 2 ** -25, 2 ** -25 * 1.0000001, 3 * 2 ** -25, 5 * 2 ** -25, 2 ** -14 - 2 ** -25, 2 ** -14 + 2 ** -24,
        1e-8, -1e-8, 1.401298464324817e-45, Infinity, -Infinity, NaN, 0.1, -0.3, Math.PI, 1000.5, 1001.5,
      ],
      bfloat16: [
        0, 1, -1, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 - 2 ** -9, 257, 259, -259, 3.3895313892515355e38, 3.4e38,
        3.4028234663852886e38, -3.4028234663852886e38, 2 ** -126, 2 ** -133, 2 ** -134, 3 * 2 ** -134, 2 ** -126 - 2 ** -134,
        1e-40, -1e-40, 1.401298464324817e-45, Infinity, -Infinity, NaN, 0.1, -0.3, Math.PI, 1000.5, 1001.5,
      ],
    };
    for (const [format, { round, value }] of Object.entries(FORMATS16)) {
      test(`${format}: float input rounds to nearest even (ties, subnormals, overflow, infinities, NaN)`, () => {
        const random = rng(format === 'float16' ? 1234 : 1235);
        const special = SPECIAL[format];
        const values = new Float32Array(4096);
        values.set(special);
        // The rest: random float32 bit patterns with exponents across the whole range.
        const bits = new Uint32Array(values.buffer);
        for (let n = special.length; n < values.length; ++n) bits[n] = Math.floor(random() * 2 ** 32);
        const L = values.length / 16;
        const cache = ma.createKVCache({ capacity: L, headDim: 1, valueDim: 16, dtype: format });
        const kCache = ma.createKVCache({ capacity: values.length, headDim: 1, valueDim: 1, dtype: format });
        try {
          cache.append(tensor(new Float32Array(L), [1, 1, L, 1]), tensor(values, [1, 1, L, 16]));
          const { v } = readBack(cache, L, 16);
          kCache.append(tensor(values, [1, 1, values.length, 1]), tensor(new Float32Array(values.length), [1, 1, values.length, 1]));
          const { k } = readBack(kCache, values.length, 1);
          for (let n = 0; n < values.length; ++n) {
            const want = round(values[n]);
            const got = v[n];
            // (=== : the sign of a zero is not observable through the output, accumulated from 0.)
            if (Number.isNaN(want)) assert.ok(Number.isNaN(got), `V: ${values[n]} -> NaN, got ${got}`);
            else assert.ok(got === want, `V: ${values[n]} (bits ${bits[n].toString(16)}) rounds to ${want}, got ${got}`);
            if (!Number.isFinite(want)) continue;  // an infinite logit is NaN after max-subtraction
            assert.ok(k[n] === want, `K: ${values[n]} rounds to ${want}, got ${k[n]}`);
          }
        } finally {
          cache.dispose();
          kCache.dispose();
        }
      });

      test(`${format}: Uint16Array values are stored as given (all 65536 patterns round-trip)`, () => {
        const all = Uint16Array.from({ length: 65536 }, (_, h) => h);
        const L = 4096;
        const cache = ma.createKVCache({ capacity: L, headDim: 1, valueDim: 16, dtype: format });
        const kCache = ma.createKVCache({ capacity: 65536, headDim: 1, valueDim: 1, dtype: format });
        const one = FORMATS16[format].bits(1);
        try {
          cache.append(tensor(new Uint16Array(L).fill(one), [1, 1, L, 1]), tensor(all, [1, 1, L, 16]));
          const { v } = readBack(cache, L, 16);
          kCache.append(tensor(all, [1, 1, 65536, 1]), tensor(new Uint16Array(65536), [1, 1, 65536, 1]));
          const { k } = readBack(kCache, 65536, 1);
          for (let h = 0; h < 65536; ++h) {
            const want = value(h);
            // (=== : -0 and +0 are told apart by the bits only, and the output is accumulated from 0.)
            if (Number.isNaN(want)) assert.ok(Number.isNaN(v[h]) && Number.isNaN(k[h]), `NaN pattern ${h}`);
            else {
              assert.ok(v[h] === want, `V half ${h}: ${want}, got ${v[h]}`);
              if (Number.isFinite(want)) assert.ok(k[h] === want, `K half ${h}: ${want}, got ${k[h]}`);
            }
          }
        } finally {
          cache.dispose();
          kCache.dispose();
        }
      });
    }

    // ---------------------------------------------------------------------------- errors

    test('appending past capacity: RangeError naming the sequence; nothing written', () => {
      const random = rng(1111);
      for (const dtype of FLOAT_DTYPES) {
        const p = pair(ma, { batch: 2, kvHeads: 1, capacity: 6, headDim: 4, dtype });
        try {
          p.append(randomTensor(random, 2, 1, 5, 4), randomTensor(random, 2, 1, 5, 4), { counts: [5, 2] });
          const q = randomTensor(random, 2, 2, 1, 4);
          const before = p.cache.attend(q, { returnWeights: true, returnLse: true });
          const tryAppend = (T, counts) => p.cache.append(randomTensor(random, 2, 1, T, 4), randomTensor(random, 2, 1, T, 4), counts ? { counts } : undefined);
          throwsArg(() => tryAppend(2), RangeError, 'sequence[0]', 'capacity is 6', 'nothing was written');
          throwsArg(() => tryAppend(5, [1, 5]), RangeError, 'sequence[1]', 'capacity is 6');
          assert.deepEqual(Array.from(p.cache.lengths), [5, 2], 'lengths unchanged');
          const after = p.cache.attend(q, { returnWeights: true, returnLse: true });
          for (const part of ['output', 'weights', 'lse']) assert.deepEqual(after[part].data, before[part].data, `${part}: contents unchanged`);
          // Exactly full is fine.
          p.append(randomTensor(random, 2, 1, 4, 4), randomTensor(random, 2, 1, 4, 4), { counts: [1, 4] });
          assert.deepEqual(Array.from(p.cache.lengths), [6, 6]);
          agree(ma, `${dtype}: full`, p.cache, p.model, randomTensor(random, 2, 2, 2, 4));
        } finally {
          p.cache.dispose();
        }
      }
    });

    test('use after dispose: clear error; dispose twice is harmless', () => {
      const cache = ma.createKVCache({ capacity: 4, headDim: 2 });
      cache.dispose();
      const k = tensor(new Float32Array(2), [1, 1, 1, 2]);
      throwsArg(() => cache.append(k, k), RangeError, 'cache', 'dispose');
      throwsArg(() => cache.attend(k), RangeError, 'cache', 'dispose');
      throwsArg(() => cache.lengths, RangeError, 'cache', 'dispose');
      throwsArg(() => cache.byteLength, RangeError, 'cache', 'dispose');
      throwsArg(() => cache.truncate([0]), RangeError, 'cache', 'dispose');
      throwsArg(() => cache.reset(), RangeError, 'cache', 'dispose');
      cache.dispose();
      cache.dispose();
      // Other caches (and their handles) are unaffected.
      const other = ma.createKVCache({ capacity: 4, headDim: 2 });
      other.append(k, k);
      assert.deepEqual(Array.from(other.lengths), [1]);
      other.dispose();
    });

    test('wrong typed arrays: TypeError naming the argument', () => {
      const f32 = ma.createKVCache({ batch: 1, kvHeads: 1, capacity: 8, headDim: 4 });
      const f16 = ma.createKVCache({ batch: 1, kvHeads: 1, capacity: 8, headDim: 4, dtype: 'float16' });
      const t = (Type) => tensor(new Type(8), [1, 1, 2, 4]);
      try {
        throwsArg(() => f32.append(t(Uint16Array), t(Float32Array)), TypeError, 'k.data', 'Float32Array', 'Uint16Array');
        throwsArg(() => f32.append(t(Float32Array), t(Uint16Array)), TypeError, 'v.data', 'Float32Array', 'Uint16Array');
        throwsArg(() => f32.append(t(Float64Array), t(Float32Array)), TypeError, 'k.data', 'Float32Array', 'Float64Array');
        throwsArg(() => f16.append(t(Float64Array), t(Float32Array)), TypeError, 'k.data', 'Float32Array or a Uint16Array', 'Float64Array');
        throwsArg(() => f16.append(t(Int16Array), t(Int16Array)), TypeError, 'k.data', 'Uint16Array', 'Int16Array');
        throwsArg(() => f16.append(t(Uint16Array), t(Float32Array)), TypeError, 'v.data', 'Uint16Array', 'Float32Array');
        throwsArg(() => f16.append(t(Float32Array), t(Uint16Array)), TypeError, 'v.data', 'Float32Array', 'Uint16Array');
        throwsArg(() => f16.append({ data: Array.from({ length: 8 }), shape: [1, 1, 2, 4] }, t(Float32Array)), TypeError, 'k.data', 'an array');
        throwsArg(() => f32.append(t(Float32Array), t(Float32Array), { counts: new Float32Array([1]) }), TypeError, 'counts', 'Int32Array', 'Float32Array');
        throwsArg(() => f32.append(t(Float32Array), t(Float32Array), { counts: [0.5] }), TypeError, 'counts', 'integer', '0.5');
        throwsArg(() => f32.append(t(Float32Array), t(Float32Array), { count: [1] }), TypeError, 'options', 'count');
        throwsArg(() => f32.append(t(Float32Array), t(Float32Array), null), TypeError, 'options', 'null');
        throwsArg(() => f32.append(null, t(Float32Array)), TypeError, 'k', 'null');
        f32.append(t(Float32Array), t(Float32Array));
        throwsArg(() => f32.attend(t(Uint16Array)), TypeError, 'q.data', 'Float32Array', 'Uint16Array');
        throwsArg(() => f16.attend(t(Float64Array)), TypeError, 'q.data', 'Float32Array', 'Float64Array');
        throwsArg(() => f32.attend(t(Float32Array), { keyLengths: [2] }), TypeError, 'keyLengths', 'implied by the cache');
        throwsArg(() => f32.attend(t(Float32Array), { keyLengths: Int32Array.from([1]) }), TypeError, 'keyLengths');
        throwsArg(() => f32.attend(t(Float32Array), { casual: true }), TypeError, 'options', 'casual');
        throwsArg(() => f32.attend(t(Float32Array), { causal: 'no' }), TypeError, 'causal', 'no');
        throwsArg(() => f32.attend(t(Float32Array), null), TypeError, 'options', 'null');
        throwsArg(() => f32.truncate(new Float64Array([1])), TypeError, 'lengths', 'Int32Array', 'Float64Array');
        throwsArg(() => f32.truncate(), TypeError, 'lengths', 'undefined');
        assert.deepEqual(Array.from(f32.lengths), [2], 'failed calls change nothing');
      } finally {
        f32.dispose();
        f16.dispose();
      }
    });

    test('bad config values: each error names the field', () => {
      const base = { batch: 2, kvHeads: 2, capacity: 8, headDim: 4 };
      const bad = (patch, Type, argument, ...patterns) => throwsArg(() => ma.createKVCache({ ...base, ...patch }), Type, argument, ...patterns);
      bad({ batch: -1 }, RangeError, 'batch', '-1');
      bad({ batch: 1.5 }, RangeError, 'batch', '1.5');
      bad({ batch: '2' }, TypeError, 'batch', '2');
      bad({ kvHeads: NaN }, RangeError, 'kvHeads', 'NaN');
      bad({ kvHeads: 2n }, TypeError, 'kvHeads');
      bad({ capacity: undefined }, TypeError, 'capacity', 'undefined');
      bad({ capacity: -8 }, RangeError, 'capacity', '-8');
      bad({ capacity: Infinity }, RangeError, 'capacity', 'Infinity');
      bad({ headDim: null }, TypeError, 'headDim');
      bad({ headDim: 2 ** 60 }, RangeError, 'headDim');
      bad({ valueDim: -2 }, RangeError, 'valueDim', '-2');
      bad({ dtype: 'float8' }, TypeError, 'dtype', 'float8');
      bad({ dtype: 'bf16' }, TypeError, 'dtype', 'bf16');
      bad({ dtype: Float32Array }, TypeError, 'dtype');
      bad({ window: -1 }, RangeError, 'window', '-1');
      bad({ window: 0.5 }, RangeError, 'window', '0.5');
      bad({ window: 9 }, RangeError, 'capacity', '9', '8');  // capacity >= window
      bad({ heads: 2 }, TypeError, 'config', 'heads');
      bad({ capacity: 2 ** 28, headDim: 64 }, RangeError, 'capacity', '8388608');  // the library's length limit first
      bad({ batch: 1, kvHeads: 1, capacity: 2 ** 23 - 1, headDim: 33 }, RangeError, 'capacity', 'bytes');  // over 2 GiB: the C++ limit
      bad({ capacity: 2 ** 23 + 1 }, RangeError, 'capacity', '8388608');  // the longest sequence
      bad({ batch: 0 }, RangeError, 'batch', '0');
      bad({ kvHeads: 0 }, RangeError, 'kvHeads', '0');
      bad({ capacity: 0 }, RangeError, 'capacity', '0');
      bad({ headDim: 0 }, RangeError, 'headDim', '0');
      bad({ valueDim: 0 }, RangeError, 'valueDim', '0');
      bad({ sinkTokens: 1 }, RangeError, 'sinkTokens', 'needs a window');
      bad({ sinkTokens: -1 }, RangeError, 'sinkTokens', '-1');
      bad({ window: 7, sinkTokens: 2 }, RangeError, 'capacity', 'window + sink tokens = 9');
      bad({ pageSize: 1.5 }, RangeError, 'pageSize', '1.5');
      bad({ pageSize: 2 ** 23 + 1 }, RangeError, 'pageSize', '8388608');
      throwsArg(() => ma.createKVCache(null), TypeError, 'config', 'null');
      throwsArg(() => ma.createKVCache(), TypeError, 'config', 'undefined');
      // Defaults: batch 1, kvHeads 1, valueDim = headDim, float32, no window.
      const c = ma.createKVCache({ capacity: 3, headDim: 5 });
      assert.deepEqual({ ...c.config }, { batch: 1, kvHeads: 1, capacity: 3, headDim: 5, valueDim: 5, dtype: 'float32', window: 0,
        keyDtype: 'float32', valueDtype: 'float32', keyRotation: 'automatic', sinkTokens: 0, pageSize: 0, rope: null });
      assert.equal(c.byteLength, 3 * 10 * 4);
      c.dispose();
    });

    test('append and truncate validation: named errors, nothing written', () => {
      const random = rng(1313);
      const cache = ma.createKVCache({ batch: 2, kvHeads: 2, capacity: 10, headDim: 4, valueDim: 3 });
      try {
        cache.append(randomTensor(random, 2, 2, 3, 4), randomTensor(random, 2, 2, 3, 3));
        const q = randomTensor(random, 2, 2, 1, 4);
        const before = cache.attend(q).output.data;
        const k = (B, H, T, D) => randomTensor(random, B, H, T, D);
        throwsArg(() => cache.append(k(2, 1, 2, 4), k(2, 1, 2, 3)), RangeError, 'k', '2', '1');          // Hkv
        throwsArg(() => cache.append(k(2, 2, 2, 5), k(2, 2, 2, 3)), RangeError, 'k', '4', '5');          // D
        throwsArg(() => cache.append(k(3, 2, 2, 4), k(3, 2, 2, 3)), RangeError, 'k', '2', '3');          // B
        throwsArg(() => cache.append(k(2, 2, 2, 4), k(2, 2, 2, 4)), RangeError, 'v', '3', '4');          // Dv
        throwsArg(() => cache.append(k(2, 2, 2, 4), k(2, 2, 3, 3)), RangeError, 'v', '2', '3');          // T
        throwsArg(() => cache.append(k(2, 2, 2, 4), k(2, 2, 2, 3), { counts: [1] }), RangeError, 'counts', '2', '1');
        throwsArg(() => cache.append(k(2, 2, 2, 4), k(2, 2, 2, 3), { counts: [1, 3] }), RangeError, 'counts[1]', '3');
        throwsArg(() => cache.append(k(2, 2, 2, 4), k(2, 2, 2, 3), { counts: [-1, 0] }), RangeError, 'counts[0]', '-1');
        throwsArg(() => cache.append(tensor(new Float32Array(31), [2, 2, 2, 4]), k(2, 2, 2, 3)), RangeError, 'k.data', '32', '31');
        throwsArg(() => cache.append(tensor(new Float32Array(16), [2, 2, 4]), k(2, 2, 2, 3)), RangeError, 'k.shape', '4 dimensions');
        throwsArg(() => cache.truncate([1]), RangeError, 'lengths', '2', '1');
        throwsArg(() => cache.truncate([1, 4]), RangeError, 'lengths[1]', '4');
        throwsArg(() => cache.truncate([-1, 0]), RangeError, 'lengths[0]', '-1');
        throwsArg(() => cache.attend(randomTensor(random, 2, 3, 1, 4)), RangeError, 'q', 'kvHeads 2', 'given 3');  // Hq % Hkv
        throwsArg(() => cache.attend(randomTensor(random, 2, 2, 1, 5)), RangeError, 'q', 'headDim 4', 'given 5');
        throwsArg(() => cache.attend(randomTensor(random, 3, 2, 1, 4)), RangeError, 'q', 'batch 2', 'given 3');
        throwsArg(() => cache.attend(randomTensor(random, 2, 1, 4, 2, 'blhd'), { layout: 'blhd' }), RangeError, 'q', 'headDim 4', 'given 2');
        throwsArg(() => cache.attend(q, { window: [-2, 0] }), RangeError, 'window', '-2');
        throwsArg(() => cache.attend(q, { bias: tensor(new Float32Array(4), [4]) }), RangeError, 'bias', '4');
        assert.deepEqual(Array.from(cache.lengths), [3, 3]);
        assert.deepEqual(cache.attend(q).output.data, before, 'contents unchanged');
      } finally {
        cache.dispose();
      }
    });

    // ---------------------------------------------------------------------------- memory

    test('large appends (a prompt) and memory growth between calls', () => {
      const random = rng(1414);
      // 2 x 4 x 600 x (64 + 64) floats: 2.4 MB of input, more than the cache keeps as scratch.
      const p = pair(ma, { batch: 2, kvHeads: 4, capacity: 700, headDim: 64 });
      let big = null;
      try {
        p.append(randomTensor(random, 2, 4, 600, 64), randomTensor(random, 2, 4, 600, 64), { counts: [600, 350] });
        agree(ma, 'after a big append', p.cache, p.model, randomTensor(random, 2, 8, 1, 64));
        p.append(randomTensor(random, 2, 4, 1, 64), randomTensor(random, 2, 4, 1, 64));
        // Force wasm memory to grow (address space only: nothing is written to the workspace).
        const n = 1 << 26;
        big = ma.createWorkspace({ q: [1, 1, 1, 1], k: [1, 1, n, 1], v: [1, 1, n, 1] });
        p.append(randomTensor(random, 2, 4, 2, 64), randomTensor(random, 2, 4, 2, 64));
        agree(ma, 'after memory growth', p.cache, p.model, randomTensor(random, 2, 8, 2, 64));
      } finally {
        big?.dispose();
        p.cache.dispose();
      }
    });

    test('out of memory: creating a cache that cannot fit is a RangeError; the module stays usable', () => {
      // 2.4 GB of the 4 GB wasm32 memory taken (address space only: never written), then a cache
      // whose V (2 GB; its K is 32 MB) cannot be had: std::bad_alloc in C++ becomes a RangeError.
      const hog = ma.createWorkspace({ q: [1, 1, 1, 1], k: [1, 1, 300_000_000, 1], v: [1, 1, 300_000_000, 1] });
      try {
        throwsArg(() => ma.createKVCache({ capacity: 8_000_000, headDim: 1, valueDim: 63 }), RangeError, 'memory', 'out of memory');
        throwsArg(() => ma.createKVCache({ capacity: 8_000_000, headDim: 1, valueDim: 63, dtype: 'float16', batch: 2 }), RangeError, 'memory', 'out of memory');
      } finally {
        hog.dispose();
      }
      const random = rng(1515);
      const p = pair(ma, { batch: 1, kvHeads: 1, capacity: 4, headDim: 4 });
      try {
        p.append(randomTensor(random, 1, 1, 3, 4), randomTensor(random, 1, 1, 3, 4));
        agree(ma, 'after out-of-memory', p.cache, p.model, randomTensor(random, 1, 1, 2, 4));
      } finally {
        p.cache.dispose();
      }
    });
  });
}
