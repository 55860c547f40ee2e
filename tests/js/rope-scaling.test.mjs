// RoPE scaling in the JavaScript API (docs/semantics.md, "RoPE scaling"), on every build: the
// rope_scaling blocks of real model configs (Llama 3.1, Qwen2.5's YaRN, DeepSeek's YaRN with mscale,
// Phi-3's LongRoPE, linear, dynamic NTK, per-pair factors) copied into `rope.scaling`, attention()
// against reference.mjs's own float64 frequencies (a third implementation, beside the kernel's and
// the C++ reference's), past each config's original context; a cache with a scaling equals one
// attention() over the whole sequence and reports the scaling resolved; bad values are named in
// camelCase; the scaling object and its lists are read once, whatever the caller's object does.
import { BUILDS } from './builds.mjs';  // first: turns on relaxed SIMD in Node 20
import { describe, test, before } from 'node:test';
import assert from 'node:assert/strict';
import { throwsArg } from './throws.mjs';
import { init } from 'maskattn';
import { referenceAttention, ropeFrequencies, rng, uniform, mismatch } from './reference.mjs';

const tensor = (data, shape) => ({ data, shape });
const D = 32;
const pairs = (f) => Array.from({ length: D / 2 }, (_, i) => f(i));

// [name, rope, offset]: each config's scaling as its config.json states it (camelCase), at an
// offset that puts the positions past its original context where that matters.
const CONFIGS = [
  ['Llama 3.1 (llama3)', { theta: 500000, scaling: { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositions: 8192 } }, 20000],
  ['Qwen2.5 (yarn)', { theta: 1000000, scaling: { type: 'yarn', factor: 4, originalMaxPositions: 32768 } }, 100000],
  ['DeepSeek (yarn, mscale)', { theta: 10000, scaling: { type: 'yarn', factor: 40, originalMaxPositions: 4096, betaFast: 32, betaSlow: 1, mscale: 0.707, mscaleAllDim: 0.707 } }, 50000],
  ['Phi-3 (longrope), short', { theta: 10000, scaling: { type: 'longrope', shortFactor: pairs((i) => 1 + i / 16), longFactor: pairs((i) => 1 + i), originalMaxPositions: 4096, factor: 32 } }, 0],
  ['Phi-3 (longrope), long', { theta: 10000, scaling: { type: 'longrope', shortFactor: pairs((i) => 1 + i / 16), longFactor: pairs((i) => 1 + i), originalMaxPositions: 4096, factor: 32 } }, 5000],
  ['linear 2', { scaling: { type: 'linear', factor: 2 } }, 100],
  ['dynamic NTK', { scaling: { type: 'dynamic', factor: 2, originalMaxPositions: 64 } }, 200],
  ['per-pair factors', { dims: 16, scaling: { type: 'factors', freqFactors: pairs((i) => 1 + (i % 8)).slice(0, 8), attentionFactor: 1.1 } }, 7],
];

for (const buildInfo of BUILDS) {
  describe(`${buildInfo.name} build`, () => {
    let ma;
    before(async () => {
      ma = await init(buildInfo.options);
    });

    for (const [name, rope, offset] of CONFIGS) {
      test(`attention with ${name}`, () => {
        const random = rng(name.length * 104729 + offset);
        const B = 1, Hq = 4, Hkv = 2, Lq = 6, Lk = 40;
        const q = tensor(uniform(random, B * Hq * Lq * D), [B, Hq, Lq, D]);
        const k = tensor(uniform(random, B * Hkv * Lk * D), [B, Hkv, Lk, D]);
        const v = tensor(uniform(random, B * Hkv * Lk * D), [B, Hkv, Lk, D]);
        const options = { causal: true, rope: { ...rope, offset } };
        const got = ma.attention(q, k, v, options);
        const want = referenceAttention(q, k, v, options);
        const naive = referenceAttention(q, k, v, options, 'f32');
        const bad = mismatch(got.output.data, want.output.data, { naive: naive.output.data });
        assert.equal(bad, null, `${name}: ${bad}`);
        const plain = ma.attention(q, k, v, { causal: true, rope: { ...rope, offset, scaling: undefined } });
        assert.notEqual(mismatch(got.output.data, plain.output.data, { atol: 1e-4 }), null, 'the scaling changes the result');
      });
    }

    test('a cache with a scaling equals one attention() over the sequence; its config reports the scaling resolved', () => {
      const random = rng(77);
      const H = 2, Hq = 4, L = 30, Lq = 2;
      for (const [name, rope] of CONFIGS.slice(0, 3)) {
        const cache = ma.createKVCache({ kvHeads: H, capacity: 64, headDim: D, rope: { ...rope, offset: 9000 } });
        try {
          const k = tensor(uniform(random, H * L * D), [1, H, L, D]);
          const v = tensor(uniform(random, H * L * D), [1, H, L, D]);
          for (const [from, to] of [[0, 20], [20, 29], [29, 30]]) {
            const part = (t) => {
              const data = new Float32Array(H * (to - from) * D);
              for (let h = 0; h < H; ++h) data.set(t.data.subarray((h * L + from) * D, (h * L + to) * D), h * (to - from) * D);
              return tensor(data, [1, H, to - from, D]);
            };
            cache.append(part(k), part(v));
          }
          const q = tensor(uniform(random, Hq * Lq * D), [1, Hq, Lq, D]);
          const got = cache.attend(q);
          const want = referenceAttention(q, k, v, { causal: true, rope: { ...rope, offset: 9000 } });
          assert.equal(mismatch(got.output.data, want.output.data, { atol: 2e-5 }), null, name);
          const { scaling } = cache.config.rope;
          const { attention } = ropeFrequencies(rope, D, L + 9000);
          assert.ok(Math.abs(scaling.attentionFactor - attention) < 1e-12, `${name}: attentionFactor ${scaling.attentionFactor} vs ${attention}`);
          if (scaling.type === 'yarn') assert.ok(scaling.betaFast === 32 && scaling.betaSlow === 1, 'yarn betas default to 32 and 1');
          assert.ok(Object.isFrozen(scaling));
        } finally {
          cache.dispose();
        }
      }
      const qwen = ma.createKVCache({ capacity: 4, headDim: D, rope: CONFIGS[1][1] });
      assert.ok(Math.abs(qwen.config.rope.scaling.attentionFactor - (0.1 * Math.log(4) + 1)) < 1e-12);
      qwen.dispose();
    });

    test('bad scaling values are named in camelCase; nothing is created or written', () => {
      const q = tensor(new Float32Array(D).fill(0.5), [1, 1, 1, D]);
      const call = (scaling) => () => ma.attention(q, q, q, { rope: { scaling } });
      const cache = (scaling) => () => ma.createKVCache({ capacity: 4, headDim: D, rope: { scaling } });
      for (const make of [call, cache]) {
        throwsArg(make({ type: 'linear', factor: 0 }), RangeError, 'rope.scaling.factor', '0');
        throwsArg(make({ type: 'linear', factor: NaN }), RangeError, 'rope.scaling.factor', 'finite');
        throwsArg(make({ type: 'linear', factor: '2' }), TypeError, 'rope.scaling.factor', '2');
        throwsArg(make({ type: 'dynamic', factor: 2 }), RangeError, 'rope.scaling.originalMaxPositions', '0');
        throwsArg(make({ type: 'yarn', factor: 4, originalMaxPositions: 1.5 }), RangeError, 'rope.scaling.originalMaxPositions', '1.5');
        throwsArg(make({ type: 'llama3', factor: 8, lowFreqFactor: 4, highFreqFactor: 4, originalMaxPositions: 8192 }), RangeError,
          'rope.scaling.highFreqFactor', 'low_freq_factor');
        throwsArg(make({ type: 'longrope', shortFactor: [1, 2, 3], longFactor: pairs(() => 1), originalMaxPositions: 16 }), RangeError,
          'rope.scaling.shortFactor', '16', '3');
        throwsArg(make({ type: 'factors', freqFactors: pairs((i) => (i === 3 ? -1 : 1)) }), RangeError, 'rope.scaling.freqFactors[3]', '-1');
        throwsArg(make({ type: 'factors', freqFactors: pairs(() => 1), attentionFactor: Infinity }), RangeError, 'rope.scaling.attentionFactor');
        throwsArg(make({ type: 'ntk' }), TypeError, 'rope.scaling.type', 'ntk', 'llama3');
        throwsArg(make({ type: 'yarn', factor: 4, original_max_position_embeddings: 4096 }), TypeError, 'rope.scaling', 'original_max_position_embeddings', 'originalMaxPositions');
        throwsArg(make('llama3'), TypeError, 'rope.scaling');
      }
    });

    test('hostile scaling objects: each field read once, lists copied once, odd map() and holes refused by name', () => {
      const q = tensor(new Float32Array(D).fill(0.25), [1, 1, 1, D]);
      let reads = 0;
      const counted = { type: 'yarn', originalMaxPositions: 64 };
      Object.defineProperty(counted, 'factor', { enumerable: true, get: () => { ++reads; return reads === 1 ? 4 : -1; } });
      const once = ma.attention(q, q, q, { rope: { scaling: counted } });
      assert.equal(reads, 1, 'factor read once');
      assert.ok(once.output.data.every(Number.isFinite));
      class Odd extends Array {
        map() { return [1e-300]; }  // a caller's map() must not decide what is copied
      }
      const odd = Odd.from(pairs(() => 2));
      const viaOdd = ma.attention(q, q, q, { rope: { scaling: { type: 'factors', freqFactors: odd } } });
      const viaPlain = ma.attention(q, q, q, { rope: { scaling: { type: 'factors', freqFactors: pairs(() => 2) } } });
      assert.deepEqual(Array.from(viaOdd.output.data), Array.from(viaPlain.output.data));
      const holes = pairs(() => 1);
      delete holes[5];
      throwsArg(() => ma.attention(q, q, q, { rope: { scaling: { type: 'factors', freqFactors: holes } } }), TypeError, 'rope.scaling.freqFactors[5]');
      const proxy = new Proxy({ type: 'linear', factor: 2 }, { ownKeys: () => { throw new Error('trap'); } });
      assert.throws(() => ma.attention(q, q, q, { rope: { scaling: proxy } }), (e) => e.argument === 'rope.scaling');
      const polluted = Object.create({ factor: 2 });
      polluted.type = 'linear';
      throwsArg(() => ma.attention(q, q, q, { rope: { scaling: polluted } }), RangeError, 'rope.scaling.factor');
      throwsArg(() => ma.attention(q, q, q, { rope: { scaling: { type: 'factors', freqFactors: new Float64Array(2 ** 17) } } }),
        RangeError, 'rope.scaling.freqFactors');
    });
  });
}
