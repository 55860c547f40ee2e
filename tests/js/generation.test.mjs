// What generation needs beyond appending, in the JavaScript API on every build: learned sinks,
// tree verification and keep(), sink tokens in a ring, paged caches and fork(). Each against the
// float64 reference (reference.mjs, which implements sinks and trees from their definitions) or a
// cache built without the feature; misuse gets the library's errors naming the argument.
import { BUILDS } from './builds.mjs';  // first: turns on relaxed SIMD in Node 20
import { describe, test, before } from 'node:test';
import assert from 'node:assert/strict';
import { throwsArg } from './throws.mjs';
import { init } from 'maskattn';
import { referenceAttention, rng, uniform, mismatch } from './reference.mjs';

const ATOL = 2e-6;
const tensor = (data, shape) => ({ data, shape });

/** The full history of one sequence as K [1, Hkv, L, D] (rows per position, per head). */
function historyTensor(rows, Hkv, D) {
  const L = rows.length;
  const data = new Float32Array(Hkv * L * D);
  rows.forEach((perHead, p) => perHead.forEach((row, h) => data.set(row, (h * L + p) * D)));
  return tensor(data, [1, Hkv, L, D]);
}

/** Sequence b's part of q [B, H, L, D]. */
function batchSlice(t, b) {
  const [, H, L, D] = t.shape;
  return tensor(t.data.slice(b * H * L * D, (b + 1) * H * L * D), [1, H, L, D]);
}

for (const buildInfo of BUILDS) {
  describe(`${buildInfo.name} build: generation (sinks, trees, sink tokens, fork)`, () => {
    let ma;
    before(async () => {
      ma = await init(buildInfo.options);
    });

    test('sinks: a hand-computed case, the reference, and rows with nothing but the sink', () => {
      // Logits 0 and ln 3, sink ln 2: denominator 6, weights 1/6 and 1/2, O = 6/6 + 2/2 = 2, lse = ln 6.
      const q = tensor(new Float32Array([Math.log(3)]), [1, 1, 1, 1]);
      const k = tensor(new Float32Array([0, 1]), [1, 1, 2, 1]);
      const v = tensor(new Float32Array([6, 2]), [1, 1, 2, 1]);
      const r = ma.attention(q, k, v, { scale: 1, sinks: [Math.log(2)], returnWeights: true, returnLse: true });
      assert.ok(Math.abs(r.output.data[0] - 2) < 1e-6);
      assert.ok(Math.abs(r.weights.data[0] - 1 / 6) < 1e-7 && Math.abs(r.weights.data[1] - 0.5) < 1e-7);
      assert.ok(Math.abs(r.lse.data[0] - Math.log(6)) < 1e-6);

      const random = rng(21);
      const [B, Hq, Hkv, Lq, Lk, D] = [2, 4, 2, 9, 70, 16];
      const qq = tensor(uniform(random, B * Hq * Lq * D), [B, Hq, Lq, D]);
      const kk = tensor(uniform(random, B * Hkv * Lk * D), [B, Hkv, Lk, D]);
      const vv = tensor(uniform(random, B * Hkv * Lk * D), [B, Hkv, Lk, D]);
      const options = { causal: true, keyLengths: [70, 0], sinks: new Float32Array([0.5, 3, -2, -Infinity]), fullyMasked: 'nan' };
      const got = ma.attention(qq, kk, vv, { ...options, returnLse: true });
      const want = referenceAttention(qq, kk, vv, options);
      // Sequence 1 has no keys: heads with a sink give 0 (not NaN) and lse = the sink; head 3 has none: NaN.
      assert.equal(mismatch(got.output.data.subarray(0, Hq * Lq * D), want.output.data.subarray(0, Hq * Lq * D), { atol: ATOL }), null);
      for (let h = 0; h < Hq; h++) {
        const o = got.output.data[((1 * Hq + h) * Lq) * D];
        const l = got.lse.data[(1 * Hq + h) * Lq];
        if (h === 3) {
          assert.ok(Number.isNaN(o));
        } else {
          assert.equal(o, 0);
          assert.equal(l, options.sinks[h]);
        }
      }
      throwsArg(() => ma.attention(qq, kk, vv, { sinks: [1, 2] }), RangeError, 'sinks', 'length must be 4');
      throwsArg(() => ma.attention(qq, kk, vv, { sinks: [1, NaN, 0, 0] }), RangeError, 'sinks[1]', 'finite logit or -inf');
    });

    test('tree verification equals the reference and an explicit mask; keep() continues from the path', () => {
      const random = rng(22);
      const [B, Hkv, Hq, D, T] = [2, 2, 4, 32, 8];
      const tree = [-1, 0, 0, 1, 1, 2, 4, -1];
      const path = [0, 1, 4];
      for (const config of [{ dtype: 'float32' }, { dtype: 'q8', pageSize: 16 }]) {
        const cache = ma.createKVCache({ batch: B, kvHeads: Hkv, capacity: 200, headDim: D, ...config });
        const kp = tensor(uniform(random, B * Hkv * 100 * D), [B, Hkv, 100, D]);
        cache.append(kp, kp, { counts: [100, 37] });
        const kt = tensor(uniform(random, B * Hkv * T * D), [B, Hkv, T, D]);
        cache.append(kt, kt);
        const q = tensor(uniform(random, B * Hq * T * D), [B, Hq, T, D]);
        const got = cache.attend(q, { tree, returnLse: true });
        const lengths = cache.lengths;
        const Lk = Math.max(...lengths);
        const mask = new Uint8Array(B * T * Lk);
        for (let b = 0; b < B; b++)
          for (let i = 0; i < T; i++) {
            const start = lengths[b] - T;
            for (let j = 0; j < start; j++) mask[(b * T + i) * Lk + j] = 1;
            for (let a = i; a >= 0; a = tree[a]) mask[(b * T + i) * Lk + start + a] = 1;
          }
        const masked = cache.attend(q, { allowed: tensor(mask, [B, 1, T, Lk]), returnLse: true });
        assert.equal(mismatch(got.output.data, masked.output.data, { atol: 1e-6 }), null);
        // q8 keys take integer dot products with a quantized query: the reference holds for float32.
        for (let b = 0; b < B && config.dtype === 'float32'; b++) {
          const r = cache.read(b);
          const K = tensor(r.key.data, [1, ...r.key.shape]);
          const V = tensor(r.value.data, [1, ...r.value.shape]);
          const want = referenceAttention(batchSlice(q, b), K, V, { causal: true, tree });
          assert.equal(mismatch(got.output.data.subarray(b * Hq * T * D, (b + 1) * Hq * T * D), want.output.data, { atol: ATOL }), null);
        }
        const before = cache.read(0);
        cache.keep(0, tree, path);
        cache.keep(1, tree, []);
        assert.deepEqual(Array.from(cache.lengths), [100 + path.length, 37]);
        const after = cache.read(0);
        const n0 = before.key.shape[1];
        for (let h = 0; h < Hkv; h++)
          path.forEach((node, k) => {
            const from = before.key.data.subarray((h * n0 + 100 + node) * D, (h * n0 + 100 + node + 1) * D);
            const to = after.key.data.subarray((h * after.key.shape[1] + 100 + k) * D, (h * after.key.shape[1] + 101 + k) * D);
            assert.deepEqual(Array.from(to), Array.from(from));
          });
        throwsArg(() => cache.attend(q, { tree: [-1, 0, 5, 1, 1, 2, 4, -1] }), RangeError, 'tree[2]', 'earlier node');
        throwsArg(() => cache.attend(q, { tree: [-1, 0] }), RangeError, 'tree', 'Lq = 8');
        throwsArg(() => cache.keep(0, [-1, 0, 0], [0, 2, 1]), RangeError, 'path[2]', 'not a child');
        const lengths2 = Array.from(cache.lengths);
        assert.deepEqual(lengths2, [103, 37], 'a rejected keep changes nothing');
        cache.dispose();
      }
    });

    test('sink tokens: a ring keeps the first positions and attends like the full history', () => {
      const random = rng(23);
      const [Hkv, Hq, D, W, S] = [2, 4, 16, 24, 3];
      const cache = ma.createKVCache({ kvHeads: Hkv, capacity: W + S + 1, headDim: D, window: W, sinkTokens: S, pageSize: 8 });
      const rows = [];
      for (let step = 0; step < 6; step++) {
        const T = step === 0 ? 40 : 7;
        const k = tensor(uniform(random, Hkv * T * D), [1, Hkv, T, D]);
        const v = tensor(uniform(random, Hkv * T * D), [1, Hkv, T, D]);
        cache.append(k, v);
        for (let t = 0; t < T; t++)
          rows.push(Array.from({ length: Hkv }, (_, h) => ({ k: k.data.slice((h * T + t) * D, (h * T + t + 1) * D), v: v.data.slice((h * T + t) * D, (h * T + t + 1) * D) })));
        const q = tensor(uniform(random, Hq * 2 * D), [1, Hq, 2, D]);
        const got = cache.attend(q);
        const K = historyTensor(rows.map((r) => r.map((x) => x.k)), Hkv, D);
        const V = historyTensor(rows.map((r) => r.map((x) => x.v)), Hkv, D);
        // The ring's rule: j <= d(i), and j in the window or a sink token (j < S).
        const L = rows.length;
        const allowed = new Uint8Array(2 * L);
        for (let i = 0; i < 2; i++)
          for (let j = 0, d = L - 2 + i; j <= d; j++) allowed[i * L + j] = j > d - W || j < S ? 1 : 0;
        const want = referenceAttention(q, K, V, { causal: true, allowed: { data: allowed, shape: [1, 1, 2, L] } });
        assert.equal(mismatch(got.output.data, want.output.data, { atol: ATOL }), null, `step ${step}`);
        const held = cache.read(0);
        assert.equal(held.sinks, S);
        assert.equal(held.key.shape[1], S + Math.min(rows.length - S, W + 1), 'the sink tokens and the ring');
        assert.equal(held.start, rows.length - (held.key.shape[1] - S));
        assert.deepEqual(Array.from(held.key.data.subarray(0, D)), Array.from(rows[0][0].k));
      }
      throwsArg(() => ma.createKVCache({ capacity: 10, headDim: 4, sinkTokens: 2 }), RangeError, 'sinkTokens', 'needs a window');
      throwsArg(() => ma.createKVCache({ capacity: 10, headDim: 4, window: 9, sinkTokens: 2 }), RangeError, 'capacity', 'window + sink tokens');
      cache.dispose();
    });

    test('fork: 8 sequences over one prompt in little more than its bytes, each like an unshared cache', () => {
      const random = rng(24);
      const [B, Hkv, Hq, D, P, L] = [8, 2, 4, 32, 32, 2000];
      const shared = ma.createKVCache({ batch: B, kvHeads: Hkv, capacity: 2100, headDim: D, pageSize: P });
      const unshared = ma.createKVCache({ batch: B, kvHeads: Hkv, capacity: 2100, headDim: D, pageSize: P });
      const prompt = uniform(random, Hkv * L * D);
      const all = new Float32Array(B * Hkv * L * D);
      for (let b = 0; b < B; b++) all.set(prompt, b * Hkv * L * D);
      const counts = new Int32Array(B);
      counts[0] = L;
      shared.append(tensor(all, [B, Hkv, L, D]), tensor(all, [B, Hkv, L, D]), { counts });
      unshared.append(tensor(all, [B, Hkv, L, D]), tensor(all, [B, Hkv, L, D]));
      const one = shared.byteLength;
      for (let b = 1; b < B; b++) shared.fork(b >> 1, b);
      assert.equal(shared.byteLength, one, 'a fork takes no K/V memory');
      const k = tensor(uniform(random, B * Hkv * 2 * D), [B, Hkv, 2, D]);
      for (const c of [shared, unshared]) c.append(k, k, { counts: [2, 1, 0, 2, 1, 2, 0, 1] });
      // The prompt's last page (positions 1984..2015, partly filled) is shared by all 8: each of the
      // 6 sequences that wrote into it took its own copy, the 2 others still share the original.
      const page = one / Math.ceil(L / P);
      assert.equal(shared.byteLength, one + 6 * page);
      assert.ok(shared.byteLength <= 1.15 * one, `${shared.byteLength} bytes for 8 sequences, one prompt is ${one}`);
      const q = tensor(uniform(random, B * Hq * D), [B, Hq, 1, D]);
      assert.deepEqual(Array.from(shared.attend(q).output.data), Array.from(unshared.attend(q).output.data));
      throwsArg(() => shared.fork(0, 1), RangeError, 'dst', 'empty sequence');
      throwsArg(() => shared.fork(0, 8), RangeError, 'dst');
      shared.dispose();
      unshared.dispose();
    });
  });
}
