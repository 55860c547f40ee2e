// A plain JavaScript reference of masked attention, written from the contract (docs/semantics.md)
// alone (not from the C++ code), so that the tests compare the library with an
// independent reading of the contract.
//
//   referenceAttention(q, k, v, options)            float64 (the reference)
//   referenceAttention(q, k, v, options, 'f32')     a naive fp32 implementation (every operation
//                                                   rounded to float32): the yardstick of the
//                                                   contract's "at most 2x the error of a naive
//                                                   fp32 implementation" bound
//
// Tensors are { data, shape } or { data, dims } (onnxruntime-web style); `options` are the options
// of the JS API (scale, layout, causal, align, keyLengths, queryLengths, allowed, bias, window,
// prefix, segments, alibiSlopes, softcap, fullyMasked; the return* flags are ignored: everything
// is returned). Every rule is evaluated pair by pair, the obvious way, with no intervals or tiles.
//
// Returns { output, weights, lse } as { data: Float64Array, shape } plus `fullyMasked`, a
// Uint8Array [B, Hq, Lq] with 1 where no key may be attended. The output is in the call's layout
// ([B, Hq, Lq, Dv] or [B, Lq, Hq, Dv]); weights are [B, Hq, Lq, Lk] and lse [B, Hq, Lq].

function dimsOf(t) {
  return Array.from(t.shape ?? t.dims, Number);
}

// Element accessor for a 4-D tensor in `layout`, addressed by logical (b, h, l, d).
function accessor(t, layout) {
  const dims = dimsOf(t);
  const data = t.data;
  if (layout === 'blhd') {
    const [, L, H, D] = dims;
    return { B: dims[0], H, L, D, at: (b, h, l, d) => data[((b * L + l) * H + h) * D + d] };
  }
  const [, H, L, D] = dims;
  return { B: dims[0], H, L, D, at: (b, h, l, d) => data[((b * H + h) * L + l) * D + d] };
}

// A mask (allowed or bias) broadcast to [B, Hq, Lq, Lk]: its shape is right-aligned (NumPy
// style) and every size-1 dimension repeats.
function broadcastReader(m) {
  if (m == null) return null;
  const given = dimsOf(m);
  const shape = [...Array(4 - given.length).fill(1), ...given];
  const strides = [0, 0, 0, 0];
  let s = 1;
  for (let d = 3; d >= 0; --d) {
    strides[d] = shape[d] === 1 ? 0 : s;
    s *= shape[d];
  }
  const data = m.data;
  return (b, h, i, j) => data[b * strides[0] + h * strides[1] + i * strides[2] + j * strides[3]];
}

function flatIds(x) {
  if (x == null) return null;
  if (Array.isArray(x) && Array.isArray(x[0])) return x.flat();
  return Array.from(x);
}

// RoPE from its definition: pair i = (x, y) of row l (at position first + l + offset) becomes
// (x cos a - y sin a, x sin a + y cos a), a = position · theta^(-2i/dims); pairs (i, i + dims/2)
// ('halves') or (2i, 2i + 1) ('interleaved'); dims 0 = all of D. Returns an accessor of the copy.
/**
 * RoPE's frequency of each pair (n rotated dims) and the rotated pairs' scale, for a sequence of
 * `length` positions (offset included), from the published definitions of each rope_scaling type
 * (Hugging Face's: linear, dynamic NTK, Llama 3.1, YaRN, LongRoPE, per-pair factors), in float64.
 */
export function ropeFrequencies({ theta = 10000, scaling = null }, n, length) {
  const s = scaling ?? { type: 'none' };
  const orig = s.originalMaxPositions;
  let base = theta;
  if (s.type === 'dynamic') base *= (s.factor * Math.max(length, orig) / orig - (s.factor - 1)) ** (n / (n - 2));
  const inv = Array.from({ length: n / 2 }, (_, i) => base ** (-2 * i / n));
  const mscale = (f, m) => (f <= 1 ? 1 : 0.1 * m * Math.log(f) + 1);
  let attention = 1;
  if (s.type === 'linear') return { inv: inv.map((x) => x / s.factor), attention };
  if (s.type === 'llama3') {
    return {
      inv: inv.map((x) => {
        const wavelen = 2 * Math.PI / x;
        if (wavelen < orig / s.highFreqFactor) return x;
        if (wavelen > orig / s.lowFreqFactor) return x / s.factor;
        const smooth = (orig / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
        return (1 - smooth) * x / s.factor + smooth * x;
      }),
      attention,
    };
  }
  if (s.type === 'yarn') {
    const at = (rotations) => (n * Math.log(orig / (rotations * 2 * Math.PI))) / (2 * Math.log(base));
    const low = Math.max(Math.floor(at(s.betaFast ?? 32)), 0);
    let high = Math.min(Math.ceil(at(s.betaSlow ?? 1)), n - 1);
    if (low === high) high += 0.001;
    if (s.attentionFactor !== undefined) attention = s.attentionFactor;
    else if (s.mscale && s.mscaleAllDim) attention = mscale(s.factor, s.mscale) / mscale(s.factor, s.mscaleAllDim);
    else attention = mscale(s.factor, 1);
    return {
      inv: inv.map((x, i) => {
        const ramp = Math.min(Math.max((i - low) / (high - low), 0), 1);
        return (x / s.factor) * ramp + x * (1 - ramp);
      }),
      attention,
    };
  }
  if (s.type === 'longrope') {
    const factor = s.factor || 1;
    attention = s.attentionFactor ?? (factor <= 1 ? 1 : Math.sqrt(1 + Math.log(factor) / Math.log(orig)));
    const ext = length > orig ? s.longFactor : s.shortFactor;
    return { inv: inv.map((x, i) => x / ext[i]), attention };
  }
  if (s.type === 'factors') return { inv: inv.map((x, i) => x / s.freqFactors[i]), attention: s.attentionFactor ?? 1 };
  return { inv, attention };
}

export function rotated(T, { theta = 10000, dims = 0, layout = 'halves', offset = 0, scaling = null }, first, F = (x) => x) {
  const n = dims || T.D;
  const { inv, attention } = ropeFrequencies({ theta, scaling }, n, first + T.L + offset);
  const data = new Float64Array(T.B * T.H * T.L * T.D);
  const idx = (b, h, l, d) => ((b * T.H + h) * T.L + l) * T.D + d;
  for (let b = 0; b < T.B; ++b)
    for (let h = 0; h < T.H; ++h)
      for (let l = 0; l < T.L; ++l) {
        for (let d = 0; d < T.D; ++d) data[idx(b, h, l, d)] = T.at(b, h, l, d);
        for (let i = 0; i < n / 2; ++i) {
          const a = (first + l + offset) * inv[i];
          const xi = layout === 'interleaved' ? 2 * i : i;
          const yi = layout === 'interleaved' ? 2 * i + 1 : i + n / 2;
          const x = T.at(b, h, l, xi), y = T.at(b, h, l, yi);
          data[idx(b, h, l, xi)] = F((x * Math.cos(a) - y * Math.sin(a)) * attention);
          data[idx(b, h, l, yi)] = F((x * Math.sin(a) + y * Math.cos(a)) * attention);
        }
      }
  return { B: T.B, H: T.H, L: T.L, D: T.D, at: (b, h, l, d) => data[idx(b, h, l, d)] };
}

/**
 * The reference. `precision` 'f64' (default) computes in float64; 'f32' rounds every operation to
 * float32 (a naive fp32 implementation: dot, scale, softcap, ALiBi, bias, max, exp, sum, divide,
 * weighted sum, in that order).
 */
export function referenceAttention(q, k, v, options = {}, precision = 'f64') {
  const F = precision === 'f32' ? Math.fround : (x) => x;
  const layout = options.layout ?? 'bhld';
  let Q = accessor(q, layout);
  let K = accessor(k, layout);
  if (options.rope) {
    // RoPE (docs/semantics.md): key j at position j + offset, query i at (Lk - Lq + i) + offset; in
    // 'f32' each rotated value is rounded to float32 once (what an implementation gets to work with).
    Q = rotated(Q, options.rope, K.L - Q.L, F);
    K = rotated(K, options.rope, 0, F);
  }
  const V = accessor(v, layout);
  const B = Q.B, Hq = Q.H, Lq = Q.L, D = Q.D, Hkv = K.H, Lk = K.L, Dv = V.D;
  if (Hkv > 0 && Hq % Hkv !== 0) throw new Error('reference: Hq must be a multiple of Hkv');
  const group = Hkv > 0 ? Hq / Hkv : 1;

  // Contract: scale defaults to 1/sqrt(D); semantics.md: 1 when D = 0.
  const scale = F(options.scale ?? (D > 0 ? 1 / Math.sqrt(D) : 1));
  const topLeft = (options.align ?? 'bottom-right') === 'top-left';
  const causal = options.causal === true;
  const [left, right] = options.window ?? [-1, -1];
  const prefix = options.prefix ?? 0;
  const keyLengths = options.keyLengths ? Array.from(options.keyLengths) : null;
  const queryLengths = options.queryLengths ? Array.from(options.queryLengths) : null;
  const segQ = flatIds(options.segments?.query);
  const segK = flatIds(options.segments?.key);
  const slopes = options.alibiSlopes ? Array.from(options.alibiSlopes, Math.fround) : null;
  const softcap = options.softcap ?? 0;
  const policy = options.fullyMasked ?? 'zero';
  const allowedAt = broadcastReader(options.allowed);
  const biasAt = broadcastReader(options.bias);
  const sinks = options.sinks ? Array.from(options.sinks, Math.fround) : null;
  const tree = options.tree ? Array.from(options.tree) : null;
  // Tree verification: is tree node t an ancestor of node i (or i itself), walking i's parents.
  const treeSees = (b, i, t) => {
    const parent = tree.length === Lq ? tree : tree.slice(b * Lq, (b + 1) * Lq);
    for (let n = i; n >= 0; n = parent[n]) if (n === t) return true;
    return false;
  };

  const outShape = layout === 'blhd' ? [B, Lq, Hq, Dv] : [B, Hq, Lq, Dv];
  const out = new Float64Array(B * Hq * Lq * Dv);
  const weights = new Float64Array(B * Hq * Lq * Lk);
  const lse = new Float64Array(B * Hq * Lq);
  const fullyMasked = new Uint8Array(B * Hq * Lq);
  const outIndex = layout === 'blhd'
    ? (b, h, i, e) => ((b * Lq + i) * Hq + h) * Dv + e
    : (b, h, i, e) => ((b * Hq + h) * Lq + i) * Dv + e;

  for (let b = 0; b < B; ++b) {
    const kLen = keyLengths ? keyLengths[b] : Lk;
    const qLen = queryLengths ? queryLengths[b] : Lq;
    for (let h = 0; h < Hq; ++h) {
      const kh = Math.floor(h / group);  // repeat-interleave: query head h reads kv head h / (Hq / Hkv)
      for (let i = 0; i < Lq; ++i) {
        const row = (b * Hq + h) * Lq + i;
        // The diagonal: bottom-right uses the valid lengths, top-left is the row index.
        const diag = topLeft ? i : i + (kLen - qLen);

        // 1. Which keys may be attended (decided from the masks only, never from scores).
        const attend = [];
        for (let j = 0; j < Lk; ++j) {
          if (j >= kLen) continue;                       // key padding
          if (i >= qLen) continue;                       // query padding row: attends nothing
          let positional = true;
          if (causal && !(j <= diag)) positional = false;
          if (left !== -1 && j < diag - left) positional = false;
          if (right !== -1 && j > diag + right) positional = false;
          if (j < prefix) positional = true;             // prefix-LM: bidirectional prefix
          if (!positional) continue;
          if (segQ && segQ[b * Lq + i] !== segK[b * Lk + j]) continue;
          if (allowedAt && !allowedAt(b, h, i, j)) continue;
          if (biasAt && biasAt(b, h, i, j) === -Infinity) continue;  // -inf bias masks the pair
          if (tree && j >= kLen - Lq && !treeSees(b, i, j - (kLen - Lq))) continue;  // only ancestors
          attend.push(j);
        }

        // A learned sink: one more term e^sink in the denominator, for a key whose value is 0.
        const sink = sinks ? sinks[h] : -Infinity;
        if (attend.length === 0 && sink !== -Infinity) {
          // Only the sink is left: it takes all the weight, O = 0, under every policy.
          fullyMasked[row] = 1;
          lse[row] = sink;
          continue;
        }
        if (attend.length === 0) {
          // 2a. Fully masked row: the per-call policy.
          fullyMasked[row] = 1;
          lse[row] = -Infinity;
          for (let j = 0; j < Lk; ++j)
            weights[row * Lk + j] = policy === 'zero' ? 0 : policy === 'nan' ? NaN : 1 / Lk;
          for (let e = 0; e < Dv; ++e) {
            let o = 0;
            if (policy === 'nan') o = NaN;
            else if (policy === 'uniform' && Lk > 0) {
              for (let j = 0; j < Lk; ++j) o = F(o + V.at(b, kh, j, e));
              o = F(o / Lk);
            }
            out[outIndex(b, h, i, e)] = o;
          }
          continue;
        }

        // 2b. Logits of the attended keys: q.k * scale -> softcap -> + ALiBi -> + bias.
        const logits = attend.map((j) => {
          let dot = 0;
          for (let d = 0; d < D; ++d) dot = F(dot + F(Q.at(b, h, i, d) * K.at(b, kh, j, d)));
          let s = F(dot * scale);
          if (softcap > 0) s = F(softcap * F(Math.tanh(F(s / softcap))));
          if (slopes) s = F(s - F(slopes[h] * Math.abs(diag - j)));
          if (biasAt) s = F(s + biasAt(b, h, i, j));
          return s;
        });

        // 3. Softmax over the attended keys with max-subtraction. NaN propagates (a NaN logit
        // makes the max NaN); a +inf logit gives inf - inf = NaN, as plain softmax does.
        let max = -Infinity;
        for (const s of logits) max = Number.isNaN(s) || Number.isNaN(max) ? NaN : Math.max(max, s);
        if (sink !== -Infinity && !Number.isNaN(max)) max = Math.max(max, sink);
        const exps = logits.map((s) => F(Math.exp(F(s - max))));
        let sum = sink === -Infinity ? 0 : F(Math.exp(F(sink - max)));
        for (const e of exps) sum = F(sum + e);
        lse[row] = F(max + F(Math.log(sum)));
        const w = exps.map((e) => F(e / sum));
        attend.forEach((j, n) => { weights[row * Lk + j] = w[n]; });
        for (let e = 0; e < Dv; ++e) {
          let o = 0;
          attend.forEach((j, n) => { o = F(o + F(w[n] * V.at(b, kh, j, e))); });
          out[outIndex(b, h, i, e)] = o;
        }
      }
    }
  }
  return {
    output: { data: out, shape: outShape },
    weights: { data: weights, shape: [B, Hq, Lq, Lk] },
    lse: { data: lse, shape: [B, Hq, Lq] },
    fullyMasked,
  };
}

// ------------------------------------------------------------------------------------------
// Test support shared by the test files: reproducible random inputs and a comparison.

// The seeded generator is the one the demo and the examples use, so every failure can be replayed
// from its seed.
export { rng } from '../../web/random.js';

/** A Float32Array of n uniform values in [lo, hi). */
export function uniform(random, n, lo = -1, hi = 1) {
  const a = new Float32Array(n);
  for (let i = 0; i < n; ++i) a[i] = lo + (hi - lo) * random();
  return a;
}

/**
 * Compares `actual` with `expected` (the float64 reference) element by element, with the tolerance
 * policy of docs/semantics.md "Numbers", the same as the C++ suite's compare_to_reference
 * (tests/test_support.hpp; both run the shared cases of tests/tolerance_cases.inc):
 *   e32   = the largest |naive - expected| over the tensor (finite pairs), 0 without `naive`;
 *   bound = min(max(2 * e32, floor, relFloor * |expected[n]|), cap)   (no cap when cap is 0).
 * NaN must meet NaN and an infinity the same infinity; a finite expectation needs a finite value.
 * Options: floor (default 2e-6), cap (default 1e-5: the contract's absolute bound on O for
 * unit-scale inputs), relFloor (default 0; 1e-6 for lse of large logits), naive (the 'f32'
 * reference). `atol: x` is the shorthand the suites use for { floor: x, cap: 0 }.
 * Returns null when everything matches, else a description of the worst element.
 */
export function mismatch(actual, expected, { atol, floor, cap, relFloor = 0, naive = null } = {}) {
  if (atol !== undefined) {
    floor ??= atol;
    cap ??= 0;
  }
  floor ??= 2e-6;
  cap ??= 1e-5;
  if (actual.length !== expected.length) return `length ${actual.length}, expected ${expected.length}`;
  let e32 = 0;
  if (naive)
    for (let n = 0; n < expected.length; ++n)
      if (Number.isFinite(naive[n]) && Number.isFinite(expected[n])) e32 = Math.max(e32, Math.abs(naive[n] - expected[n]));
  let worst = null;
  let worstExcess = 0;
  for (let n = 0; n < expected.length; ++n) {
    const a = actual[n];
    const e = expected[n];
    if (Number.isNaN(e) || Number.isNaN(a)) {
      if (Number.isNaN(e) !== Number.isNaN(a)) return `element ${n}: ${a}, expected ${e}`;
      continue;
    }
    if (!Number.isFinite(e) || !Number.isFinite(a)) {
      if (a !== e) return `element ${n}: ${a}, expected ${e}`;
      continue;
    }
    let tol = Math.max(2 * e32, floor, relFloor * Math.abs(e));
    if (cap > 0) tol = Math.min(tol, cap);
    const err = Math.abs(a - e);
    if (err > tol && err - tol > worstExcess) {
      worstExcess = err - tol;
      worst = `element ${n}: ${a}, expected ${e} (error ${err.toExponential(2)} > tolerance ${tol.toExponential(2)})`;
    }
  }
  return worst;
}

// ------------------------------------------------------------------------------------------
// IEEE 754 binary16, written from the standard with plain arithmetic (no bit tricks shared with the
// C++ side): 1 sign bit, 5 exponent bits (bias 15), 10 fraction bits; subnormals are f * 2^-24.

/** The float16 value nearest to x (round to nearest, ties to even), as a number; NaN stays NaN. */
export function roundToHalf(x) {
  if (Number.isNaN(x) || x === 0 || !Number.isFinite(x)) return x;
  const a = Math.abs(x);
  // e with 2^e <= a < 2^(e+1) (corrected: Math.log2 may be off by one next to powers of two).
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e -= 1;
  else if (2 ** (e + 1) <= a) e += 1;
  // Spacing of halves around a: 2^(e-10) for normals, 2^-24 below 2^-14 (subnormals).
  const quantum = 2 ** (Math.max(e, -14) - 10);
  const r = a / quantum;  // exact (a power-of-two scaling of a float32)
  const floor = Math.floor(r);
  const frac = r - floor;
  const n = frac > 0.5 || (frac === 0.5 && floor % 2 === 1) ? floor + 1 : floor;
  // 65504 is the largest half; anything that rounds above it (a >= 65520) overflows to infinity.
  const h = n * quantum > 65504 ? Infinity : n * quantum;
  return x < 0 ? -h : h;
}

/** The value of half bits h (0..65535). */
export function halfToNumber(h) {
  const sign = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 31;
  const f = h & 1023;
  if (e === 0) return sign * f * 2 ** -24;
  if (e === 31) return f === 0 ? sign * Infinity : NaN;
  return sign * (1024 + f) * 2 ** (e - 25);
}

/** The bits of the half nearest to x (NaN -> 0x7e00). */
export function halfBits(x) {
  const h = roundToHalf(x);
  if (Number.isNaN(h)) return 0x7e00;
  const sign = h < 0 || Object.is(h, -0) ? 0x8000 : 0;
  const a = Math.abs(h);
  if (a === Infinity) return sign | 0x7c00;
  if (a < 2 ** -14) return sign | (a * 2 ** 24);
  let e = -14;
  while (2 ** (e + 1) <= a) e += 1;
  return sign | ((e + 15) << 10) | (a / 2 ** (e - 10) - 1024);
}

// ------------------------------------------------------------------------------------------
// bfloat16, written from its definition with plain arithmetic: float32's 1 sign bit and 8 exponent
// bits (bias 127), 7 fraction bits; subnormals are f * 2^-133.

const BF16_MAX = (2 - 2 ** -7) * 2 ** 127;

/** The bfloat16 value nearest to x (round to nearest, ties to even), as a number; NaN stays NaN. */
export function roundToBf16(x) {
  if (Number.isNaN(x) || x === 0 || !Number.isFinite(x)) return x;
  const a = Math.abs(x);
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e -= 1;
  else if (2 ** (e + 1) <= a) e += 1;
  const quantum = 2 ** (Math.max(e, -126) - 7);
  const r = a / quantum;
  const floor = Math.floor(r);
  const frac = r - floor;
  const n = frac > 0.5 || (frac === 0.5 && floor % 2 === 1) ? floor + 1 : floor;
  const h = n * quantum > BF16_MAX ? Infinity : n * quantum;
  return x < 0 ? -h : h;
}

/** The value of bfloat16 bits b (0..65535). */
export function bf16ToNumber(b) {
  const sign = b & 0x8000 ? -1 : 1;
  const e = (b >> 7) & 255;
  const f = b & 127;
  if (e === 0) return sign * f * 2 ** -133;
  if (e === 255) return f === 0 ? sign * Infinity : NaN;
  return sign * (128 + f) * 2 ** (e - 134);
}

/** The bits of the bfloat16 nearest to x (NaN -> 0x7fc0). */
export function bf16Bits(x) {
  const h = roundToBf16(x);
  if (Number.isNaN(h)) return 0x7fc0;
  const sign = h < 0 || Object.is(h, -0) ? 0x8000 : 0;
  const a = Math.abs(h);
  if (a === Infinity) return sign | 0x7f80;
  if (a < 2 ** -126) return sign | (a * 2 ** 133);
  let e = -126;
  while (2 ** (e + 1) <= a) e += 1;
  return sign | ((e + 127) << 7) | (a / 2 ** (e - 7) - 128);
}
