// Independent oracle: maskattn (both wasm builds) against onnxruntime-web's wasm backend running the
// standard ONNX `Attention` operator (opset 23, domain ''; opset 24 for nonpad_kv_seqlen), with the
// model bytes built here (tests/js/onnx-model.mjs). Runs offline from node_modules.
//
// Where onnxruntime-web (1.30, CPU kernel core/providers/cpu/llm/attention.cc) and maskattn differ,
// the test asserts what ORT was observed to do (so this list stays true) and checks maskattn
// against a float64 reference of maskattn's own semantics (docs/semantics.md) instead:
//
//   1. is_causal with Lq != Lk and no past_key: ORT aligns the diagonal top-left (key j <= i);
//      maskattn's default is bottom-right (j <= i + Lk - Lq). ORT equals maskattn's align: 'top-left'.
//      With past_key/past_value (KV cache), ORT uses j <= past + i, which is bottom-right and equals
//      maskattn's default.
//   2. Masked keys are not skipped by ORT: a mask becomes an additive -FLT_MAX (bool false) and is
//      added to Q·Kᵀ, and the zero weights still multiply V. NaN in a masked key or value makes the
//      whole row NaN in ORT; maskattn never reads masked K/V (contract), so the row stays finite.
//   3. ORT uses -FLT_MAX (-3.4028234663852886e38) as its "masked" sentinel: a float mask whose row is
//      entirely -FLT_MAX gives a zero row in ORT (as if fully masked), while maskattn treats every
//      finite bias as a value (semantics.md: very negative finite biases are not masks), giving the
//      uniform average. For -3.4e38 (which rounds to a float just above -FLT_MAX), -1e9 and -1e4 both
//      give the uniform average.
//   4. Fully masked rows (every key false/-inf, nonpad_kv_seqlen = 0): ORT returns 0 for Y and for
//      the post-softmax weights, the same as maskattn's default policy 'zero'. maskattn's 'nan' and
//      'uniform' policies have no ORT counterpart except that 'uniform' equals ORT with a -1e9 fill.
//   5. Shapes ORT rejects and maskattn accepts: Lk = 0, Lq = 0, B = 0, D = 0 (ORT requires every
//      size > 0), scale = 0 or negative (ORT: "scale must be greater than 0"), and masks broadcast
//      over the query dimension or given with fewer than 2 dimensions (ORT requires
//      attn_mask.shape[-2] == Lq and shape[-1] == total length; e.g. a [B, 1, 1, Lk] padding mask).
//   6. Features only maskattn has (no ORT counterpart, not compared here): windows, prefix-LM,
//      segments, ALiBi, query lengths, lse, Target selection. ORT has past_key/present outputs that
//      maskattn leaves to the caller (concatenate K and V).
//
// Same in both: bool mask polarity (true = attend, maskattn `allowed` nonzero = attend), additive
// float masks, softcap applied before the mask (so -inf stays -inf), GQA head mapping
// (h -> h / (Hq / Hkv)), 3-D [B, L, H*D] inputs = maskattn layout 'blhd', Dv != D, +inf / NaN bias
// giving a NaN row, default scale 1/sqrt(D).

import { BUILDS } from './builds.mjs';  // first: turns on relaxed SIMD in Node 20
import test from 'node:test';
import assert from 'node:assert/strict';
import * as ort from 'onnxruntime-web';
import { init } from '../../js/index.js';
import { attentionModel, ONNX_FLOAT, ONNX_BOOL } from './onnx-model.mjs';
import { rng as rng01 } from './reference.mjs';

ort.env.wasm.numThreads = 1;  // Node without cross-origin isolation: no worker threads needed
ort.env.logLevel = 'error';

const FLT_MAX = 3.4028234663852886e38;
const INT64 = 7;  // TensorProto.DataType

// ------------------------------------------------------------------------------------ helpers

// Seeded, platform-independent uniform numbers in [-1, 1).
// The shared seeded generator, on [-1, 1).
function rng(seed) {
  const unit = rng01(seed);
  return () => unit() * 2 - 1;
}
const product = (dims) => dims.reduce((a, b) => a * b, 1);
function randomTensor(shape, seed, amplitude = 1) {
  const r = rng(seed);
  return { data: Float32Array.from({ length: product(shape) }, () => r() * amplitude), shape };
}
function randomBool(shape, seed, pTrue = 0.6) {
  const r = rng(seed);
  return { data: Uint8Array.from({ length: product(shape) }, () => ((r() + 1) / 2 < pTrue ? 1 : 0)), shape };
}

// Runs one ONNX Attention node on onnxruntime-web's wasm backend.
//   mask: { data, shape, type: 'bool' | 'float32' };  past: { key, value } (4-D);
//   nonpad: kv lengths per batch (opset 24);  weights: also return the post-softmax weights
//   (qk_matmul_output_mode 3).
async function ortAttention({ q, k, v, mask, attrs = {}, past, nonpad, weights = false }) {
  const tensorInput = (name, t, type = ONNX_FLOAT) => ({ name, type, shape: t.shape });
  const inputs = [tensorInput('Q', q), tensorInput('K', k), tensorInput('V', v)];
  const feeds = {
    Q: new ort.Tensor('float32', q.data, q.shape),
    K: new ort.Tensor('float32', k.data, k.shape),
    V: new ort.Tensor('float32', v.data, v.shape),
  };
  const none = { name: '' };
  inputs.push(mask ? tensorInput('attn_mask', mask, mask.type === 'bool' ? ONNX_BOOL : ONNX_FLOAT) : none);
  if (mask) feeds.attn_mask = new ort.Tensor(mask.type, mask.data, mask.shape);
  if (past) {
    inputs.push(tensorInput('past_key', past.key), tensorInput('past_value', past.value));
    feeds.past_key = new ort.Tensor('float32', past.key.data, past.key.shape);
    feeds.past_value = new ort.Tensor('float32', past.value.data, past.value.shape);
  } else inputs.push(none, none);
  if (nonpad) {
    inputs.push({ name: 'nonpad_kv_seqlen', type: INT64, shape: [nonpad.length] });
    feeds.nonpad_kv_seqlen = new ort.Tensor('int64', BigInt64Array.from(nonpad, BigInt), [nonpad.length]);
  }
  while (inputs.length && inputs[inputs.length - 1].name === '') inputs.pop();
  const out = (name) => ({ name, type: ONNX_FLOAT, shape: null });
  // ORT requires present_key/present_value outputs when past_key is given.
  const outputs = [out('Y'), past ? out('present_key') : none, past ? out('present_value') : none, weights ? out('W') : none];
  while (outputs.length && outputs[outputs.length - 1].name === '') outputs.pop();
  const model = attentionModel({
    inputs, outputs, opset: nonpad ? 24 : 23,
    attributes: { ...attrs, ...(weights ? { qk_matmul_output_mode: 3 } : {}) },
  });
  const session = await ort.InferenceSession.create(model, { executionProviders: ['wasm'] });
  try {
    const r = await session.run(feeds);
    return { Y: r.Y.data, dims: r.Y.dims, W: weights ? r.W.data : undefined };
  } finally {
    await session.release();
  }
}

// float64 reference of maskattn's semantics (the subset this file compares): bhld inputs.
function reference(q, k, v, opt = {}) {
  const [B, Hq, Lq, D] = q.shape;
  const [, Hkv, Lk] = k.shape;
  const Dv = v.shape[3];
  const scale = opt.scale ?? (D > 0 ? 1 / Math.sqrt(D) : 1);
  const group = Hq / Hkv;
  const mask4 = (m) => {
    if (!m) return null;
    const shape = [...Array(4 - m.shape.length).fill(1), ...m.shape];
    const strides = [0, 0, 0, 0];
    for (let d = 3, s = 1; d >= 0; --d) {
      strides[d] = shape[d] === 1 ? 0 : s;
      s *= shape[d];
    }
    return (b, h, i, j) => m.data[b * strides[0] + h * strides[1] + i * strides[2] + j * strides[3]];
  };
  const allowed = mask4(opt.allowed);
  const bias = mask4(opt.bias);
  const O = new Float64Array(B * Hq * Lq * Dv);
  const W = new Float64Array(B * Hq * Lq * Lk);
  for (let b = 0; b < B; ++b) {
    const kLen = opt.keyLengths ? opt.keyLengths[b] : Lk;
    for (let h = 0; h < Hq; ++h) {
      const hk = Math.floor(h / group);
      for (let i = 0; i < Lq; ++i) {
        const d = opt.align === 'top-left' ? i : i + kLen - Lq;
        const row = (b * Hq + h) * Lq + i;
        const s = new Float64Array(Lk);
        const ok = new Array(Lk).fill(false);
        let any = false;
        for (let j = 0; j < Lk; ++j) {
          if (j >= kLen || (opt.causal && j > d) || (allowed && !allowed(b, h, i, j))) continue;
          const bj = bias ? bias(b, h, i, j) : 0;
          if (bj === -Infinity) continue;
          let x = 0;
          for (let c = 0; c < D; ++c) x += q.data[row * D + c] * k.data[((b * Hkv + hk) * Lk + j) * D + c];
          x *= scale;
          if (opt.softcap > 0) x = opt.softcap * Math.tanh(x / opt.softcap);
          s[j] = x + bj;
          ok[j] = true;
          any = true;
        }
        const vAt = (j, c) => v.data[((b * Hkv + hk) * Lk + j) * Dv + c];
        if (!any) {
          const policy = opt.fullyMasked ?? 'zero';
          for (let j = 0; j < Lk; ++j) W[row * Lk + j] = policy === 'nan' ? NaN : policy === 'uniform' ? 1 / Lk : 0;
          for (let c = 0; c < Dv; ++c) {
            let o = 0;
            if (policy === 'nan') o = NaN;
            else if (policy === 'uniform') for (let j = 0; j < Lk; ++j) o += vAt(j, c) / Lk;
            O[row * Dv + c] = o;
          }
          continue;
        }
        let m = -Infinity;
        for (let j = 0; j < Lk; ++j) if (ok[j]) m = Number.isNaN(s[j]) || Number.isNaN(m) ? NaN : Math.max(m, s[j]);
        let sum = 0;
        for (let j = 0; j < Lk; ++j) if (ok[j]) sum += (W[row * Lk + j] = Math.exp(s[j] - m));
        for (let j = 0; j < Lk; ++j) W[row * Lk + j] /= sum;
        for (let c = 0; c < Dv; ++c) {
          let o = 0;
          for (let j = 0; j < Lk; ++j) if (ok[j]) o += W[row * Lk + j] * vAt(j, c);
          O[row * Dv + c] = o;
        }
      }
    }
  }
  return { O, W };
}

// Largest |a - b| (NaN must match NaN); fails with the first offending index.
function assertClose(actual, expected, tol, label) {
  assert.equal(actual.length, expected.length, `${label}: length`);
  let worst = 0;
  for (let i = 0; i < actual.length; ++i) {
    const a = actual[i];
    const e = expected[i];
    if (Number.isNaN(e) || Number.isNaN(a)) {
      assert.ok(Number.isNaN(a) && Number.isNaN(e), `${label}[${i}]: got ${a}, expected ${e}`);
      continue;
    }
    const err = Math.abs(a - e);
    const bound = tol * Math.max(1, Math.abs(e));
    assert.ok(err <= bound, `${label}[${i}]: got ${a}, expected ${e} (|diff| ${err} > ${bound})`);
    worst = Math.max(worst, err);
  }
  return worst;
}
function maxAbsDiff(a, b) {
  let worst = 0;
  for (let i = 0; i < a.length; ++i) if (Number.isFinite(a[i]) && Number.isFinite(b[i])) worst = Math.max(worst, Math.abs(a[i] - b[i]));
  return worst;
}
const TOL_ORT = 2e-5;  // two fp32 implementations
const TOL_REF = 1e-5;  // contract: at most 1e-5 absolute against float64 on unit-scale inputs

// Transposes a contiguous [B, L, H, D] buffer to [B, H, L, D] (for the 3-D / blhd reference).
function blhdToBhld(t, B, L, H, D) {
  const out = new Float32Array(t.data.length);
  for (let b = 0; b < B; ++b)
    for (let l = 0; l < L; ++l)
      for (let h = 0; h < H; ++h)
        for (let d = 0; d < D; ++d) out[((b * H + h) * L + l) * D + d] = t.data[((b * L + l) * H + h) * D + d];
  return { data: out, shape: [B, H, L, D] };
}

const builds = await Promise.all(BUILDS.map(async (b) => [b.name, await init(b.options)]));

// Compares maskattn (every build) with ORT and with the float64 reference.
async function compareAll(t, { q, k, v, ortArgs, maOpt, refOpt = maOpt, weights = false, label }) {
  const onnx = await ortAttention({ q, k, v, weights, ...ortArgs });
  const ref = reference(q, k, v, refOpt);
  // Contract bound against float64: 1e-5, or twice the error of a naive fp32 implementation on the
  // same inputs (ORT's CPU kernel is one: GEMM, add mask, softmax, GEMM), whichever is larger.
  const tolO = Math.max(TOL_REF, 2 * maxAbsDiff(onnx.Y, ref.O));
  const tolW = weights ? Math.max(TOL_REF, 2 * maxAbsDiff(onnx.W, ref.W)) : 0;
  for (const [name, ma] of builds) {
    const r = ma.attention(q, k, v, { ...maOpt, returnWeights: weights });
    assert.deepEqual(r.output.shape, Array.from(onnx.dims), `${label} ${name}: output shape`);
    assertClose(r.output.data, onnx.Y, TOL_ORT, `${label} ${name} vs onnxruntime-web`);
    assertClose(r.output.data, ref.O, tolO, `${label} ${name} vs float64 reference`);
    if (weights) {
      assertClose(r.weights.data, onnx.W, TOL_ORT, `${label} ${name} weights vs onnxruntime-web`);
      assertClose(r.weights.data, ref.W, tolW, `${label} ${name} weights vs float64 reference`);
    }
  }
  return onnx;
}

function qkv([B, Hq, Hkv, Lq, Lk, D, Dv], seed, amplitude = 1) {
  return {
    q: randomTensor([B, Hq, Lq, D], seed, amplitude),
    k: randomTensor([B, Hkv, Lk, D], seed + 1, amplitude),
    v: randomTensor([B, Hkv, Lk, Dv], seed + 2),
  };
}

// Runs ORT for a case it may reject: returns the result, or skips the subtest saying why.
async function ortOrSkip(t, args) {
  try {
    return await ortAttention(args);
  } catch (error) {
    // ORT_ENFORCE messages end in "<condition> was false. <reason>": keep the reason.
    const message = String(error.message);
    const why = (message.includes('was false.') ? message.replace(/^[^]*was false\.\s*/, '') : message).split('\n')[0].slice(0, 200);
    t.skip(`onnxruntime-web cannot run this case: ${why}`);
    return null;
  }
}

// ------------------------------------------------------------------------------------ tests

test('onnxruntime-web runs the hand-encoded opset-23 Attention model offline', async () => {
  const { q, k, v } = qkv([1, 1, 1, 2, 3, 4, 4], 1);
  const r = await ortAttention({ q, k, v });
  assert.deepEqual(Array.from(r.dims), [1, 1, 2, 4]);
});

test('no mask, 4-D [B,H,L,D]: shapes around tile and SIMD sizes, Dv != D, decode', async (t) => {
  const shapes = [
    [1, 1, 1, 1, 1, 1, 1], [2, 3, 3, 5, 7, 8, 8], [1, 2, 2, 17, 33, 16, 16], [2, 2, 2, 64, 65, 32, 16],
    [1, 4, 4, 1, 129, 64, 64], [1, 1, 1, 31, 15, 3, 5], [1, 2, 2, 128, 127, 8, 8],
  ];
  for (const [n, s] of shapes.entries()) {
    const { q, k, v } = qkv(s, 100 + 10 * n);
    await compareAll(t, { q, k, v, ortArgs: {}, maOpt: {}, label: `shape ${s}` });
  }
});

test('lengths around every SIMD width and tile size, bool mask + is_causal (top-left)', async (t) => {
  for (const L of [1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129]) {
    const Lq = Math.max(1, (L * 3) >> 2);
    const D = [1, 3, 4, 5, 8, 16][L % 6];
    const { q, k, v } = qkv([2, 2, 2, Lq, L, D, D], 150 + L);
    const m = randomBool([2, 1, Lq, L], 151 + L, 0.7);
    await compareAll(t, {
      q, k, v, ortArgs: { mask: { ...m, type: 'bool' }, attrs: { is_causal: 1 } }, maOpt: { allowed: m, causal: true, align: 'top-left' },
      label: `L ${L} (Lq ${Lq}, D ${D})`,
    });
  }
});

test('large logits (|s| up to ~1e4): within twice the naive fp32 error', async (t) => {
  for (const amplitude of [10, 30, 100]) {
    const { q, k, v } = qkv([1, 2, 2, 33, 65, 64, 64], 170 + amplitude, amplitude);
    await compareAll(t, { q, k, v, ortArgs: {}, maOpt: {}, label: `amplitude ${amplitude}` });
  }
});

test('explicit positive scale; weights equal ORT qk_matmul_output_mode 3 (post-softmax)', async (t) => {
  const { q, k, v } = qkv([2, 2, 2, 9, 13, 8, 8], 200);
  await compareAll(t, { q, k, v, ortArgs: { attrs: { scale: 0.37 } }, maOpt: { scale: 0.37 }, weights: true, label: 'scale' });
});

test('float additive mask (finite values and -inf) = maskattn bias, every broadcast shape ORT accepts', async (t) => {
  const [B, H, Lq, Lk] = [2, 3, 7, 9];
  const { q, k, v } = qkv([B, H, H, Lq, Lk, 8, 8], 300);
  for (const shape of [[Lq, Lk], [H, Lq, Lk], [1, H, Lq, Lk], [B, 1, Lq, Lk], [B, H, Lq, Lk]]) {
    const m = randomTensor(shape, 310 + shape.length, 3);
    m.data.forEach((x, i) => { if (x > 2) m.data[i] = -Infinity; });
    await compareAll(t, {
      q, k, v, ortArgs: { mask: { ...m, type: 'float32' } }, maOpt: { bias: m }, weights: true, label: `bias [${shape}]`,
    });
  }
});

test('bool mask polarity: ONNX true = attend = maskattn allowed nonzero', async (t) => {
  // One allowed key per row: the output row must be exactly that key's value row.
  const [Lq, Lk, D] = [3, 4, 4];
  const { q, k } = qkv([1, 1, 1, Lq, Lk, D, D], 400);
  const v = { data: Float32Array.from({ length: Lk * D }, (_, i) => Math.floor(i / D) + 1), shape: [1, 1, Lk, D] };
  const pick = [2, 0, 3];
  const allowed = { data: Uint8Array.from({ length: Lq * Lk }, (_, i) => (i % Lk === pick[Math.floor(i / Lk)] ? 1 : 0)), shape: [Lq, Lk] };
  const onnx = await compareAll(t, { q, k, v, ortArgs: { mask: { ...allowed, type: 'bool' } }, maOpt: { allowed }, label: 'polarity' });
  for (let i = 0; i < Lq; ++i) assert.equal(onnx.Y[i * D], pick[i] + 1, `ORT row ${i} attends only key ${pick[i]}`);
  // Random bool masks in every accepted shape.
  const [B, H] = [2, 2];
  const big = qkv([B, H, H, 6, 11, 8, 8], 410);
  for (const shape of [[6, 11], [H, 6, 11], [B, 1, 6, 11], [B, H, 6, 11]]) {
    const m = randomBool(shape, 420 + shape.length);
    await compareAll(t, { ...big, ortArgs: { mask: { ...m, type: 'bool' } }, maOpt: { allowed: m }, weights: true, label: `allowed [${shape}]` });
  }
});

test('is_causal with Lq == Lk equals maskattn causal (either alignment)', async (t) => {
  const { q, k, v } = qkv([2, 2, 2, 17, 17, 8, 8], 500);
  await compareAll(t, { q, k, v, ortArgs: { attrs: { is_causal: 1 } }, maOpt: { causal: true }, weights: true, label: 'causal Lq == Lk' });
  await compareAll(t, { q, k, v, ortArgs: { attrs: { is_causal: 1 } }, maOpt: { causal: true, align: 'top-left' }, label: 'causal Lq == Lk top-left' });
});

test('is_causal with Lq != Lk: ORT is top-left aligned; maskattn default (bottom-right) checked against float64', async (t) => {
  // Difference 1: ORT's CPU kernel masks t > past_len + s, i.e. top-left when there is no past_key.
  for (const [Lq, Lk] of [[5, 9], [9, 5], [1, 8], [16, 33]]) {
    const { q, k, v } = qkv([1, 2, 2, Lq, Lk, 8, 8], 600 + Lq * 100 + Lk);
    const onnx = await compareAll(t, {
      q, k, v, ortArgs: { attrs: { is_causal: 1 } }, maOpt: { causal: true, align: 'top-left' }, label: `causal ${Lq}x${Lk} top-left`,
    });
    const ref = reference(q, k, v, { causal: true });
    for (const [name, ma] of builds) {
      const ours = ma.attention(q, k, v, { causal: true }).output.data;
      assertClose(ours, ref.O, TOL_REF, `bottom-right ${Lq}x${Lk} ${name} vs float64 reference`);
      const differs = ours.some((x, i) => Math.abs(x - onnx.Y[i]) > 1e-3);
      assert.ok(differs, `bottom-right ${Lq}x${Lk}: expected to differ from ORT's top-left is_causal`);
    }
  }
});

test('is_causal with past_key/past_value (KV cache) is bottom-right: equals maskattn default causal', async (t) => {
  for (const [Lq, P] of [[3, 5], [1, 7], [4, 0]]) {
    const [B, Hq, Hkv, D] = [2, 4, 2, 8];
    const Lk = Lq + P;
    const { q, k, v } = qkv([B, Hq, Hkv, Lq, Lk, D, D], 700 + Lq * 10 + P);
    if (P === 0) {
      await compareAll(t, { q, k, v, ortArgs: { attrs: { is_causal: 1 } }, maOpt: { causal: true }, label: 'no past' });
      continue;
    }
    // Split the full K/V into past (first P keys) and new (last Lq keys) per (b, h).
    const split = (x, from, to) => {
      const Dx = x.shape[3];
      const out = new Float32Array(B * Hkv * (to - from) * Dx);
      for (let bh = 0; bh < B * Hkv; ++bh) out.set(x.data.subarray((bh * Lk + from) * Dx, (bh * Lk + to) * Dx), bh * (to - from) * Dx);
      return { data: out, shape: [B, Hkv, to - from, Dx] };
    };
    const onnx = await ortAttention({
      q, k: split(k, P, Lk), v: split(v, P, Lk), past: { key: split(k, 0, P), value: split(v, 0, P) }, attrs: { is_causal: 1 },
    });
    const ref = reference(q, k, v, { causal: true });
    for (const [name, ma] of builds) {
      const ours = ma.attention(q, k, v, { causal: true }).output.data;
      assertClose(ours, onnx.Y, TOL_ORT, `past ${P} + ${Lq} ${name} vs onnxruntime-web`);
      assertClose(ours, ref.O, TOL_REF, `past ${P} + ${Lq} ${name} vs float64 reference`);
    }
  }
});

test('is_causal combined with a bool or float mask (rules AND together)', async (t) => {
  const { q, k, v } = qkv([2, 2, 2, 12, 12, 8, 8], 800);
  const m = randomBool([2, 1, 12, 12], 801, 0.7);
  await compareAll(t, {
    q, k, v, ortArgs: { mask: { ...m, type: 'bool' }, attrs: { is_causal: 1 } }, maOpt: { allowed: m, causal: true }, weights: true, label: 'causal & allowed',
  });
  const f = randomTensor([12, 12], 802, 2);
  await compareAll(t, { q, k, v, ortArgs: { mask: { ...f, type: 'float32' }, attrs: { is_causal: 1 } }, maOpt: { bias: f, causal: true }, label: 'causal + bias' });
});

test('GQA / MQA (kv_num_heads < q_num_heads): same head mapping h -> h / (Hq / Hkv)', async (t) => {
  for (const [Hq, Hkv] of [[4, 2], [6, 1], [8, 2], [6, 3]]) {
    const { q, k, v } = qkv([2, Hq, Hkv, 7, 10, 16, 8], 900 + Hq * 10 + Hkv);
    const attrs = { q_num_heads: Hq, kv_num_heads: Hkv };
    await compareAll(t, { q, k, v, ortArgs: { attrs }, maOpt: {}, label: `gqa ${Hq}/${Hkv}` });
    const m = randomBool([1, Hq, 7, 10], 950 + Hq);
    await compareAll(t, {
      q, k, v, ortArgs: { attrs: { ...attrs, is_causal: 1 }, mask: { ...m, type: 'bool' } }, maOpt: { causal: true, align: 'top-left', allowed: m },
      weights: true, label: `gqa ${Hq}/${Hkv} causal & allowed`,
    });
  }
});

test('3-D inputs [B, L, H*D] equal maskattn layout blhd', async (t) => {
  const [B, Hq, Hkv, Lq, Lk, D, Dv] = [2, 4, 2, 6, 9, 8, 4];
  const r = rng(1000);
  const mk = (L, H, Dx) => Float32Array.from({ length: B * L * H * Dx }, r);
  const q = { data: mk(Lq, Hq, D), shape: [B, Lq, Hq, D] };
  const k = { data: mk(Lk, Hkv, D), shape: [B, Lk, Hkv, D] };
  const v = { data: mk(Lk, Hkv, Dv), shape: [B, Lk, Hkv, Dv] };
  const m = randomBool([B, 1, Lq, Lk], 1001, 0.7);
  const flat3 = (x) => ({ data: x.data, shape: [x.shape[0], x.shape[1], x.shape[2] * x.shape[3]] });
  const onnx = await ortAttention({
    q: flat3(q), k: flat3(k), v: flat3(v), mask: { ...m, type: 'bool' }, attrs: { q_num_heads: Hq, kv_num_heads: Hkv, is_causal: 1 },
  });
  assert.deepEqual(Array.from(onnx.dims), [B, Lq, Hq * Dv]);
  const ref = reference(blhdToBhld(q, B, Lq, Hq, D), blhdToBhld(k, B, Lk, Hkv, D), blhdToBhld(v, B, Lk, Hkv, Dv), { allowed: m, causal: true, align: 'top-left' });
  const refBlhd = blhdToBhld({ data: Float32Array.from(ref.O), shape: null }, B, Hq, Lq, Dv);  // [B,H,L,Dv] -> [B,L,H,Dv]
  for (const [name, ma] of builds) {
    const out = ma.attention(q, k, v, { layout: 'blhd', allowed: m, causal: true, align: 'top-left' }).output;
    assert.deepEqual(out.shape, [B, Lq, Hq, Dv]);
    assertClose(out.data, onnx.Y, TOL_ORT, `3-D ${name} vs onnxruntime-web`);
    assertClose(out.data, refBlhd.data, TOL_REF, `3-D ${name} vs float64 reference`);
  }
});

test('softcap (applied before the mask, so -inf stays -inf)', async (t) => {
  // Large logits so the cap matters.
  const { q, k, v } = qkv([2, 2, 2, 8, 11, 8, 8], 1100, 3);
  for (const softcap of [0.5, 2, 30]) {
    await compareAll(t, { q, k, v, ortArgs: { attrs: { softcap } }, maOpt: { softcap }, label: `softcap ${softcap}` });
    const m = randomTensor([8, 11], 1110, 3);
    m.data.forEach((x, i) => { if (x > 1) m.data[i] = -Infinity; });
    for (let j = 0; j < 11; ++j) m.data[3 * 11 + j] = -Infinity;  // row 3 fully masked
    await compareAll(t, {
      q, k, v, ortArgs: { attrs: { softcap, is_causal: 1 }, mask: { ...m, type: 'float32' } }, maOpt: { softcap, bias: m, causal: true, align: 'top-left' },
      weights: true, label: `softcap ${softcap} + bias + causal`,
    });
  }
});

test('fully masked rows: ORT gives 0 (Y and weights) = maskattn default policy zero', async (t) => {
  const [B, H, Lq, Lk] = [2, 2, 5, 6];
  const { q, k, v } = qkv([B, H, H, Lq, Lk, 8, 8], 1200);
  const m = randomBool([B, H, Lq, Lk], 1201, 0.5);
  for (const [b, h, i] of [[0, 0, 0], [0, 1, 3], [1, 0, 4], [1, 1, 1]]) for (let j = 0; j < Lk; ++j) m.data[((b * H + h) * Lq + i) * Lk + j] = 0;
  const onnx = await compareAll(t, { q, k, v, ortArgs: { mask: { ...m, type: 'bool' } }, maOpt: { allowed: m }, weights: true, label: 'bool all-false rows' });
  for (let c = 0; c < 8; ++c) assert.equal(onnx.Y[c], 0, 'ORT: fully masked row is 0');
  const f = { data: Float32Array.from(m.data, (x) => (x ? 0 : -Infinity)), shape: m.shape };
  await compareAll(t, { q, k, v, ortArgs: { mask: { ...f, type: 'float32' } }, maOpt: { bias: f }, weights: true, label: '-inf rows' });
  // Policies without an ORT counterpart: checked against the float64 reference.
  for (const fullyMasked of ['nan', 'uniform']) {
    const ref = reference(q, k, v, { allowed: m, fullyMasked });
    for (const [name, ma] of builds) {
      const r = ma.attention(q, k, v, { allowed: m, fullyMasked, returnWeights: true });
      assertClose(r.output.data, ref.O, TOL_REF, `policy ${fullyMasked} ${name}`);
      assertClose(r.weights.data, ref.W, TOL_REF, `policy ${fullyMasked} ${name} weights`);
    }
  }
  // 'uniform' reproduces ORT with a finite -1e9 fill instead of a mask.
  const fill = { data: Float32Array.from(m.data, (x) => (x ? 0 : -1e9)), shape: m.shape, type: 'float32' };
  const onnxFill = await ortAttention({ q, k, v, mask: fill });
  for (const [name, ma] of builds)
    assertClose(ma.attention(q, k, v, { allowed: m, fullyMasked: 'uniform' }).output.data, onnxFill.Y, TOL_ORT, `uniform ${name} vs ORT -1e9 fill`);
});

test('very negative finite biases are values, not masks (-FLT_MAX differs: ORT treats it as its mask sentinel)', async (t) => {
  const [Lq, Lk] = [3, 5];
  const { q, k, v } = qkv([1, 1, 1, Lq, Lk, 8, 8], 1300);
  for (const fill of [-1e4, -1e9, -3.4e38]) {
    // Row 0 entirely `fill`, row 1 half `fill`, row 2 unbiased.
    const m = { data: new Float32Array(Lq * Lk), shape: [Lq, Lk] };
    for (let j = 0; j < Lk; ++j) m.data[j] = fill;
    for (let j = 0; j < Lk; j += 2) m.data[Lk + j] = fill;
    await compareAll(t, { q, k, v, ortArgs: { mask: { ...m, type: 'float32' } }, maOpt: { bias: m }, weights: true, label: `fill ${fill}` });
  }
  // Difference 3: a row entirely -FLT_MAX. ORT's softmax sees its own sentinel as the row maximum
  // and returns 0; maskattn (a finite bias is not a mask) returns the uniform average over the keys.
  const m = { data: new Float32Array(Lq * Lk), shape: [Lq, Lk] };
  for (let j = 0; j < Lk; ++j) m.data[j] = -FLT_MAX;
  const onnx = await ortAttention({ q, k, v, mask: { ...m, type: 'float32' } });
  const ref = reference(q, k, v, { bias: m });
  for (let c = 0; c < 8; ++c) assert.equal(onnx.Y[c], 0, 'ORT: row of -FLT_MAX gives 0');
  for (const [name, ma] of builds) {
    const ours = ma.attention(q, k, v, { bias: m }).output.data;
    assertClose(ours, ref.O, TOL_REF, `-FLT_MAX ${name} vs float64 reference (uniform average)`);
    assertClose(ours.subarray(8), onnx.Y.subarray(8), TOL_ORT, `-FLT_MAX ${name}: other rows vs onnxruntime-web`);
  }
});

test('+inf and NaN biases give a NaN row in both', async (t) => {
  const { q, k, v } = qkv([1, 1, 1, 3, 4, 4, 4], 1400);
  const m = { data: new Float32Array(12), shape: [3, 4] };
  m.data[1] = Infinity;
  m.data[4 + 2] = NaN;
  const onnx = await compareAll(t, { q, k, v, ortArgs: { mask: { ...m, type: 'float32' } }, maOpt: { bias: m }, label: 'inf/nan bias' });
  assert.ok(Number.isNaN(onnx.Y[0]) && Number.isNaN(onnx.Y[4]) && !Number.isNaN(onnx.Y[8]));
});

test('NaN in masked-out K/V: maskattn never reads it; ORT propagates it (difference)', async (t) => {
  const [Lq, Lk, D] = [3, 6, 4];
  const { q, k, v } = qkv([1, 1, 1, Lq, Lk, D, D], 1500);
  for (let c = 0; c < D; ++c) {
    k.data[(Lk - 1) * D + c] = NaN;  // key 5 is masked for every row
    v.data[(Lk - 2) * D + c] = NaN;  // key 4 too
  }
  const allowed = { data: Uint8Array.from({ length: Lq * Lk }, (_, i) => (i % Lk < Lk - 2 ? 1 : 0)), shape: [Lq, Lk] };
  // Difference 2: ORT adds the mask to Q·Kᵀ (NaN + -FLT_MAX = NaN) and multiplies V by zero weights
  // (0 * NaN = NaN), so the row is NaN; maskattn skips masked keys.
  const onnx = await ortAttention({ q, k, v, mask: { ...allowed, type: 'bool' } });
  assert.ok(onnx.Y.every(Number.isNaN), 'ORT: NaN in masked K/V leaks into every row');
  const bias = { data: Float32Array.from(allowed.data, (x) => (x ? 0 : -Infinity)), shape: allowed.shape };
  const clean = { q, k: { ...k, data: k.data.map((x) => (Number.isNaN(x) ? 0 : x)) }, v: { ...v, data: v.data.map((x) => (Number.isNaN(x) ? 0 : x)) } };
  const ref = reference(clean.q, clean.k, clean.v, { allowed });
  for (const [name, ma] of builds)
    for (const opt of [{ allowed }, { bias }, { keyLengths: [Lk - 2] }]) {
      const ours = ma.attention(q, k, v, opt).output.data;
      assertClose(ours, ref.O, TOL_REF, `${name} ${Object.keys(opt)[0]}: NaN in masked K/V must not leak`);
    }
});

test('nonpad_kv_seqlen (opset 24) equals maskattn keyLengths, length 0 included', async (t) => {
  const [B, Hq, Hkv, Lq, Lk] = [4, 4, 2, 5, 9];
  const { q, k, v } = qkv([B, Hq, Hkv, Lq, Lk, 8, 8], 1600);
  const lengths = [9, 3, 0, 1];
  const onnx = await ortOrSkip(t, { q, k, v, nonpad: lengths });
  if (!onnx) return;
  const ref = reference(q, k, v, { keyLengths: lengths });
  for (const [name, ma] of builds) {
    const ours = ma.attention(q, k, v, { keyLengths: lengths }).output.data;
    assertClose(ours, onnx.Y, TOL_ORT, `${name} keyLengths vs ORT nonpad_kv_seqlen`);
    assertClose(ours, ref.O, TOL_REF, `${name} keyLengths vs float64 reference`);
  }
});

// Difference 5: cases onnxruntime-web rejects. maskattn is checked against the float64 reference; the
// ORT half is attempted and, when ORT refuses, skipped with ORT's own reason.
const rejected = [
  ['Lk = 0', [1, 2, 2, 3, 0, 4, 4], {}],
  ['Lq = 0', [1, 2, 2, 0, 5, 4, 4], {}],
  ['B = 0', [0, 2, 2, 3, 5, 4, 4], {}],
  ['D = 0 (uniform weights)', [1, 2, 2, 3, 5, 0, 4], {}],
  ['scale = 0', [1, 2, 2, 3, 5, 4, 4], { scale: 0 }],
  ['negative scale', [1, 2, 2, 3, 5, 4, 4], { scale: -0.5 }],
  ['mask broadcast over queries [B, 1, 1, Lk] (padding mask)', [2, 2, 2, 3, 5, 4, 4], { allowedShape: [2, 1, 1, 5] }],
  ['1-D mask [Lk]', [1, 2, 2, 3, 5, 4, 4], { allowedShape: [5] }],
];
for (const [label, shape, spec] of rejected) {
  test(`ORT rejects, maskattn runs: ${label}`, async (t) => {
    const { q, k, v } = qkv(shape, 1700 + label.length);
    const opt = {};
    const ortArgs = {};
    if (spec.scale !== undefined) {
      opt.scale = spec.scale;
      ortArgs.attrs = { scale: spec.scale };
    }
    if (spec.allowedShape) {
      opt.allowed = randomBool(spec.allowedShape, 1750, 0.6);
      ortArgs.mask = { ...opt.allowed, type: 'bool' };
    }
    await t.test('maskattn vs float64 reference', () => {
      const ref = reference(q, k, v, opt);
      for (const [name, ma] of builds) assertClose(ma.attention(q, k, v, opt).output.data, ref.O, TOL_REF, `${label} ${name}`);
    });
    await t.test('onnxruntime-web', async (t) => {
      const onnx = await ortOrSkip(t, { q, k, v, ...ortArgs });
      if (!onnx) return;
      // ORT ran it after all: then it must agree.
      assertClose(builds[0][1].attention(q, k, v, opt).output.data, onnx.Y, TOL_ORT, `${label} vs onnxruntime-web`);
    });
  });
}
