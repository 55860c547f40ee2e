// A tiny app as a user would write it: import the package by name, let the bundler find the wasm,
// run causal attention, and write the numbers to the page (tests/browser/bundler.test.mjs reads them).
import { init } from 'maskattn';

const status = document.getElementById('status');
const result = document.getElementById('result');

// Deterministic inputs: q [1, 2, 5, 8], k and v [1, 1, 7, 8] (GQA: both query heads read kv head 0).
function tensor(shape, seed) {
  const n = shape.reduce((a, b) => a * b, 1);
  return { data: Float32Array.from({ length: n }, (_, i) => Math.sin(seed * 12.9898 + i * 78.233)), shape };
}

async function main() {
  const ma = await init();
  const q = tensor([1, 2, 5, 8], 1);
  const k = tensor([1, 1, 7, 8], 2);
  const v = tensor([1, 1, 7, 8], 3);
  const options = { causal: true, returnLse: true };
  const r = ma.attention(q, k, v, options);
  // A problem big enough for threads to pay off: on a cross-origin isolated page the threaded build
  // runs it on 2 threads (its Web Workers load the bundled glue and worker script).
  const big = tensor([1, 4, 256, 64], 4);
  const one = ma.attention(big, big, big, { causal: true, threads: 1 });
  const two = ma.attention(big, big, big, { causal: true, threads: 2, returnStats: true });
  result.textContent = JSON.stringify({
    backend: { ...ma.backend },
    isolated: globalThis.crossOriginIsolated === true,
    threadsUsed: two.stats.threadsUsed,
    sameAcrossThreads: one.output.data.every((x, i) => Object.is(x, two.output.data[i])),
    inputs: { q: { data: Array.from(q.data), shape: q.shape }, k: { data: Array.from(k.data), shape: k.shape }, v: { data: Array.from(v.data), shape: v.shape } },
    options: { causal: true },
    output: { data: Array.from(r.output.data), shape: r.output.shape },
    lse: Array.from(r.lse.data),
  });
  status.textContent = 'done';
}

main().catch((error) => {
  status.textContent = `error: ${error?.message ?? error}`;
  console.error(error);
});
