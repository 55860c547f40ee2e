// RoPE in WebAssembly: one decode step (append one token's K/V, then attend one query per head) on a
// float32 cache created with `rope`, against the same step with Q and K rotated by JavaScript first
// (a separate pass, Math.cos / Math.sin per pair) and a cache without rope, and against no rotation at
// all. Interleaved repetitions, median ms per step. The targets: the fused step at
// most 3% slower than the one without rope, and faster than the separate JavaScript pass.
//
//   node bench/js/rope-bench.mjs [--build maskattn-simd] [--reps N] [--order fused,js,none]
const arg = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const { init } = await import('../../js/index.js');
const { cpus } = await import('node:os');
const build = arg('--build', 'maskattn-simd');
const reps = Number(arg('--reps', 200));
const ma = await init({ build, simd: build.includes('simd'), relaxed: build.includes('relaxed'), threads: 1 });

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const rand = (n) => Float32Array.from({ length: n }, () => Math.random() * 2 - 1);

// The JS pass: rows [H, D] at position pos, pairs (i, i + D/2), a = pos * theta^(-2i/D).
function rotateInPlace(x, H, D, pos, theta) {
  const half = D / 2;
  for (let i = 0; i < half; ++i) {
    const a = pos * theta ** (-2 * i / D), c = Math.cos(a), s = Math.sin(a);
    for (let h = 0; h < H; ++h) {
      const o = h * D, u = x[o + i], w = x[o + i + half];
      x[o + i] = u * c - w * s;
      x[o + i + half] = u * s + w * c;
    }
  }
}

console.log(`${ma.backend.build}, ${reps} repetitions, median ms per decode step (append 1 token + attend); ` +
  `${cpus()[0]?.model ?? 'unknown CPU'}, Node ${process.versions.node}`);
for (const [name, Hq, Hkv, L, D] of [['GQA 1x32/8x2048x128', 32, 8, 2048, 128], ['MHA 1x32/32x1024x128', 32, 32, 1024, 128], ['tiny 1x32/8x16x128', 32, 8, 16, 128]]) {
  const capacity = L + 4 * reps + 16;
  const theta = 500000;
  // Where a cache's blocks land in wasm memory moves its step time: the first cache created here ran
  // 20-25% slower than the next ones whichever it was (none, js or fused), so a stand-in cache is
  // created first and the three follow in the order --order gives.
  const configs = {
    none: { kvHeads: Hkv, capacity, headDim: D },
    js: { kvHeads: Hkv, capacity, headDim: D },
    fused: { kvHeads: Hkv, capacity, headDim: D, rope: { theta } },
  };
  const standIn = ma.createKVCache(configs.none);
  standIn.append({ data: new Float32Array(Hkv * D), shape: [1, Hkv, 1, D] }, { data: new Float32Array(Hkv * D), shape: [1, Hkv, 1, D] });
  const caches = {};
  for (const key of arg('--order', 'fused,js,none').split(',')) caches[key] = ma.createKVCache(configs[key]);
  const k0 = { data: rand(Hkv * L * D), shape: [1, Hkv, L, D] };
  const v0 = { data: rand(Hkv * L * D), shape: [1, Hkv, L, D] };
  for (const c of Object.values(caches)) c.append(k0, v0);
  const q = rand(Hq * D), k = rand(Hkv * D), v = rand(Hkv * D);
  const steps = {
    none: () => {
      caches.none.append({ data: k, shape: [1, Hkv, 1, D] }, { data: v, shape: [1, Hkv, 1, D] });
      return caches.none.attend({ data: q, shape: [1, Hq, 1, D] });
    },
    js: () => {
      const pos = caches.js.lengths[0];
      const kr = k.slice(), qr = q.slice();
      rotateInPlace(kr, Hkv, D, pos, theta);
      rotateInPlace(qr, Hq, D, pos, theta);
      caches.js.append({ data: kr, shape: [1, Hkv, 1, D] }, { data: v, shape: [1, Hkv, 1, D] });
      return caches.js.attend({ data: qr, shape: [1, Hq, 1, D] });
    },
    fused: () => {
      caches.fused.append({ data: k, shape: [1, Hkv, 1, D] }, { data: v, shape: [1, Hkv, 1, D] });
      return caches.fused.attend({ data: q, shape: [1, Hq, 1, D] });
    },
  };
  const times = { none: [], js: [], fused: [] };
  const order = Object.keys(steps);
  for (let r = 0; r < reps + 5; ++r) {
    for (const key of r % 2 ? [...order].reverse() : order) {
      const t0 = performance.now();
      steps[key]();
      if (r >= 5) times[key].push(performance.now() - t0);
    }
  }
  const m = Object.fromEntries(order.map((key) => [key, median(times[key])]));
  console.log(`${name}: no rope ${m.none.toFixed(4)}, JS pass + plain cache ${m.js.toFixed(4)} (${(m.js / m.none).toFixed(3)}x), ` +
    `fused rope ${m.fused.toFixed(4)} (${(m.fused / m.none).toFixed(3)}x; ${(m.js / m.fused).toFixed(3)}x faster than the JS pass)`);
  const met = (ok) => (ok ? 'met' : 'NOT met');
  console.log(`  targets: fused <= 1.03x no rope: ${met(m.fused <= 1.03 * m.none)}; fused faster than the JS pass: ${met(m.fused < m.js)}`);
  for (const c of Object.values(caches)) c.dispose();
  standIn.dispose();
}
