// One decode step over a resident KV cache per (build, cache dtype, integer dot product), for the
// relaxed-SIMD Q·Kᵀ path over q8/q4 caches (kernel/int_dot/simd128_relaxed.hpp): the plain SIMD128
// build and the relaxed build on 1 thread, the relaxed build once per dot product the module
// accepts (module.setQuantDot: the probed one, the exact i16 path, the other relaxed form).
// Mixed caches (q8 keys / float32 values and the reverse) are timed too, but they run slower than
// either pure cache, so they do not split Q·Kᵀ from P·V (measured instead with a build whose
// relaxed dot returned at once: P·V and the rest are 61-74% of a q8 GQA step). Interleaved: every
// repetition runs each row once in a new random order, two caches of each rotate (so K/V are not
// left in the CPU's cache); medians.
//
// Self-contained (no imports), so that bench/js/chromium-bench.mjs can run decodeSteps in a page
// and bench/js/quant-dot-bench.mjs in Node: `indexUrl` is where js/index.js is.
export async function decodeSteps({ indexUrl, shapes, reps }) {
  const { init } = await import(indexUrl);
  const plain = await init({ simd: true, relaxed: false, threads: 1 });
  const relaxed = await init({ simd: true, relaxed: true, threads: 1 });
  const probed = relaxed.backend.quantDot;
  const dots = ['relaxed-i8', 'relaxed-i8-i16x8', 'i16'].filter((m) => relaxed._m.setQuantDot(m));
  relaxed._m.setQuantDot(probed);
  const builds = [['SIMD128', plain, ['i16']], ['relaxed', relaxed, dots]];
  const dtypes = [
    ['float32', { dtype: 'float32' }, false], ['q8', { dtype: 'q8' }, true], ['q4', { dtype: 'q4' }, true],
    ['q8 K, float32 V', { keyDtype: 'q8', valueDtype: 'float32' }, true], ['float32 K, q8 V', { keyDtype: 'float32', valueDtype: 'q8' }, false],
  ];
  let seed = 7;
  const random = () => ((seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 2 ** 32) * 2 - 1;
  const out = { probed, dots, rows: [] };
  for (const s of shapes) {
    const k = Float32Array.from({ length: s.Hkv * s.L * s.D }, random), v = Float32Array.from({ length: s.Hkv * s.L * s.D }, random);
    const q = { data: Float32Array.from({ length: s.Hq * s.D }, random), shape: [1, s.Hq, 1, s.D] };
    const rows = [], caches = [];
    for (const [build, ma, buildDots] of builds)
      for (const [dtype, config, quantKeys] of dtypes) {
        const pair = [0, 1].map(() => {
          const c = ma.createKVCache({ kvHeads: s.Hkv, capacity: s.L, headDim: s.D, keyRotation: 'none', ...config });
          c.append({ data: k, shape: [1, s.Hkv, s.L, s.D] }, { data: v, shape: [1, s.Hkv, s.L, s.D] });
          return c;
        });
        caches.push(...pair);
        for (const dot of quantKeys ? buildDots : [null]) {
          const run = (r) => {
            if (dot) ma._m.setQuantDot(dot);
            const t0 = performance.now();
            pair[r % 2].attend(q);
            return performance.now() - t0;
          };
          for (let w = 0; w < 3; ++w) run(w);  // warm up (Chromium tiers up in the background)
          rows.push({ shape: s.name, build, dtype, dot, run, times: [] });
        }
      }
    for (let r = 0; r < reps; ++r) {
      const order = rows.map((_, i) => i).sort(() => random());
      for (const i of order) rows[i].times.push(rows[i].run(r));
    }
    for (const c of caches) c.dispose();
    for (const row of rows) {
      const t = [...row.times].sort((a, b) => a - b);
      out.rows.push({ shape: row.shape, build: row.build, dtype: row.dtype, dot: row.dot, ms: t[t.length >> 1], min: t[0] });
    }
  }
  relaxed._m.setQuantDot(probed);
  return out;
}

/**
 * The table of decodeSteps' rows: median and best ms; vs the same build's float32 cache and vs the
 * SIMD128 build's q8, from the best times (steadier than medians on a shared machine).
 */
export function formatDecodeSteps(out) {
  const lines = [`relaxed build's probe chose quantDot '${out.probed}'; accepted: ${out.dots.join(', ')}`];
  for (const shape of [...new Set(out.rows.map((r) => r.shape))]) {
    const rows = out.rows.filter((r) => r.shape === shape);
    const f32 = (build) => rows.find((r) => r.build === build && r.dtype === 'float32').min;
    const plainQ8 = rows.find((r) => r.build === 'SIMD128' && r.dtype === 'q8').min;
    lines.push('', `${shape}`, `${'build'.padEnd(9)} ${'cache'.padEnd(16)} ${'quantDot'.padEnd(17)} ${'median'.padStart(8)} ${'best'.padStart(8)} ${'vs float32'.padStart(11)} ${'vs SIMD128 q8'.padStart(14)}`);
    for (const r of rows)
      lines.push(`${r.build.padEnd(9)} ${r.dtype.padEnd(16)} ${(r.dot ?? '-').padEnd(17)} ${r.ms.toFixed(3).padStart(8)} ${r.min.toFixed(3).padStart(8)} ` +
        `${(f32(r.build) / r.min).toFixed(2).padStart(10)}x ${(plainQ8 / r.min).toFixed(2).padStart(13)}x`);
  }
  return lines.join('\n');
}

export const DECODE_SHAPES = [
  { name: 'GQA 1 x 32/8 x 4096 x 128', Hq: 32, Hkv: 8, L: 4096, D: 128 },
  { name: 'MHA 1 x 32/32 x 2048 x 128', Hq: 32, Hkv: 32, L: 2048, D: 128 },
];
