// Node benchmark, WebAssembly: one decode step (attend one query per head over a resident KV cache)
// for every cache dtype (float32, float16, q8, q4, q8 keys / q4 values, bfloat16) in every wasm build (SIMD128,
// relaxed SIMD, scalar, and the threaded relaxed build at 1 and 2 threads), with each build's
// read probe (256 MiB summed by that build in this engine: the step's roofline), on the MHA shape
// 1 x 32/32 x 2048 x 128 and the GQA shape 1 x 32/8 x 4096 x 128. Interleaved: each repetition
// measures every (build, dtype) pair in a new random order; two caches of each rotate so K/V do not
// stay in the CPU cache; medians. Prints ms per step, GB/s of K/V read, the ratio to the float32
// cache of the same build, its share of the build's read probe at the same thread count, and each
// dtype's error against float32 (max |dO| / max |V|, cosine). Beside it, the step's cost per key
// and KV head from memory and in the CPU's cache: the slope between two caches of L/16 and L/8 keys
// (0.3-8 MiB), each stepped again and again after the timed runs, so their rows come from the CPU's
// cache, and the slope drops the step's fixed cost. "in cache" near 100% of "from memory" means the step
// is bound by its instructions, not by the bytes it reads: fewer bytes cannot make it faster.
//
//   node bench/js/cache-bench.mjs [--quick] [--shape mha|gqa|both] [--json FILE]
import v8 from 'node:v8';

v8.setFlagsFromString('--experimental-wasm-relaxed-simd');
const { init } = await import('../../js/index.js');
const { cosine, lpad, machine, maxAbsDiff, median, pad, rng, writeJson } = await import('./common.mjs');

const argv = process.argv.slice(2);
const args = { quick: false, shape: 'both', json: null };
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === '--quick') args.quick = true;
  else if (argv[i] === '--shape') args.shape = argv[++i];
  else if (argv[i] === '--json') args.json = argv[++i];
  else throw new Error(`unknown argument ${argv[i]} (known: --quick, --shape mha|gqa|both, --json FILE)`);
}
const REPS = args.quick ? 7 : 21;

const BUILDS = [
  { name: 'simd', options: { simd: true, relaxed: false, threads: 1 }, threads: 1 },
  { name: 'relaxed', options: { simd: true, relaxed: true, threads: 1 }, threads: 1 },
  { name: 'scalar', options: { simd: false }, threads: 1 },
  { name: 'relaxed-threads x1', options: { simd: true, relaxed: true, threads: 2 }, threads: 1 },
  { name: 'relaxed-threads x2', options: { simd: true, relaxed: true, threads: 2 }, threads: 2 },
];
const DTYPES = [
  { name: 'float32', config: { dtype: 'float32' } },
  { name: 'float16', config: { dtype: 'float16' } },
  { name: 'q8', config: { dtype: 'q8' } },
  { name: 'q4', config: { dtype: 'q4' } },
  { name: 'q8/q4', config: { dtype: 'q8', valueDtype: 'q4' } },
  { name: 'bfloat16', config: { dtype: 'bfloat16' } },
];
const SHAPES = [
  { name: 'MHA', Hq: 32, Hkv: 32, L: 2048, D: 128 },
  { name: 'GQA', Hq: 32, Hkv: 8, L: 4096, D: 128 },
].filter((s) => args.shape === 'both' || s.name.toLowerCase() === args.shape);

const modules = new Map();
for (const b of BUILDS) {
  const key = JSON.stringify(b.options);
  if (!modules.has(key)) modules.set(key, await init(b.options));
  b.ma = modules.get(key);
}
// Each build's read bandwidth in this engine at the thread counts it is timed at (best of 5).
for (const b of BUILDS) b.probe = b.ma._m.readProbe(256, b.threads, 5);
const info = machine();
console.log(`KV cache decode step in WebAssembly (Node ${process.versions.node}), ${info.cpu}, ${info.cores} cores; ${info.date}` +
  `${args.quick ? ' (QUICK run)' : ''}; median of ${REPS}`);
console.log(`read probe (256 MiB, GB/s): ${BUILDS.map((b) => `${b.name} ${b.probe.toFixed(1)}`).join(', ')}`);

const results = [];
for (const s of SHAPES) {
  const random = rng(7);
  const fill = (n) => Float32Array.from({ length: n }, () => random());
  const kv = [0, 1].map(() => ({ k: fill(s.Hkv * s.L * s.D), v: fill(s.Hkv * s.L * s.D) }));
  const q = { data: fill(s.Hq * s.D), shape: [1, s.Hq, 1, s.D] };
  let maxV = 0;
  for (const c of kv) for (const x of c.v) maxV = Math.max(maxV, Math.abs(x));
  process.stderr.write(`${s.name}: filling caches...\n`);
  const pairs = [];
  for (const b of BUILDS) {
    for (const d of DTYPES) {
      const caches = kv.map(({ k, v }) => {
        const c = b.ma.createKVCache({ kvHeads: s.Hkv, capacity: s.L, headDim: s.D, ...d.config });
        c.append({ data: k, shape: [1, s.Hkv, s.L, s.D] }, { data: v, shape: [1, s.Hkv, s.L, s.D] });
        return c;
      });
      // Two small caches (L/16 and L/8 keys) for the in-cache cost per key.
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
  for (let r = 0; r < REPS; r++) {
    for (let j = order.length - 1; j > 0; j--) {
      const k = Math.floor(((shuffle() + 1) / 2) * (j + 1));
      [order[j], order[k]] = [order[k], order[j]];
    }
    for (const i of order) {
      const p = pairs[i];
      const cache = p.caches[r % 2];
      const t0 = performance.now();
      cache.attend(q, { threads: p.build.threads });
      p.times.push(performance.now() - t0);
    }
    if ((r + 1) % 5 === 0) process.stderr.write(`  ${r + 1}/${REPS}\n`);
  }
  // In cache: each small cache's step again and again, the first calls untimed (one call after the
  // big caches' streams measured up to 2x the settled time natively).
  for (const p of pairs)
    for (const sm of p.small)
      for (let i = 0; i < 4 + 3 * REPS; i++) {
        const t1 = performance.now();
        sm.cache.attend(q, { threads: p.build.threads });
        if (i >= 4) sm.times.push(performance.now() - t1);
      }
  console.log(`\n${s.name}: B=1 Hq=${s.Hq} Hkv=${s.Hkv} Lq=1 L=${s.L} D=${s.D}`);
  console.log(`${pad('build', 20)} ${pad('dtype', 8)} ${lpad('ms/step', 9)} ${lpad('GB/s', 7)} ${lpad('% probe', 8)} ${lpad('vs float32', 10)} ` +
    `${lpad('ns/key mem', 11)} ${lpad('in cache', 9)} ${lpad('cache/mem', 10)} ${lpad('err % max|V|', 13)} ${lpad('cosine', 9)}`);
  for (const b of BUILDS) {
    const mine = pairs.filter((p) => p.build === b);
    const f32 = median(mine[0].times);
    for (const p of mine) {
      const ms = median(p.times);
      const bytes = p.caches[0].byteLength;
      const ref = mine[0].out;
      const row = { shape: s.name, build: b.name, dtype: p.dtype.name, ms, gbs: bytes / ms / 1e6, vs_f32: f32 / ms,
        error: maxAbsDiff(p.out, ref) / maxV, cosine: cosine(p.out, ref) };
      row.probe_share = row.gbs / b.probe;
      // ns per key and KV head: from memory (the whole step), in cache (the small caches' slope).
      row.ns_per_key = (ms * 1e6) / (s.Hkv * s.L);
      const [a, c] = p.small;
      row.ns_per_key_in_cache = ((median(c.times) - median(a.times)) * 1e6) / (s.Hkv * (c.keys - a.keys));
      results.push(row);
      console.log(`${pad(b.name, 20)} ${pad(row.dtype, 8)} ${lpad(ms.toFixed(3), 9)} ${lpad(row.gbs.toFixed(1), 7)} ` +
        `${lpad(`${(100 * row.probe_share).toFixed(0)}%`, 8)} ${lpad(`${row.vs_f32.toFixed(2)}x`, 10)} ` +
        `${lpad(row.ns_per_key.toFixed(2), 11)} ${lpad(row.ns_per_key_in_cache.toFixed(2), 9)} ` +
        `${lpad(`${(100 * row.ns_per_key_in_cache / row.ns_per_key).toFixed(0)}%`, 10)} ` +
        `${lpad((100 * row.error).toFixed(4), 13)} ${lpad(row.cosine.toFixed(6), 9)}`);
    }
  }
  for (const p of pairs) for (const c of [...p.caches, ...p.small.map((sm) => sm.cache)]) c.dispose();
}
writeJson(args.json, { machine: info, node: process.versions.node, quick: args.quick, reps: REPS, results });
