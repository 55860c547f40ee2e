// Node benchmark, WebAssembly (the build init() picks): decode over a paged cache (and over a forked
// sequence sharing its pages) against the contiguous cache, and verification of a 16-node draft tree
// against one decode step, on the GQA shape 1 x 32/8 x 4096 x 128, float32 and q8. Interleaved:
// every repetition measures every variant in a new random order; two caches of each rotate so K/V do
// not stay in the CPU cache; medians. The native twin is build/.../bench/maskattn_generation_bench.
//
//   node bench/js/paged-bench.mjs [--quick]
import v8 from 'node:v8';

v8.setFlagsFromString('--experimental-wasm-relaxed-simd');
const { init } = await import('../../js/index.js');
const { machine, median, rng } = await import('./common.mjs');

const quick = process.argv.includes('--quick');
const REPS = quick ? 9 : 31;
const [Hq, Hkv, L, D, T] = [32, 8, 4096, 128, 16];
const TREE = [-1, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 5, 5, 8, 8, 11];

const ma = await init();
const info = machine();
console.log(`paged and forked caches, tree verification in WebAssembly (${ma.backend.build}, ${ma.backend.threads} thread${ma.backend.threads > 1 ? 's' : ''}, Node ${process.versions.node}), ` +
  `${info.cpu}; ${info.date}${quick ? ' (QUICK run)' : ''}; B=1 Hq=${Hq} Hkv=${Hkv} L=${L} D=${D}, median of ${REPS}`);

const random = rng(5);
const fill = (n) => Float32Array.from({ length: n }, () => random());
const k = fill(2 * Hkv * L * D), v = fill(2 * Hkv * L * D);
const qAll = fill(2 * Hq * T * D);
const q = { data: qAll.subarray(0, Hq * D), shape: [1, Hq, 1, D] };
const q2 = { data: qAll.subarray(0, 2 * Hq * D), shape: [2, Hq, 1, D] };
const qTree = { data: qAll.subarray(0, Hq * T * D), shape: [1, Hq, T, D] };

const variants = [];
for (const dtype of ['float32', 'q8']) {
  const make = (name, config, { forked = false, tree = false } = {}) => {
    const caches = [0, 1].map(() => {
      const c = ma.createKVCache({ batch: forked ? 2 : 1, kvHeads: Hkv, capacity: L, headDim: D, dtype, ...config });
      if (forked) {
        c.append({ data: k, shape: [2, Hkv, L, D] }, { data: v, shape: [2, Hkv, L, D] }, { counts: [L, 0] });
        c.fork(0, 1);
      } else {
        c.append({ data: k.subarray(0, Hkv * L * D), shape: [1, Hkv, L, D] }, { data: v.subarray(0, Hkv * L * D), shape: [1, Hkv, L, D] });
      }
      return c;
    });
    const call = tree ? (c) => c.attend(qTree, { tree: TREE }) : forked ? (c) => c.attend(q2) : (c) => c.attend(q);
    variants.push({ name: `${dtype} ${name}`, caches, call, perSequence: forked ? 2 : 1, times: [], group: dtype });
  };
  make('contiguous', {});
  make('paged 256', { pageSize: 256 });
  make('paged 64', { pageSize: 64 });
  make('forked, paged 256', { pageSize: 256 }, { forked: true });
  make('tree of 16', {}, { tree: true });
}

let turn = 0;
for (let r = 0; r < REPS; r++) {
  const order = variants.map((_, i) => i).sort(() => random() - 0.5);
  for (const i of order) {
    const x = variants[i];
    x.call(x.caches[turn++ % 2]);  // warm the code path
    const c = x.caches[turn++ % 2];
    const t0 = performance.now();
    x.call(c);
    x.times.push((performance.now() - t0) / x.perSequence);
  }
}
for (const group of ['float32', 'q8']) {
  const rows = variants.filter((x) => x.group === group);
  const base = median(rows[0].times);
  for (const [n, x] of rows.entries()) {
    const t = median(x.times);
    const target = n === 4 ? ' (target <= 1.3x)' : n > 0 ? ' (target <= 1.05x)' : '';
    console.log(`  ${x.name.padEnd(26)} ${t.toFixed(3).padStart(8)} ms   ${(t / base).toFixed(3)}x the contiguous decode step${target}`);
  }
}
for (const x of variants) for (const c of x.caches) c.dispose();
