// Shared by the Node benchmarks: the cases (same ids and shapes as bench/maskattn_bench.cpp), their
// inputs, how each is expressed as an ONNX `Attention` model, and the measuring method (interleaved
// calls in shuffled order, inputs rotated over copies, medians).
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';

import { attentionModel, ONNX_BOOL, ONNX_FLOAT } from '../../tests/js/onnx-model.mjs';

// decode: memory-bound (figures are GB/s of K+V); native/wasm: which benchmark runs it.
export const CASES = [
  { id: '1', name: 'dense 1x8x128x64', B: 1, Hq: 8, Hkv: 8, Lq: 128, Lk: 128, D: 64, native: true, wasm: true },
  { id: '2', name: 'causal 1x8x512x64', B: 1, Hq: 8, Hkv: 8, Lq: 512, Lk: 512, D: 64, causal: true, native: true, wasm: true },
  { id: '3', name: 'dense 1x12x1024x64', B: 1, Hq: 12, Hkv: 12, Lq: 1024, Lk: 1024, D: 64, native: true, wasm: true },
  { id: '4', name: 'causal 1x12x1024x64', B: 1, Hq: 12, Hkv: 12, Lq: 1024, Lk: 1024, D: 64, causal: true, native: true, wasm: true },
  { id: '5', name: 'decode 1x32x1x2048x128', B: 1, Hq: 32, Hkv: 32, Lq: 1, Lk: 2048, D: 128, causal: true, decode: true, native: true, wasm: true },
  { id: '6', name: 'bool mask 2x4x64x32', B: 2, Hq: 4, Hkv: 4, Lq: 64, Lk: 64, D: 32, randomMask: true, native: true, wasm: true },
  { id: '7', name: 'GQA decode 1x32/8x1x4096x128', B: 1, Hq: 32, Hkv: 8, Lq: 1, Lk: 4096, D: 128, causal: true, decode: true, native: true },
  { id: '8', name: 'batched decode 8x32/8x1x4096x128 ragged', B: 8, Hq: 32, Hkv: 8, Lq: 1, Lk: 4096, D: 128, causal: true, decode: true, ragged: true, native: true },
  { id: '9', name: 'spec verify 1x32/8x4x2048x128 causal', B: 1, Hq: 32, Hkv: 8, Lq: 4, Lk: 2048, D: 128, causal: true, decode: true, native: true },
  { id: '10', name: 'dense 1x12x1024x128', B: 1, Hq: 12, Hkv: 12, Lq: 1024, Lk: 1024, D: 128, native: true },
  // Sentence embeddings (MiniLM-sized batch): key lengths 16..128 spread evenly over the batch.
  { id: '11', name: 'encoder 16x12x128x32 ragged', B: 16, Hq: 12, Hkv: 12, Lq: 128, Lk: 128, D: 32, ragged: true, minKeys: 16, native: true, wasm: true },
  // A padded batch of a short-sequence model: key lengths 64, 128, 192, 256.
  { id: '12', name: 'key padding 4x8x256x64', B: 4, Hq: 8, Hkv: 8, Lq: 256, Lk: 256, D: 64, ragged: true, minKeys: 64, native: true, wasm: true },
  { id: 's', name: 'one small call 1x1x16x16', B: 1, Hq: 1, Hkv: 1, Lq: 16, Lk: 16, D: 16, causal: true, wasm: true },
];

export function parseArgs(argv = process.argv.slice(2)) {
  const args = { quick: false, json: null, cases: null };
  for (let i = 0; i < argv.length; ++i) {
    if (argv[i] === '--quick') args.quick = true;
    else if (argv[i] === '--json') args.json = argv[++i];
    else if (argv[i] === '--case') args.cases = argv[++i].split(',');
    else throw new Error(`unknown argument ${argv[i]} (known: --quick, --json FILE, --case ID[,ID...])`);
  }
  return args;
}

export function machine() {
  const list = cpus();
  return { cpu: (list[0]?.model ?? 'unknown CPU').trim(), cores: list.length, date: new Date().toISOString().slice(0, 16).replace('T', ' ') };
}

// A deterministic generator of uniform values in [-1, 1).
export function rng(seed) {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32) * 2 - 1;
}

// The case's fixed parts: key lengths, boolean mask, pairs and bytes.
export function setup(c) {
  const s = { ...c };
  // Ragged: key lengths spread evenly from minKeys (default 512) to Lk over the batch.
  const minKeys = c.minKeys ?? 512;
  if (c.ragged) s.keyLengths = Int32Array.from({ length: c.B }, (_, b) => Math.round(minKeys + ((c.Lk - minKeys) * b) / (c.B - 1)));
  if (c.randomMask) {
    const r = rng(606);
    const a = new Uint8Array(c.B * c.Hq * c.Lq * c.Lk);
    for (let row = 0; row < a.length / c.Lk; ++row) {
      let kept = 0;
      for (let j = 0; j < c.Lk; ++j) kept += a[row * c.Lk + j] = r() < 0 ? 1 : 0;
      if (!kept) a[row * c.Lk + Math.floor(((r() + 1) / 2) * c.Lk)] = 1;
    }
    s.allowed = a;
  }
  let pairs = 0, keys = 0;
  for (let b = 0; b < c.B; ++b) {
    const n = s.keyLengths ? s.keyLengths[b] : c.Lk;
    keys += n;
    for (let h = 0; h < c.Hq; ++h)
      for (let i = 0; i < c.Lq; ++i) {
        const end = c.causal ? Math.max(0, Math.min(n, i + n - c.Lq + 1)) : n;
        if (!s.allowed) pairs += end;
        else for (let j = 0; j < end; ++j) pairs += s.allowed[((b * c.Hq + h) * c.Lq + i) * c.Lk + j];
      }
  }
  s.flops = 4 * c.D * pairs;
  s.kvBytes = keys * c.Hkv * c.D * 4 * 2;
  s.qShape = [c.B, c.Hq, c.Lq, c.D];
  s.kvShape = [c.B, c.Hkv, c.Lk, c.D];
  return s;
}

// Inputs: `copies` copies (distinct buffers, same values) of q, k, v.
export function makeInputs(s, copies, seed = 7) {
  const r = rng(seed);
  const nq = s.qShape.reduce((a, b) => a * b, 1), nkv = s.kvShape.reduce((a, b) => a * b, 1);
  const q = Float32Array.from({ length: nq }, r), k = Float32Array.from({ length: nkv }, r), v = Float32Array.from({ length: nkv }, r);
  return Array.from({ length: copies }, (_, i) => (i === 0 ? { q, k, v } : { q: q.slice(), k: k.slice(), v: v.slice() }));
}

// 2 to 4 copies: at least ~128 MiB of inputs in rotation, so a decode call never finds K/V cached.
export function copiesFor(s) {
  const bytes = (s.qShape.reduce((a, b) => a * b, 1) + 2 * s.kvShape.reduce((a, b) => a * b, 1)) * 4;
  return Math.max(2, Math.min(4, Math.floor((128 * 2 ** 20) / bytes) + 1));
}

// maskattn options of the case.
export function maskattnOptions(s) {
  const o = { causal: !!s.causal };
  if (s.keyLengths) o.keyLengths = s.keyLengths;
  if (s.allowed) o.allowed = { data: s.allowed, shape: [s.B, s.Hq, s.Lq, s.Lk] };
  return o;
}

// The case as one ONNX Attention node (opset 23). ONNX's is_causal is top-left aligned, so it is used
// only when Lq == Lk (where both alignments agree); bottom-right causal, key lengths (opset 23 has
// none) and boolean masks become a boolean attn_mask (true = attend), broadcast where possible.
export function ortCase(s) {
  const inputs = [
    { name: 'Q', type: ONNX_FLOAT, shape: s.qShape },
    { name: 'K', type: ONNX_FLOAT, shape: s.kvShape },
    { name: 'V', type: ONNX_FLOAT, shape: s.kvShape },
  ];
  const attributes = {};
  let mask = null, note = '';
  const causalMatters = s.causal && s.Lq > 1;
  if (causalMatters && s.Lq === s.Lk && !s.keyLengths && !s.allowed) {
    attributes.is_causal = 1;
    note = 'is_causal=1';
  } else if (causalMatters || s.keyLengths || s.allowed) {
    // onnxruntime-web 1.30 requires the mask's query dimension to be Lq (it does not broadcast it).
    const shape = [s.keyLengths || s.allowed ? s.B : 1, s.allowed ? s.Hq : 1, s.Lq, s.Lk];
    const data = new Uint8Array(shape.reduce((a, b) => a * b, 1));
    for (let b = 0; b < shape[0]; ++b)
      for (let h = 0; h < shape[1]; ++h)
        for (let i = 0; i < shape[2]; ++i) {
          const n = s.keyLengths ? s.keyLengths[b] : s.Lk;
          const end = s.causal ? Math.max(0, Math.min(n, i + n - s.Lq + 1)) : n;
          const row = ((b * shape[1] + h) * shape[2] + i) * s.Lk;
          for (let j = 0; j < end; ++j) data[row + j] = s.allowed ? s.allowed[((b * s.Hq + h) * s.Lq + i) * s.Lk + j] : 1;
        }
    mask = { data, shape };
    inputs.push({ name: 'M', type: ONNX_BOOL, shape });
    note = `bool attn_mask [${shape}]`;
  }
  const model = attentionModel({ inputs, outputs: [{ name: 'Y', type: ONNX_FLOAT, shape: null }], attributes });
  return { model, mask, note };
}

export function ortFeeds(ort, s, input, mask) {
  const feeds = {
    Q: new ort.Tensor('float32', input.q, s.qShape),
    K: new ort.Tensor('float32', input.k, s.kvShape),
    V: new ort.Tensor('float32', input.v, s.kvShape),
  };
  if (mask) feeds.M = new ort.Tensor('bool', mask.data, mask.shape);
  return feeds;
}

export function maxAbsDiff(a, b) {
  if (a.length !== b.length) return Infinity;
  let d = 0;
  for (let i = 0; i < a.length; ++i) {
    const x = Math.abs(a[i] - b[i]);
    if (!(x <= d)) d = Number.isNaN(x) ? Infinity : x;
  }
  return d;
}

/** Cosine similarity of two outputs (how the KV cache benchmarks report a dtype's error). */
export function cosine(a, b) {
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; i++) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  return ab / Math.sqrt(aa * bb);
}

export function median(v) {
  const s = [...v].sort((a, b) => a - b);
  const n = s.length;
  return n === 0 ? NaN : n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Interleaved measurement: each repetition times every impl once, in a new random order each
 * time: a short pause (idle thread pools stop spinning), untimed calls (one, or up to `warm` while
 * they take under 2 ms: the impl's threads are awake), then the timed call; every call takes the
 * next copy of the inputs. impls: [{ name, run(copyIndex) }] (run may be async).
 * Returns per impl { impl, medianMs, minMs, calls }.
 */
export async function measure(impls, { copies, budgetMs, minReps, maxReps, gapMs = 1, warm = 3 }) {
  const times = impls.map(() => []);
  let reps = 0, call = 0;
  const order = impls.map((_, i) => i);
  const r = rng(12345);
  const start = performance.now();
  while (reps < maxReps && (reps < minReps || performance.now() - start < budgetMs)) {
    for (let j = order.length - 1; j > 0; --j) {  // a new order (and neighbours) each repetition
      const k = Math.floor(((r() + 1) / 2) * (j + 1));
      [order[j], order[k]] = [order[k], order[j]];
    }
    for (const i of order) {
      if (gapMs > 0) await sleep(gapMs);
      const w0 = performance.now();
      for (let w = 0; w < warm && (w === 0 || performance.now() - w0 < 2); ++w) await impls[i].run(call++ % copies);
      const copy = call++ % copies;
      const t0 = performance.now();
      await impls[i].run(copy);
      times[i].push(performance.now() - t0);
    }
    ++reps;
  }
  return impls.map((im, i) => ({ impl: im.name, medianMs: median(times[i]), minMs: Math.min(...times[i]), calls: times[i].length }));
}

export function writeJson(path, value) {
  if (path) {
    writeFileSync(path, `${JSON.stringify(value, null, 1)}\n`);
    process.stderr.write(`wrote ${path}\n`);
  }
}

export const pad = (s, n) => String(s).padEnd(n);
export const lpad = (s, n) => String(s).padStart(n);
