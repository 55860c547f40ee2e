// Node benchmark: maskattn (SIMD128 and scalar builds) against onnxruntime-web's wasm backend
// running the standard ONNX Attention operator (opset 23), same inputs, one thread each.
//   node bench/js/node-bench.mjs [--quick]
// Times are the best of several runs (wall clock) after a warm-up; "vs ort" is ORT time / ours.
import * as ort from 'onnxruntime-web';

import { init } from '../../js/index.js';
import { attentionModel, ONNX_FLOAT } from '../../tests/js/onnx-model.mjs';

const quick = process.argv.includes('--quick');
ort.env.wasm.numThreads = 1;  // one core for everyone
ort.env.logLevel = 'error';

const cases = [
  { name: 'causal 1x12x1024x64', B: 1, H: 12, L: 1024, D: 64, causal: true },
  { name: 'dense 1x12x1024x64', B: 1, H: 12, L: 1024, D: 64, causal: false },
  { name: 'causal 1x8x512x64', B: 1, H: 8, L: 512, D: 64, causal: true },
  { name: 'small 1x1x16x16', B: 1, H: 1, L: 16, D: 16, causal: true },
];

function rng(seed) {
  let s = seed >>> 0;
  return () => ((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32) * 2 - 1;
}

async function best(fn, budgetMs) {
  await fn();  // warm up
  let bestMs = Infinity, spent = 0, reps = 0;
  while (spent < budgetMs || reps < 3) {
    const t0 = performance.now();
    await fn();
    const ms = performance.now() - t0;
    bestMs = Math.min(bestMs, ms);
    spent += ms;
    ++reps;
  }
  return bestMs;
}

const simd = await init({ simd: true });
const scalar = await init({ simd: false });
console.log(`maskattn ${simd.backend.version}: ${simd.backend.arch} (${simd.backend.lanes} lanes) and scalar; onnxruntime-web ${ort.env.versions?.web ?? ''} wasm, 1 thread`);
console.log(`${'case'.padEnd(22)} ${'impl'.padEnd(22)} ${'ms/call'.padStart(10)} ${'GFLOP/s'.padStart(9)} ${'vs ort'.padStart(8)}`);

for (const c of cases) {
  const n = c.B * c.H * c.L * c.D;
  const r = rng(7);
  const make = () => Float32Array.from({ length: n }, r);
  const q = { data: make(), shape: [c.B, c.H, c.L, c.D] };
  const k = { data: make(), shape: [c.B, c.H, c.L, c.D] };
  const v = { data: make(), shape: [c.B, c.H, c.L, c.D] };
  const pairs = c.causal ? (c.L * (c.L + 1)) / 2 : c.L * c.L;
  const flops = 4 * c.D * pairs * c.B * c.H;
  const budget = quick || c.L <= 16 ? 300 : 2000;

  const model = attentionModel({
    inputs: ['Q', 'K', 'V'].map((name) => ({ name, type: ONNX_FLOAT, shape: [c.B, c.H, c.L, c.D] })),
    outputs: [{ name: 'Y', type: ONNX_FLOAT, shape: null }],
    attributes: { is_causal: c.causal ? 1 : 0 },  // top-left = bottom-right when Lq == Lk
  });
  const session = await ort.InferenceSession.create(model, { executionProviders: ['wasm'] });
  const feeds = {
    Q: new ort.Tensor('float32', q.data, q.shape), K: new ort.Tensor('float32', k.data, k.shape),
    V: new ort.Tensor('float32', v.data, v.shape),
  };
  const ortMs = await best(() => session.run(feeds), budget);
  await session.release();

  const ws = simd.createWorkspace({ q: q.shape, k: k.shape, v: v.shape });
  ws.q.set(q.data); ws.k.set(k.data); ws.v.set(v.data);
  const rows = [
    ['onnxruntime-web', ortMs],
    ['maskattn simd128', await best(() => simd.attention(q, k, v, { causal: c.causal }), budget)],
    ['maskattn simd128 (ws)', await best(() => ws.run({ causal: c.causal }), budget)],
    ['maskattn scalar', await best(() => scalar.attention(q, k, v, { causal: c.causal }), quick ? 300 : 1000)],
  ];
  ws.dispose();
  for (const [impl, ms] of rows)
    console.log(`${c.name.padEnd(22)} ${impl.padEnd(22)} ${ms.toFixed(3).padStart(10)} ${(flops / ms / 1e6).toFixed(1).padStart(9)} ${(ortMs / ms).toFixed(2).padStart(7)}x`);
}
