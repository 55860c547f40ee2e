// The benchmark behind the speed panel: the same attention timed with maskattn's SIMD128 build on
// one thread and on all its threads (the threaded build, on a cross-origin isolated page), its
// scalar build, onnxruntime-web's Attention operator where it loads, and a plain JavaScript
// implementation; then a decode step of a real model's size from a KV cache in each dtype. Runs in
// a worker (perf-worker.js), or on the main thread as a fallback, yielding so progress can be shown.

import { rng, normal } from './random.js';
import { attentionModel } from './onnx-attention.js';

/** min, median and max of a list of times (ms), and how many. */
function spread(times) {
  const t = [...times].sort((a, b) => a - b);
  return { minMs: t[0], medianMs: t[Math.floor(t.length / 2)], maxMs: t[t.length - 1], reps: t.length };
}

/**
 * Times call() (sync or async) for about budgetMs, at least 3 samples; yields to report progress.
 * A call shorter than the clock's grain (5 µs on an isolated page, coarser elsewhere) is timed in
 * batches of at least ~1 ms, each sample being the batch's time over its calls.
 */
async function timeRuns(call, budgetMs, maxReps, progress) {
  let t0 = performance.now();
  const r = call();
  const isAsync = Boolean(r && typeof r.then === 'function');
  if (isAsync) await r;
  const first = performance.now() - t0;
  const batch = first >= 1 ? 1 : Math.min(1000, Math.ceil(1 / Math.max(first, 0.005)));
  const times = [];
  const start = performance.now();
  let lastYield = start;
  for (;;) {
    t0 = performance.now();
    if (isAsync) for (let n = 0; n < batch; n++) await call();
    else for (let n = 0; n < batch; n++) call();
    const t1 = performance.now();
    times.push((t1 - t0) / batch);
    const elapsed = t1 - start;
    if ((elapsed >= budgetMs && times.length >= 3) || times.length >= maxReps || elapsed > budgetMs * 8) break;
    if (t1 - lastYield > 40) {
      progress(Math.min(1, elapsed / budgetMs));
      await sleep();
      lastYield = performance.now();
    }
  }
  return { ...spread(times), batch };
}

/**
 * Plain JavaScript attention: Float32Array buffers, the straightforward triple loop, causal
 * (bottom-right: key j <= i + Lk - Lq) or unmasked. q [B,H,Lq,D], k/v [B,H,Lk,D], out [B,H,Lq,D].
 */
export function jsAttention(q, k, v, out, B, H, Lq, Lk, D, causal) {
  const scale = 1 / Math.sqrt(D);
  const s = new Float32Array(Lk);
  const acc = new Float32Array(D);
  for (let bh = 0; bh < B * H; bh++) {
    const qBase = bh * Lq * D;
    const kBase = bh * Lk * D;
    for (let i = 0; i < Lq; i++) {
      const end = causal ? Math.min(Lk, Math.max(0, i + Lk - Lq + 1)) : Lk;
      const qi = qBase + i * D;
      let max = -Infinity;
      for (let j = 0; j < end; j++) {
        const kj = kBase + j * D;
        let dot = 0;
        for (let d = 0; d < D; d++) dot += q[qi + d] * k[kj + d];
        s[j] = dot * scale;
        if (s[j] > max) max = s[j];
      }
      let sum = 0;
      for (let j = 0; j < end; j++) {
        s[j] = Math.exp(s[j] - max);
        sum += s[j];
      }
      acc.fill(0);
      for (let j = 0; j < end; j++) {
        const vj = kBase + j * D;
        const w = s[j];
        for (let d = 0; d < D; d++) acc[d] += w * v[vj + d];
      }
      const o = qBase + i * D;
      for (let d = 0; d < D; d++) out[o + d] = end > 0 ? acc[d] / sum : 0;
    }
  }
}

/** Floating-point operations of one call (2 per multiply-add, QKᵀ and PV, attended pairs only). */
export function flops({ B, H, Lq, Lk, D }, causal) {
  let pairs = 0;
  for (let i = 0; i < Lq; i++) pairs += causal ? Math.min(Lk, Math.max(0, i + Lk - Lq + 1)) : Lk;
  return B * H * pairs * 4 * D;
}

const sleep = () => new Promise((ok) => setTimeout(ok, 0));

/**
 * Times the implementations. builds: { simd: MaskAttn (threaded or not), scalar: MaskAttn }.
 * onProgress(fraction, label) is called often; returns { shape, causal, results: [...] }.
 */
export async function runBenchmark(builds, shape, { causal = true, budgetMs = 400, maxReps = 2000, onProgress = () => {}, seed = 7, ort = null } = {}) {
  const { B, H, Lq, Lk, D } = shape;
  const g = normal(rng(seed));
  const q = Float32Array.from({ length: B * H * Lq * D }, g);
  const k = Float32Array.from({ length: B * H * Lk * D }, g);
  const v = Float32Array.from({ length: B * H * Lk * D }, g);
  const work = flops(shape, causal);
  const simd = builds.simd?.backend;
  const simdLabel = `maskattn, WebAssembly SIMD128${simd?.relaxed ? ' + relaxed SIMD (FMA)' : ''}`;
  const impls = [
    { id: 'simd', label: `${simdLabel}, 1 thread`, ma: builds.simd, threads: 1 },
    // The same module with every thread it has (the library runs as many as pay off).
    { id: 'threads', label: `${simdLabel}, ${simd?.threads} threads`, ma: simd?.threads > 1 ? builds.simd : null, threads: simd?.threads },
    { id: 'scalar', label: 'maskattn, WebAssembly scalar', ma: builds.scalar, threads: 1 },
    // onnxruntime-web's standard Attention operator, 1 thread, where it loads; its causal mask is
    // top-left aligned, the same as maskattn's only when Lq = Lk (or with one query row: no mask).
    { id: 'ort', label: 'onnxruntime-web, Attention operator, 1 thread', ort: ort && (!causal || Lq === Lk || Lq === 1) ? ort : null },
    { id: 'js', label: 'plain JavaScript (float32 loops)', ma: null },
  ].filter((impl) => impl.id === 'js' || impl.ma || impl.ort);  // no SIMD128, threads or onnxruntime here: skip those rows
  const results = [];
  const notes = [];
  let reference = null;
  for (let n = 0; n < impls.length; n++) {
    const impl = impls[n];
    let call;
    let output;
    let ws = null;
    let session = null;
    let used = null;
    if (impl.ort) {
      const { Tensor, InferenceSession } = impl.ort;
      try {
        session = await InferenceSession.create(attentionModel(shape, causal && Lq > 1), { executionProviders: ['wasm'] });
      } catch (error) {
        notes.push(`onnxruntime-web could not run this shape: ${error?.message ?? error}`);
        continue;
      }
      const feeds = { Q: new Tensor('float32', q, [B, H, Lq, D]), K: new Tensor('float32', k, [B, H, Lk, D]), V: new Tensor('float32', v, [B, H, Lk, D]) };
      let last = null;
      call = async () => {
        last = await session.run(feeds);
      };
      output = () => last.Y.data;
    } else if (impl.ma) {
      ws = impl.ma.createWorkspace({ q: [B, H, Lq, D], k: [B, H, Lk, D], v: [B, H, Lk, D] });
      ws.q.set(q);
      ws.k.set(k);
      ws.v.set(v);
      const options = { causal, threads: impl.threads };
      call = () => {
        used = ws.run(options).stats?.threadsUsed ?? used;
      };
      output = () => ws.output.slice();
    } else {
      const out = new Float32Array(B * H * Lq * D);
      call = () => jsAttention(q, k, v, out, B, H, Lq, Lk, D, causal);
      output = () => out;
    }
    try {
      onProgress(n / impls.length, impl.label);
      const warm = call();  // warm-up (and the result to compare)
      if (warm && typeof warm.then === 'function') await warm;
      const result = output();
      let maxDiff = 0;
      if (reference) for (let x = 0; x < result.length; x++) maxDiff = Math.max(maxDiff, Math.abs(result[x] - reference[x]));
      else reference = result;
      const t = await timeRuns(call, budgetMs, maxReps, (f) => onProgress((n + f) / impls.length, impl.label));
      results.push({ id: impl.id, label: impl.label, ...t, threads: impl.threads ?? 1, threadsUsed: used ?? (impl.threads ?? 1),
        gflops: t.medianMs > 0 ? work / (t.medianMs * 1e6) : Infinity, maxDiff });
    } finally {
      ws?.dispose();
      await session?.release?.();
    }
    onProgress((n + 1) / impls.length, impl.label);
    await sleep();
  }
  return { shape, causal, flops: work, results, notes };
}

// A decode step of a real model's size: 32 heads, 2048 cached keys, head size 128 (one query per
// head), from a KV cache in each dtype: the time per step, tokens per second, and the cache's bytes.
export const DECODE_STEP = { heads: 32, keys: 2048, headDim: 128, dtypes: ['float32', 'q8', 'q4'] };

export async function runDecodeStep(ma, { budgetMs = 400, maxReps = 200, onProgress = () => {}, seed = 11 } = {}) {
  const { heads: H, keys: L, headDim: D, dtypes } = DECODE_STEP;
  const g = normal(rng(seed));
  const k = { data: Float32Array.from({ length: H * L * D }, g), shape: [1, H, L, D] };
  const v = { data: Float32Array.from({ length: H * L * D }, g), shape: [1, H, L, D] };
  const q = { data: Float32Array.from({ length: H * D }, g), shape: [1, H, 1, D] };
  const rows = [];
  for (let n = 0; n < dtypes.length; n++) {
    const dtype = dtypes[n];
    onProgress(n / dtypes.length, `a decode step from a ${dtype} cache`);
    const cache = ma.createKVCache({ batch: 1, kvHeads: H, capacity: L, headDim: D, dtype });
    try {
      cache.append(k, v);
      cache.attend(q);  // warm-up
      const t = await timeRuns(() => cache.attend(q), budgetMs, maxReps, (f) => onProgress((n + f) / dtypes.length, `a decode step from a ${dtype} cache`));
      rows.push({ dtype, ...t, tokensPerSecond: 1000 / t.medianMs, bytes: cache.byteLength });
    } finally {
      cache.dispose();
    }
    await sleep();
  }
  return { ...DECODE_STEP, threads: ma.backend.threads, build: ma.backend.build, rows };
}
