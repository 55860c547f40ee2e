// ma.mergeAttention on every build: partial results over disjoint key sets (attention() with
// returnLse over slices of K/V) merge into the float64 reference over the union; parts that attend
// nothing add nothing; cascade attention over a shared prefix; named errors.
import { BUILDS } from './builds.mjs';  // first: turns on relaxed SIMD in Node 20
import { describe, test, before } from 'node:test';
import assert from 'node:assert/strict';
import { throwsArg } from './throws.mjs';
import { init } from 'maskattn';
import { referenceAttention, rng, uniform, mismatch } from './reference.mjs';

/** Keys [j0, j1) of a [B, H, L, D] tensor. */
function slice(t, j0, j1) {
  const [B, H, L, D] = t.shape;
  const n = j1 - j0;
  const data = new Float32Array(B * H * n * D);
  for (let bh = 0; bh < B * H; bh++) data.set(t.data.subarray((bh * L + j0) * D, (bh * L + j1) * D), bh * n * D);
  return { data, shape: [B, H, n, D] };
}

for (const buildInfo of BUILDS) {
  describe(`${buildInfo.name} build: mergeAttention`, () => {
    let ma;
    before(async () => {
      ma = await init(buildInfo.options);
    });

    test('parts over disjoint keys merge into the attention over their union', () => {
      const random = rng(4);
      const [B, H, L, Lk, D] = [2, 3, 4, 50, 16];
      const q = { data: uniform(random, B * H * L * D), shape: [B, H, L, D] };
      const k = { data: uniform(random, B * H * Lk * D), shape: [B, H, Lk, D] };
      const v = { data: uniform(random, B * H * Lk * D), shape: [B, H, Lk, D] };
      const want = referenceAttention(q, k, v, { returnLse: true });
      const cuts = [0, 7, 31, 50];
      const parts = cuts.slice(1).map((j1, c) => ma.attention(q, slice(k, cuts[c], j1), slice(v, cuts[c], j1), { returnLse: true }));
      const got = ma.mergeAttention(parts.map(({ output, lse }) => ({ output, lse })));
      assert.deepEqual(got.output.shape, [B, H, L, D]);
      assert.deepEqual(got.lse.shape, [B, H, L]);
      assert.equal(mismatch(got.output.data, want.output.data, { atol: 2e-6 }), null);
      assert.equal(mismatch(got.lse.data, want.lse.data, { atol: 4e-6 }), null);
    });

    test('a part that attends nothing adds nothing; no part at all gives 0 and -inf', () => {
      const random = rng(5);
      const [B, H, L, D] = [2, 1, 2, 8];
      const q = { data: uniform(random, B * H * L * D), shape: [B, H, L, D] };
      const k = { data: uniform(random, B * H * 20 * D), shape: [B, H, 20, D] };
      const v = { data: uniform(random, B * H * 20 * D), shape: [B, H, 20, D] };
      const a = ma.attention(q, slice(k, 0, 10), slice(v, 0, 10), { returnLse: true });
      // Sequence 0 attends nothing in part b (key length 0; NaN policy: its output there is NaN).
      const b = ma.attention(q, slice(k, 10, 20), slice(v, 10, 20), { returnLse: true, keyLengths: [0, 10], fullyMasked: 'nan' });
      const got = ma.mergeAttention([{ output: a.output, lse: a.lse }, { output: b.output, lse: b.lse }]);
      for (let n = 0; n < H * L * D; n++) assert.equal(got.output.data[n], a.output.data[n]);
      const none = { data: new Float32Array(B * H * L).fill(-Infinity), shape: [B, H, L] };
      const empty = ma.mergeAttention([{ output: b.output, lse: none }]);
      assert.ok(empty.output.data.every((x) => x === 0));
      assert.ok(empty.lse.data.every((x) => x === -Infinity));
    });

    test('cascade attention: a shared prefix attended once, each suffix on its own, merged', () => {
      const random = rng(6);
      const [S, H, P, T, D] = [3, 2, 40, 6, 16];
      const kp = uniform(random, H * P * D), vp = uniform(random, H * P * D);
      const q = uniform(random, S * H * D);  // one new query per sequence and head
      // The prefix once: the S sequences' queries as S rows of one batch.
      const rows = new Float32Array(H * S * D);
      for (let s = 0; s < S; s++) for (let h = 0; h < H; h++) rows.set(q.subarray((s * H + h) * D, (s * H + h + 1) * D), (h * S + s) * D);
      const prefix = ma.attention({ data: rows, shape: [1, H, S, D] }, { data: kp, shape: [1, H, P, D] }, { data: vp, shape: [1, H, P, D] }, { returnLse: true });
      for (let s = 0; s < S; s++) {
        const ks = uniform(random, H * T * D), vs = uniform(random, H * T * D);
        const qs = { data: q.slice(s * H * D, (s + 1) * H * D), shape: [1, H, 1, D] };
        const out = new Float32Array(H * D), lse = new Float32Array(H);
        for (let h = 0; h < H; h++) {
          out.set(prefix.output.data.subarray((h * S + s) * D, (h * S + s + 1) * D), h * D);
          lse[h] = prefix.lse.data[h * S + s];
        }
        const suffix = ma.attention(qs, { data: ks, shape: [1, H, T, D] }, { data: vs, shape: [1, H, T, D] }, { returnLse: true });
        const got = ma.mergeAttention([
          { output: { data: out, shape: [1, H, 1, D] }, lse: { data: lse, shape: [1, H, 1] } },
          { output: suffix.output, lse: suffix.lse },
        ]);
        const kf = new Float32Array(H * (P + T) * D), vf = new Float32Array(kf.length);
        for (let h = 0; h < H; h++) {
          kf.set(kp.subarray(h * P * D, (h + 1) * P * D), h * (P + T) * D);
          vf.set(vp.subarray(h * P * D, (h + 1) * P * D), h * (P + T) * D);
          kf.set(ks.subarray(h * T * D, (h + 1) * T * D), (h * (P + T) + P) * D);
          vf.set(vs.subarray(h * T * D, (h + 1) * T * D), (h * (P + T) + P) * D);
        }
        const want = referenceAttention(qs, { data: kf, shape: [1, H, P + T, D] }, { data: vf, shape: [1, H, P + T, D] });
        assert.equal(mismatch(got.output.data, want.output.data, { atol: 2e-6 }), null, `sequence ${s}`);
      }
    });

    test('bad parts are named', () => {
      const o = { data: new Float32Array(2 * 3 * 4), shape: [1, 2, 3, 4] };
      const l = { data: new Float32Array(6), shape: [1, 2, 3] };
      throwsArg(() => ma.mergeAttention(null), TypeError, 'parts');
      throwsArg(() => ma.mergeAttention([]), RangeError, 'parts');
      throwsArg(() => ma.mergeAttention([{ output: o }]), TypeError, 'parts[0].lse');
      throwsArg(() => ma.mergeAttention([{ output: o, lse: l, weights: l }]), TypeError, 'parts[0]');
      throwsArg(() => ma.mergeAttention([{ output: o, lse: { data: new Float32Array(3), shape: [1, 1, 3] } }]), RangeError, 'parts[0].lse');
      throwsArg(() => ma.mergeAttention([{ output: o, lse: l }, { output: { data: new Float32Array(16), shape: [1, 2, 2, 4] }, lse: { data: new Float32Array(4), shape: [1, 2, 2] } }]),
        RangeError, 'parts[1].output');
      throwsArg(() => ma.mergeAttention([{ output: { data: new Uint8Array(24), shape: [1, 2, 3, 4] }, lse: l }]), TypeError, 'parts[0].output.data');
    });
  });
}
