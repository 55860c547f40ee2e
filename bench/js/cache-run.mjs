// The KV cache decode step per (WebAssembly build, cache dtype): what bench/js/cache-bench.mjs
// prints in Node and bench/js/chromium-bench.mjs --cache in a page. One step attends one query per
// head over a resident cache. Every dtype the module knows (its kvDtypes) plus q8 keys with q4
// values; each build's read probe (256 MiB summed by that build in this engine, at the thread count
// it is timed at: the step's roofline). Interleaved: each repetition measures every (build, dtype)
// pair in a new random order; two caches of each rotate so K/V do not stay in the CPU's cache;
// medians. Beside it the step's cost per key and KV head from memory and in the CPU's cache: the
// slope between two caches of L/16 and L/8 keys (0.3-8 MiB), each stepped again and again after
// the timed runs so their rows come from the CPU's cache (the slope drops the step's fixed cost).
// "in cache" near 100% of "from memory" means the step is bound by its instructions, not by the
// bytes it reads: fewer bytes cannot make it faster.
//
// cacheSteps is self-contained (no imports, no names from this file) so that a page can run it:
// `indexUrl` is where js/index.js is, relative to the caller (a page's URL, or a file: URL).

/** The builds timed: init() options and the thread count each step asks for. */
export const CACHE_BUILDS = [
  { name: 'simd', options: { simd: true, relaxed: false, threads: 1 }, threads: 1 },
  { name: 'relaxed', options: { simd: true, relaxed: true, threads: 1 }, threads: 1 },
  { name: 'scalar', options: { simd: false }, threads: 1 },
  { name: 'relaxed-threads x1', options: { simd: true, relaxed: true, threads: 2 }, threads: 1 },
  { name: 'relaxed-threads x2', options: { simd: true, relaxed: true, threads: 2 }, threads: 2 },
];

export const CACHE_SHAPES = [
  { name: 'MHA', Hq: 32, Hkv: 32, L: 2048, D: 128 },
  { name: 'GQA', Hq: 32, Hkv: 8, L: 4096, D: 128 },
];

/**
 * Runs the steps; returns { probes: { build: GB/s }, results: [row] } where a row holds the shape,
 * build, dtype, ms (median), gbs, probe_share, vs_f32, ns_per_key (from memory),
 * ns_per_key_in_cache (null at more than 1 thread), error (max |dO| / max |V| against the same
 * build's float32 cache) and cosine.
 * Progress goes to console.error (in a page, its console: bench/js/chromium-bench.mjs forwards it).
 */
export async function cacheSteps({ indexUrl, builds, shapes, reps }) {
  const log = (text) => console.error(text);
  const rng = (seed) => {
    let s = seed >>> 0;
    return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32) * 2 - 1;
  };
  const median = (v) => {
    const s = [...v].sort((a, b) => a - b);
    const n = s.length;
    return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  };
  const maxAbsDiff = (a, b) => a.reduce((d, x, i) => Math.max(d, Math.abs(x - b[i])), 0);
  const cosine = (a, b) => {
    let ab = 0, aa = 0, bb = 0;
    for (let i = 0; i < a.length; i++) { ab += a[i] * b[i]; aa += a[i] * a[i]; bb += b[i] * b[i]; }
    return ab / Math.sqrt(aa * bb);
  };

  const { init } = await import(indexUrl);
  const modules = new Map();
  const timed = [];
  for (const b of builds) {
    const key = JSON.stringify(b.options);
    if (!modules.has(key)) modules.set(key, await init(b.options));
    timed.push({ ...b, ma: modules.get(key) });
  }
  // float32 first (the ratios' base), then the module's other dtypes, then mixed keys/values.
  const dtypes = [...timed[0].ma.kvDtypes.map((name) => ({ name, config: { dtype: name } })),
    { name: 'q8/q4', config: { dtype: 'q8', valueDtype: 'q4' } }];
  // Each build's read bandwidth in this engine at the thread count it is timed at (best of 5).
  const probes = {};
  for (const b of timed) probes[b.name] = b.ma._m.readProbe(256, b.threads, 5);

  const results = [];
  for (const s of shapes) {
    const random = rng(7);
    const fill = (n) => Float32Array.from({ length: n }, () => random());
    const kv = [0, 1].map(() => ({ k: fill(s.Hkv * s.L * s.D), v: fill(s.Hkv * s.L * s.D) }));
    const q = { data: fill(s.Hq * s.D), shape: [1, s.Hq, 1, s.D] };
    let maxV = 0;
    for (const c of kv) for (const x of c.v) maxV = Math.max(maxV, Math.abs(x));
    log(`${s.name}: filling caches...`);
    const pairs = [];
    for (const b of timed) {
      for (const d of dtypes) {
        const caches = kv.map(({ k, v }) => {
          const c = b.ma.createKVCache({ kvHeads: s.Hkv, capacity: s.L, headDim: s.D, ...d.config });
          c.append({ data: k, shape: [1, s.Hkv, s.L, s.D] }, { data: v, shape: [1, s.Hkv, s.L, s.D] });
          return c;
        });
        const small = [16, 8].map((div) => {
          const n = s.L / div;
          const c = b.ma.createKVCache({ kvHeads: s.Hkv, capacity: n, headDim: s.D, ...d.config });
          c.append({ data: fill(s.Hkv * n * s.D), shape: [1, s.Hkv, n, s.D] }, { data: fill(s.Hkv * n * s.D), shape: [1, s.Hkv, n, s.D] });
          return { keys: n, cache: c, times: [] };
        });
        pairs.push({ build: b, dtype: d, caches, small, times: [], out: caches[0].attend(q, { threads: b.threads }).output.data });
      }
    }
    const order = pairs.map((_, i) => i);
    const shuffle = rng(99);
    for (let r = 0; r < reps; r++) {
      for (let j = order.length - 1; j > 0; j--) {
        const k = Math.floor(((shuffle() + 1) / 2) * (j + 1));
        [order[j], order[k]] = [order[k], order[j]];
      }
      for (const i of order) {
        const p = pairs[i];
        const t0 = performance.now();
        p.caches[r % 2].attend(q, { threads: p.build.threads });
        p.times.push(performance.now() - t0);
      }
      if ((r + 1) % 5 === 0) log(`  ${r + 1}/${reps}`);
    }
    // In cache: each small cache's step again and again, the first calls untimed (one call after the
    // big caches' streams measured up to 2x the settled time natively).
    for (const p of pairs)
      for (const sm of p.small)
        for (let i = 0; i < 4 + 3 * reps; i++) {
          const t1 = performance.now();
          sm.cache.attend(q, { threads: p.build.threads });
          if (i >= 4) sm.times.push(performance.now() - t1);
        }
    for (const b of timed) {
      const mine = pairs.filter((p) => p.build === b);
      const f32 = median(mine[0].times);
      for (const p of mine) {
        const ms = median(p.times);
        const gbs = p.caches[0].byteLength / ms / 1e6;
        const [a, c] = p.small;
        results.push({
          shape: s.name, build: b.name, dtype: p.dtype.name, ms, gbs, probe_share: gbs / probes[b.name], vs_f32: f32 / ms,
          // ns per key and KV head: from memory (the whole step), in cache (the small caches' slope;
          // at 1 thread only: split over threads, the small steps are the pool's wake-ups, and
          // their slope came out negative).
          ns_per_key: (ms * 1e6) / (s.Hkv * s.L),
          ns_per_key_in_cache: p.build.threads > 1 ? null
            : ((median(c.times) - median(a.times)) * 1e6) / (s.Hkv * (c.keys - a.keys)),
          error: maxAbsDiff(p.out, mine[0].out) / maxV, cosine: cosine(p.out, mine[0].out),
        });
      }
    }
    for (const p of pairs) for (const c of [...p.caches, ...p.small.map((sm) => sm.cache)]) c.dispose();
  }
  return { probes, results };
}

/** The printed table of cacheSteps' results, one block per shape. */
export function formatCacheSteps({ probes, results }, shapes) {
  const pad = (s, n) => String(s).padEnd(n), lpad = (s, n) => String(s).padStart(n);
  const lines = [`read probe (256 MiB, GB/s): ${Object.entries(probes).map(([b, g]) => `${b} ${g.toFixed(1)}`).join(', ')}`];
  for (const s of shapes) {
    lines.push('', `${s.name}: B=1 Hq=${s.Hq} Hkv=${s.Hkv} Lq=1 L=${s.L} D=${s.D}`,
      `${pad('build', 20)} ${pad('dtype', 8)} ${lpad('ms/step', 9)} ${lpad('GB/s', 7)} ${lpad('% probe', 8)} ${lpad('vs float32', 10)} ` +
      `${lpad('ns/key mem', 11)} ${lpad('in cache', 9)} ${lpad('cache/mem', 10)} ${lpad('err % max|V|', 13)} ${lpad('cosine', 9)}`);
    for (const row of results.filter((r) => r.shape === s.name))
      lines.push(`${pad(row.build, 20)} ${pad(row.dtype, 8)} ${lpad(row.ms.toFixed(3), 9)} ${lpad(row.gbs.toFixed(1), 7)} ` +
        `${lpad(`${(100 * row.probe_share).toFixed(0)}%`, 8)} ${lpad(`${row.vs_f32.toFixed(2)}x`, 10)} ` +
        `${lpad(row.ns_per_key.toFixed(2), 11)} ${lpad(row.ns_per_key_in_cache?.toFixed(2) ?? '-', 9)} ` +
        `${lpad(row.ns_per_key_in_cache == null ? '-' : `${(100 * row.ns_per_key_in_cache / row.ns_per_key).toFixed(0)}%`, 10)} ` +
        `${lpad((100 * row.error).toFixed(4), 13)} ${lpad(row.cosine.toFixed(6), 9)}`);
  }
  return lines.join('\n');
}
