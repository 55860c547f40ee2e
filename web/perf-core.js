// The benchmark behind the speed panel: the same attention timed with maskattn's SIMD128 build on
// one thread and on all its threads (the threaded build, on a cross-origin isolated page), its
// scalar build, and a plain JavaScript implementation. Runs in a worker (perf-worker.js), or on
// the main thread as a fallback, yielding between runs so progress can be shown.

import { rng, normal } from './embedding.js';

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
export async function runBenchmark(builds, shape, { causal = true, budgetMs = 400, maxReps = 2000, onProgress = () => {}, seed = 7 } = {}) {
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
    { id: 'js', label: 'plain JavaScript (float32 loops)', ma: null },
  ].filter((impl) => impl.id === 'js' || impl.ma);  // no SIMD128 or no threads here: skip those rows
  const results = [];
  let reference = null;
  for (let n = 0; n < impls.length; n++) {
    const impl = impls[n];
    let call;
    let output;
    let ws = null;
    if (impl.ma) {
      ws = impl.ma.createWorkspace({ q: [B, H, Lq, D], k: [B, H, Lk, D], v: [B, H, Lk, D] });
      ws.q.set(q);
      ws.k.set(k);
      ws.v.set(v);
      const options = { causal, threads: impl.threads };
      call = () => ws.run(options);
      output = () => ws.output.slice();
    } else {
      const out = new Float32Array(B * H * Lq * D);
      call = () => jsAttention(q, k, v, out, B, H, Lq, Lk, D, causal);
      output = () => out;
    }
    try {
      onProgress(n / impls.length, impl.label);
      call();  // warm-up (and the result to compare)
      const result = output();
      let maxDiff = 0;
      if (reference) for (let x = 0; x < result.length; x++) maxDiff = Math.max(maxDiff, Math.abs(result[x] - reference[x]));
      else reference = result;
      const times = [];
      const start = performance.now();
      let lastYield = start;
      for (;;) {
        const t0 = performance.now();
        call();
        const t1 = performance.now();
        times.push(t1 - t0);
        const elapsed = t1 - start;
        if ((elapsed >= budgetMs && times.length >= 3) || times.length >= maxReps || elapsed > budgetMs * 8) break;
        if (t1 - lastYield > 40) {
          onProgress((n + Math.min(1, elapsed / budgetMs)) / impls.length, impl.label);
          await sleep();
          lastYield = performance.now();
        }
      }
      times.sort((a, b) => a - b);
      const median = times[Math.floor(times.length / 2)];
      results.push({ id: impl.id, label: impl.label, medianMs: median, minMs: times[0], reps: times.length,
        gflops: median > 0 ? work / (median * 1e6) : Infinity, maxDiff });
    } finally {
      ws?.dispose();
    }
    onProgress((n + 1) / impls.length, impl.label);
    await sleep();
  }
  return { shape, causal, flops: work, results };
}
