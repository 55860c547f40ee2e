#!/usr/bin/env node
// Token-by-token generation with maskattn's KV cache: a small decoder-only transformer with random
// (seeded) weights, in plain JavaScript except for attention, which goes through one
// `ma.createKVCache` per layer. Tokens are bytes (vocabulary 256); the weights are random, so the
// "text" it writes is noise: the point is the loop, not the words.
//
//   node examples/generate.mjs [--tokens N] [--dtype float32|float16|bfloat16|q8|q4] [--window W] [--prompt TEXT]
//                              [--seed S] [--rope fused|js] [--check] [--scalar] [--samples N [--temperature T]]
//
// Per layer and step: RMSNorm -> Q, K, V projections -> cache.append(K, V) -> cache.attend(Q) (GQA:
// 8 query heads share 2 KV heads, D = 64; causal, bottom-right) -> output projection -> residual ->
// RMSNorm -> SwiGLU MLP -> residual. Rotary positions (RoPE) are the cache's own
// (createKVCache({ rope })): it rotates each key by its absolute position as it is appended and
// each query as it attends, so the model passes Q and K unrotated. --rope js rotates Q and K in
// JavaScript instead and uses caches without rope (what a model had to do before; the same
// tokens). The prompt goes in with one append and one attend (Lq = prompt length); then one token
// per step, greedy.
//
// --window W makes every cache a sliding-window ring (memory O(W), not O(sequence)): attention sees
// the newest W positions. --check runs the same generation again with Q and K rotated in
// JavaScript and plain `ma.attention` over the full K/V (kept in JavaScript, float16-rounded for
// --dtype float16) and compares the tokens.
//
// --samples N draws N samples (temperature sampling, one random stream per sample) of the same
// prompt at once: the prompt goes into sequence 0 of a paged cache (pageSize 16), cache.fork() gives
// it to sequences 1..N-1 without copying, and every step runs the N sequences as one batch. It
// prints the cache's bytes against N unshared copies of the same positions.
//
// `import ... from 'maskattn'` is how users import the package; inside this repository it works too,
// because package.json has "name": "maskattn" and "exports" (Node resolves a package's own name).
// The seeded generator is the checkout's one copy (web/random.js, shared with the demo and the tests),
// so this example runs from a checkout of maskattn, as the docs run it.
import { init } from 'maskattn';
import { fileURLToPath } from 'node:url';
import { rng } from '../web/random.js';

export const MODEL = Object.freeze({
  layers: 2,
  vocab: 256,     // bytes
  heads: 8,       // query heads
  kvHeads: 2,     // key/value heads (GQA: 4 query heads per KV head)
  headDim: 64,
  dModel: 512,    // heads x headDim
  ffn: 1024,      // MLP hidden size (SwiGLU)
  ropeBase: 10000,
  eps: 1e-5,
});

// ------------------------------------------------------------------------------------------ weights

/** A [rows, cols] matrix (row-major: row r is output r) of uniform values with variance gain^2 / cols. */
function matrix(next, rows, cols, gain = 1) {
  const a = Math.sqrt(3 / cols) * gain;
  const m = new Float32Array(rows * cols);
  for (let n = 0; n < m.length; n++) m[n] = (next() * 2 - 1) * a;
  return { data: m, rows, cols };
}

/** Random weights of MODEL, the same for the same seed. */
export function buildWeights(seed = 1) {
  const { layers, vocab, dModel, heads, kvHeads, headDim, ffn } = MODEL;
  const next = rng(seed);
  const embedding = matrix(next, vocab, dModel, Math.sqrt(dModel / 3));  // entries of variance ~1
  const layer = () => ({
    wq: matrix(next, heads * headDim, dModel),
    wk: matrix(next, kvHeads * headDim, dModel),
    wv: matrix(next, kvHeads * headDim, dModel),
    wo: matrix(next, dModel, heads * headDim, 0.5),
    gate: matrix(next, ffn, dModel),
    up: matrix(next, ffn, dModel),
    down: matrix(next, dModel, ffn, 0.5),
  });
  return { embedding, layers: Array.from({ length: layers }, layer), head: matrix(next, vocab, dModel) };
}

// ------------------------------------------------------------------------------------------ layers

/** y[t] = W x[t] for T rows of x ([T, W.cols]) -> [T, W.rows]. */
function matmul(x, T, W) {
  const { data, rows, cols } = W;
  const y = new Float32Array(T * rows);
  for (let t = 0; t < T; t++) {
    const xo = t * cols;
    for (let r = 0; r < rows; r++) {
      const wo = r * cols;
      let a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      for (let c = 0; c < cols; c += 4) {
        a0 += data[wo + c] * x[xo + c];
        a1 += data[wo + c + 1] * x[xo + c + 1];
        a2 += data[wo + c + 2] * x[xo + c + 2];
        a3 += data[wo + c + 3] * x[xo + c + 3];
      }
      y[t * rows + r] = a0 + a1 + a2 + a3;
    }
  }
  return y;
}

/** RMSNorm of each of T rows of width n (unit gain). */
function rmsNorm(x, T, n) {
  const y = new Float32Array(x.length);
  for (let t = 0; t < T; t++) {
    let s = 0;
    for (let c = 0; c < n; c++) s += x[t * n + c] ** 2;
    const r = 1 / Math.sqrt(s / n + MODEL.eps);
    for (let c = 0; c < n; c++) y[t * n + c] = x[t * n + c] * r;
  }
  return y;
}

/**
 * Rotary positions, in place: x is [T, H, D] (row t at absolute position pos0 + t); each pair of
 * dimensions (i, i + D/2) of every head turns by the angle pos * base^(-2i/D).
 */
function rope(x, T, H, D, pos0) {
  const half = D / 2;
  for (let t = 0; t < T; t++) {
    const pos = pos0 + t;
    for (let i = 0; i < half; i++) {
      const angle = pos * MODEL.ropeBase ** (-(2 * i) / D);
      const c = Math.cos(angle), s = Math.sin(angle);
      for (let h = 0; h < H; h++) {
        const o = (t * H + h) * D;
        const a = x[o + i], b = x[o + i + half];
        x[o + i] = a * c - b * s;
        x[o + i + half] = a * s + b * c;
      }
    }
  }
}

const silu = (x) => x / (1 + Math.exp(-x));

/** x += y */
function addInto(x, y) {
  for (let n = 0; n < x.length; n++) x[n] += y[n];
}

// ------------------------------------------------------------------------------------------ attention

/** Rounds a float32 to the nearest bfloat16 (ties to even; NaN kept) and returns it as a number. */
export function roundToBfloat16(x) {
  const f = new Float32Array([x]);
  const u = new Uint32Array(f.buffer);
  if (Number.isNaN(f[0])) return f[0];
  u[0] = (u[0] + 0x7fff + ((u[0] >>> 16) & 1)) & 0xffff0000;
  return f[0];
}

/** Rounds a float to the nearest IEEE half (ties to even) and returns it as a number. */
export function roundToHalf(x) {
  if (!Number.isFinite(x) || x === 0) return x;
  const a = Math.abs(x);
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e -= 1;
  else if (2 ** (e + 1) <= a) e += 1;
  const ulp = 2 ** (Math.max(e, -14) - 10);   // subnormal halves share the exponent -14
  const q = a / ulp;                            // exact: ulp is a power of two
  const f = Math.floor(q);
  const r = q - f > 0.5 || (q - f === 0.5 && f % 2 === 1) ? f + 1 : f;
  const y = r * ulp;
  return Math.sign(x) * (y > 65504 ? Infinity : y);
}

/** The caches' RoPE: the model's base, every dimension, pairs (i, i + D/2) as rope() above. */
const CACHE_ROPE = Object.freeze({ theta: MODEL.ropeBase, layout: 'halves' });

/**
 * Attention through maskattn's KV cache: one cache per layer, K/V appended in place, each step's
 * queries attend what the cache holds. Tensors are [B = 1, T, H, D] ('blhd', the layout the
 * projections produce), so nothing is transposed. rope 'fused': the caches rotate Q and K
 * (rotates = true: the model passes them unrotated); 'js': caches without rope, the model rotates.
 */
class CacheAttention {
  constructor(ma, { capacity, dtype, window, pageSize = 0, rope = 'fused' }) {
    const { layers, kvHeads, headDim } = MODEL;
    this.rotates = rope === 'fused';
    this.caches = Array.from({ length: layers }, () => ma.createKVCache({
      batch: 1, kvHeads, capacity, headDim, dtype, window, pageSize, ...(this.rotates ? { rope: CACHE_ROPE } : {}),
    }));
  }

  run(layer, q, k, v, T, pos0) {
    const { heads, kvHeads, headDim: D } = MODEL;
    const cache = this.caches[layer];
    if (!this.rotates) {
      rope(q, T, heads, D, pos0);
      rope(k, T, kvHeads, D, pos0);
    }
    cache.append({ data: k, shape: [1, T, kvHeads, D] }, { data: v, shape: [1, T, kvHeads, D] }, { layout: 'blhd' });
    return cache.attend({ data: q, shape: [1, T, heads, D] }, { layout: 'blhd' }).output.data;
  }

  get byteLength() {
    return this.caches.reduce((s, c) => s + c.byteLength, 0);
  }

  get lengths() {
    return this.caches.map((c) => c.lengths[0]);
  }

  dispose() {
    for (const c of this.caches) c.dispose();
  }
}

/**
 * The same attention without a cache or fused RoPE: Q and K rotated here in JavaScript, K/V of
 * every position kept in JavaScript and passed whole to ma.attention each step (causal,
 * bottom-right; a window becomes window: [W - 1, 0]). For float16 and bfloat16, K/V are rounded as
 * the cache would store them (after rotation, as the cache rotates before it stores).
 */
class FullAttention {
  constructor(ma, { capacity, dtype, window }) {
    const { layers, kvHeads, headDim } = MODEL;
    this.ma = ma;
    this.window = window;
    this.round = { float16: roundToHalf, bfloat16: roundToBfloat16 }[dtype] ?? null;
    this.length = 0;
    this.kv = Array.from({ length: layers }, () => ({
      k: new Float32Array(capacity * kvHeads * headDim), v: new Float32Array(capacity * kvHeads * headDim), length: 0,
    }));
  }

  _grow(store, n) {
    if (n <= store.k.length) return;
    for (const key of ['k', 'v']) {
      const bigger = new Float32Array(Math.max(n, 2 * store[key].length));
      bigger.set(store[key]);
      store[key] = bigger;
    }
  }

  run(layer, q, k, v, T, pos0) {
    const { heads, kvHeads, headDim: D } = MODEL;
    rope(q, T, heads, D, pos0);
    rope(k, T, kvHeads, D, pos0);
    const store = this.kv[layer];
    const row = kvHeads * D;
    this._grow(store, (store.length + T) * row);
    const at = store.length * row;
    store.k.set(k, at);
    store.v.set(v, at);
    if (this.round)
      for (let n = at; n < at + T * row; n++) {
        store.k[n] = this.round(store.k[n]);
        store.v[n] = this.round(store.v[n]);
      }
    store.length += T;
    const L = store.length;
    const options = { layout: 'blhd', causal: true };
    if (this.window > 0) options.window = [this.window - 1, 0];
    return this.ma.attention(
      { data: q, shape: [1, T, heads, D] },
      { data: store.k.subarray(0, L * row), shape: [1, L, kvHeads, D] },
      { data: store.v.subarray(0, L * row), shape: [1, L, kvHeads, D] },
      options,
    ).output.data;
  }

  get byteLength() {
    return this.kv.reduce((s, st) => s + st.length * MODEL.kvHeads * MODEL.headDim * 2 * 4, 0);
  }

  get lengths() {
    return this.kv.map((st) => st.length);
  }

  dispose() {}
}

// ------------------------------------------------------------------------------------------ the model

/**
 * One forward pass over T new tokens at positions pos0 .. pos0 + T - 1; returns the logits of the
 * last one and the time spent in attention (RoPE + append + attend, all layers; RoPE is the
 * attention's: fused in the cache, or in JavaScript).
 */
function forward(weights, attention, tokens, pos0) {
  const { dModel } = MODEL;
  const T = tokens.length;
  const x = new Float32Array(T * dModel);
  tokens.forEach((tok, t) => x.set(weights.embedding.data.subarray(tok * dModel, (tok + 1) * dModel), t * dModel));
  let attentionMs = 0;
  for (const [l, w] of weights.layers.entries()) {
    const h = rmsNorm(x, T, dModel);
    const q = matmul(h, T, w.wq);  // [T, heads, D]
    const k = matmul(h, T, w.wk);  // [T, kvHeads, D]
    const v = matmul(h, T, w.wv);
    const t0 = performance.now();
    const o = attention.run(l, q, k, v, T, pos0);  // [T, heads, D]
    attentionMs += performance.now() - t0;
    addInto(x, matmul(o, T, w.wo));
    const h2 = rmsNorm(x, T, dModel);
    const g = matmul(h2, T, w.gate);
    const u = matmul(h2, T, w.up);
    for (let n = 0; n < g.length; n++) g[n] = silu(g[n]) * u[n];
    addInto(x, matmul(g, T, w.down));
  }
  const last = rmsNorm(x.subarray((T - 1) * dModel), 1, dModel);
  const logits = matmul(last, 1, weights.head);
  return { logits, attentionMs };
}

function argmax(a) {
  let best = 0;
  for (let n = 1; n < a.length; n++) if (a[n] > a[best]) best = n;
  return best;
}

/** The next token: greedy at temperature 0, else drawn from softmax(logits / temperature) by `next`. */
function pick(logits, temperature, next) {
  if (!(temperature > 0)) return argmax(logits);
  const m = logits.reduce((a, b) => Math.max(a, b), -Infinity);
  const p = Array.from(logits, (x) => Math.exp((x - m) / temperature));
  let u = next() * p.reduce((a, b) => a + b, 0);
  for (let n = 0; n < p.length; n++) if ((u -= p[n]) <= 0) return n;
  return p.length - 1;
}

/** A byte as text: the character when printable ASCII, else \xNN. */
export function showToken(t) {
  return t >= 32 && t < 127 ? String.fromCharCode(t) : `\\x${t.toString(16).padStart(2, '0')}`;
}

/**
 * Generates `tokens` tokens after `prompt` (greedy). attention: 'cache' (maskattn's KV cache) or
 * 'full' (Q and K rotated in JavaScript, plain ma.attention over all K/V, for checking). rope (for
 * the cache): 'fused' (the cache's own) or 'js' (rotated in JavaScript, caches without rope).
 * Returns the tokens, the logits of each step, timings and the cache's bytes. onStep(step) is
 * called after each token.
 */
export async function generate({
  ma = null, prompt = 'The quick brown fox', tokens = 32, dtype = 'float32', window = 0, seed = 1,
  attention = 'cache', weights = null, onStep = null, temperature = 0, sampleSeed = 0, pageSize = 0, rope = 'fused',
} = {}) {
  if (rope !== 'fused' && rope !== 'js') throw new RangeError(`rope must be 'fused' or 'js', given ${rope}`);
  const next = rng(sampleSeed + 1);
  ma ??= await init();
  weights ??= buildWeights(seed);
  const promptTokens = [...new TextEncoder().encode(prompt)];
  if (promptTokens.length === 0) throw new RangeError('the prompt must have at least one byte');
  const P = promptTokens.length;
  // Without a window the cache holds the whole sequence. With one, it is a ring; the prompt's
  // queries (Lq = P at once) reach back W - 1 positions from the first of them, so the ring needs
  // W + P - 1 slots (the contract's capacity >= W + Lq - 1); later steps (Lq = 1) need only W.
  const capacity = window > 0 ? window + P - 1 : P + tokens;
  const Impl = attention === 'cache' ? CacheAttention : FullAttention;
  const att = new Impl(ma, { capacity, dtype, window, pageSize, rope });
  try {
    const t0 = performance.now();
    let { logits, attentionMs } = forward(weights, att, promptTokens, 0);
    const prefill = { tokens: P, totalMs: performance.now() - t0, attentionMs };
    const out = [], steps = [], allLogits = [logits];
    for (let n = 0; n < tokens; n++) {
      const token = pick(logits, temperature, next);
      out.push(token);
      // The token goes through the model (its K/V into the caches, its logits pick the next one).
      const s0 = performance.now();
      ({ logits, attentionMs } = forward(weights, att, [token], P + n));
      steps.push({ step: n + 1, token, totalMs: performance.now() - s0, attentionMs, lengths: att.lengths });
      allLogits.push(logits);
      onStep?.(steps.at(-1));
    }
    return {
      backend: ma.backend, prompt: promptTokens, tokens: out, text: out.map(showToken).join(''),
      prefill, steps, logits: allLogits, capacity, byteLength: att.byteLength, lengths: att.lengths,
    };
  } finally {
    att.dispose();
  }
}

/**
 * N samples of one prompt, decoded together over forked sequences of one paged cache per layer.
 * Sample i draws with its own stream (sampleSeed i), so its tokens are exactly generate()'s with
 * { temperature, sampleSeed: i }. Returns each sample's tokens and the memory the forks saved.
 */
export async function sample({
  ma = null, prompt = 'The quick brown fox', tokens = 16, samples = 4, temperature = 1, dtype = 'float32', seed = 1,
  weights = null, pageSize = 16, onStep = null,
} = {}) {
  ma ??= await init();
  weights ??= buildWeights(seed);
  const { layers, heads, kvHeads, headDim: D, dModel } = MODEL;
  const promptTokens = [...new TextEncoder().encode(prompt)];
  const P = promptTokens.length, N = samples;
  const caches = Array.from({ length: layers }, () =>
    ma.createKVCache({ batch: N, kvHeads, capacity: P + tokens, headDim: D, dtype, pageSize, rope: CACHE_ROPE }));
  try {
    // The prompt into sequence 0 only (the others take 0 positions), then forked to the others.
    const prefill = (l, q, k, v, T) => {
      const c = caches[l];
      const pad = (x, width) => { const y = new Float32Array(N * T * width); y.set(x); return y; };
      c.append({ data: pad(k, kvHeads * D), shape: [N, T, kvHeads, D] }, { data: pad(v, kvHeads * D), shape: [N, T, kvHeads, D] },
        { layout: 'blhd', counts: Int32Array.from({ length: N }, (_, b) => (b === 0 ? T : 0)) });
      return c.attend({ data: pad(q, heads * D), shape: [N, T, heads, D] }, { layout: 'blhd' }).output.data.subarray(0, T * heads * D);
    };
    let { logits } = forward(weights, { run: prefill }, promptTokens, 0);
    const promptBytes = caches.reduce((s, c) => s + c.byteLength, 0);
    for (const c of caches) for (let b = 1; b < N; b++) c.fork(0, b);
    const streams = Array.from({ length: N }, (_, i) => rng(i + 1));
    let all = Array.from({ length: N }, () => logits);
    const out = Array.from({ length: N }, () => []);
    const steps = [];
    for (let n = 0; n < tokens; n++) {
      const next = all.map((lg, i) => pick(lg, temperature, streams[i]));
      next.forEach((t, i) => out[i].push(t));
      const s0 = performance.now();
      all = forwardBatch(weights, caches, next);
      steps.push({ step: n + 1, tokens: next, totalMs: performance.now() - s0 });
      onStep?.(steps.at(-1));
    }
    // Without forks each sample would hold its own copy of every position it attends: the same
    // pages, counted once per sequence.
    const pageBytes = promptBytes / layers / Math.ceil(P / pageSize);
    const unshared = layers * N * Math.ceil((P + tokens) / pageSize) * pageBytes;
    return {
      backend: ma.backend, prompt: promptTokens, tokens: out, texts: out.map((t) => t.map(showToken).join('')), steps,
      byteLength: caches.reduce((s, c) => s + c.byteLength, 0), unsharedBytes: unshared, promptBytes,
    };
  } finally {
    for (const c of caches) c.dispose();
  }
}

/**
 * One step of N sequences (one new token each, all at the same position) through the batch caches,
 * which rotate Q and K by each sequence's own position (their rope).
 */
function forwardBatch(weights, caches, tokens) {
  const { dModel, heads, kvHeads, headDim: D } = MODEL;
  const N = tokens.length;
  const x = new Float32Array(N * dModel);
  tokens.forEach((tok, b) => x.set(weights.embedding.data.subarray(tok * dModel, (tok + 1) * dModel), b * dModel));
  for (const [l, w] of weights.layers.entries()) {
    const h = rmsNorm(x, N, dModel);  // rows are sequences here: each row is independent
    const q = matmul(h, N, w.wq);
    const k = matmul(h, N, w.wk);
    const v = matmul(h, N, w.wv);
    caches[l].append({ data: k, shape: [N, 1, kvHeads, D] }, { data: v, shape: [N, 1, kvHeads, D] }, { layout: 'blhd' });
    const o = caches[l].attend({ data: q, shape: [N, 1, heads, D] }, { layout: 'blhd' }).output.data;
    addInto(x, matmul(o, N, w.wo));
    const h2 = rmsNorm(x, N, dModel);
    const g = matmul(h2, N, w.gate);
    const u = matmul(h2, N, w.up);
    for (let n = 0; n < g.length; n++) g[n] = silu(g[n]) * u[n];
    addInto(x, matmul(g, N, w.down));
  }
  return Array.from({ length: N }, (_, b) => matmul(rmsNorm(x.subarray(b * dModel, (b + 1) * dModel), 1, dModel), 1, weights.head));
}

// ------------------------------------------------------------------------------------------ command line

function parseArgs(argv) {
  const a = { tokens: 32, dtype: 'float32', window: 0, prompt: 'The quick brown fox', seed: 1, check: false, scalar: false, samples: 0, temperature: 1, rope: 'fused' };
  const int = (name, s, min) => {
    const n = Number(s);
    if (!Number.isInteger(n) || n < min) throw new RangeError(`${name} must be an integer >= ${min}, given ${s}`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--tokens') a.tokens = int('--tokens', argv[++i], 1);
    else if (arg === '--dtype') a.dtype = argv[++i];
    else if (arg === '--window') a.window = int('--window', argv[++i], 0);
    else if (arg === '--prompt') a.prompt = argv[++i] ?? '';
    else if (arg === '--seed') a.seed = int('--seed', argv[++i], 0);
    else if (arg === '--rope') a.rope = argv[++i];
    else if (arg === '--check') a.check = true;
    else if (arg === '--scalar') a.scalar = true;
    else if (arg === '--samples') a.samples = int('--samples', argv[++i], 1);
    else if (arg === '--temperature') {
      a.temperature = Number(argv[++i]);
      if (!(a.temperature >= 0)) throw new RangeError(`--temperature must be a number >= 0, given ${argv[i]}`);
    }
    else if (arg === '--help' || arg === '-h') {
      console.log('node examples/generate.mjs [--tokens N] [--dtype D (one of ma.kvDtypes)] [--window W] [--prompt TEXT] [--seed S] [--rope fused|js] [--check] [--scalar] [--samples N [--temperature T]]');
      process.exit(0);
    } else throw new RangeError(`unknown argument ${arg} (try --help)`);
  }
  if (a.rope !== 'fused' && a.rope !== 'js') throw new RangeError(`--rope must be fused or js, given ${a.rope}`);
  return a;
}

const median = (v) => {
  const s = [...v].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const ms = (x) => x.toFixed(3).padStart(9);

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const ma = await init({ simd: args.scalar ? false : 'auto' });
  // The cache dtypes are the library's table (ma.kvDtypes), not a list kept here.
  if (!ma.kvDtypes.includes(args.dtype)) throw new RangeError(`--dtype must be one of ${ma.kvDtypes.join(', ')}, given ${args.dtype}`);
  const { layers, heads, kvHeads, headDim, dModel, ffn, vocab } = MODEL;
  const weights = buildWeights(args.seed);
  if (args.samples > 0) return mainSamples(ma, weights, args);
  console.log(`maskattn ${ma.backend.version} (${ma.backend.arch}); decoder: ${layers} layers, d_model ${dModel}, ` +
    `${heads} query heads / ${kvHeads} KV heads, D ${headDim}, MLP ${ffn}, vocab ${vocab} (bytes), seed ${args.seed}`);
  console.log(`KV cache: ${args.dtype}, ${args.window > 0 ? `sliding window ${args.window} (ring)` : 'no window'}; ` +
    `prompt ${JSON.stringify(args.prompt)}`);
  console.log(args.rope === 'fused'
    ? `RoPE (theta ${MODEL.ropeBase}): the cache's own, keys rotated by position at append, queries at attend`
    : `RoPE (theta ${MODEL.ropeBase}): Q and K rotated in JavaScript, caches without rope`);
  console.log(`${'step'.padStart(5)} ${'token'.padStart(6)} ${'text'.padEnd(6)} ${'total ms'.padStart(9)} ${'attn ms'.padStart(9)}  cache lengths (per layer)`);
  const run = await generate({
    ma, weights, prompt: args.prompt, tokens: args.tokens, dtype: args.dtype, window: args.window, rope: args.rope,
    onStep: (s) => {
      console.log(`${String(s.step).padStart(5)} ${String(s.token).padStart(6)} ${showToken(s.token).padEnd(6)} ${ms(s.totalMs)} ${ms(s.attentionMs)}  ${s.lengths.join(', ')}`);
    },
  });
  const timed = run.steps;
  console.log(`prefill: ${run.prefill.tokens} tokens in ${run.prefill.totalMs.toFixed(2)} ms (attention ${run.prefill.attentionMs.toFixed(2)} ms)`);
  if (timed.length)
    console.log(`per token (median of ${timed.length}): total ${median(timed.map((s) => s.totalMs)).toFixed(3)} ms, ` +
      `attention ${median(timed.map((s) => s.attentionMs)).toFixed(3)} ms`);
  console.log(`KV cache byteLength: ${run.byteLength} bytes (${layers} layers x ${run.byteLength / layers} bytes; ` +
    `capacity ${run.capacity} positions, ${args.dtype})`);
  console.log(`generated: ${run.text}`);

  if (args.check) {
    const ref = await generate({ ma, weights, prompt: args.prompt, tokens: args.tokens, dtype: args.dtype, window: args.window, attention: 'full' });
    let maxDiff = 0;
    run.logits.forEach((l, s) => l.forEach((x, n) => { maxDiff = Math.max(maxDiff, Math.abs(x - ref.logits[s][n])); }));
    const first = run.tokens.findIndex((t, n) => t !== ref.tokens[n]);
    if (first >= 0) {
      console.log(`check: FAILED: with Q and K rotated in JavaScript and plain ma.attention over the full K/V, token ${first + 1} is ${ref.tokens[first]}, ` +
        `the cache gave ${run.tokens[first]} (max |logit diff| ${maxDiff.toExponential(2)})`);
      process.exitCode = 1;
    } else {
      console.log(`check: identical tokens with Q and K rotated in JavaScript and plain ma.attention over the full K/V (${run.tokens.length} of ${run.tokens.length}); ` +
        `max |logit diff| ${maxDiff.toExponential(2)}`);
    }
  }
}

async function mainSamples(ma, weights, args) {
  if (args.window > 0) throw new RangeError('--samples runs without --window (a paged cache holding every position)');
  console.log(`maskattn ${ma.backend.version} (${ma.backend.arch}); ${args.samples} samples at temperature ${args.temperature} ` +
    `of ${JSON.stringify(args.prompt)}, KV cache ${args.dtype}, paged (16 positions per page), prompt forked to every sample`);
  const run = await sample({
    ma, weights, prompt: args.prompt, tokens: args.tokens, samples: args.samples, temperature: args.temperature, dtype: args.dtype,
    onStep: (s) => console.log(`${String(s.step).padStart(5)} ${s.tokens.map((t) => showToken(t).padEnd(4)).join(' ')} ${ms(s.totalMs)} ms`),
  });
  run.texts.forEach((t, i) => console.log(`sample ${i}: ${t}`));
  const saved = 1 - run.byteLength / run.unsharedBytes;
  console.log(`KV cache: ${run.byteLength} bytes for ${args.samples} samples sharing the prompt's pages; ` +
    `${run.unsharedBytes} bytes unshared (${args.samples} copies): saves ${(100 * saved).toFixed(1)}%`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((e) => {
    console.error(`generate.mjs: ${e.message}`);
    process.exit(1);
  });
}
