// Worker running the speed benchmark off the main thread, so the page stays responsive.
import { init, simdSupported } from '../js/index.js';
import { runBenchmark, runDecodeStep } from './perf-core.js';

let builds = null;
let ort;  // onnxruntime-web (served by the demo server from node_modules), null where it does not load

async function loadOrt() {
  try {
    const m = await import('../node_modules/onnxruntime-web/dist/ort.wasm.min.mjs');
    m.env.wasm.numThreads = 1;  // one thread, as maskattn's first row
    m.env.logLevel = 'error';
    return m;
  } catch {
    return null;
  }
}

self.addEventListener('message', async (event) => {
  const { shape, causal, budgetMs, decode = true } = event.data;
  try {
    builds ??= { simd: simdSupported() ? await init({ simd: true }) : null, scalar: await init({ simd: false }) };
    if (ort === undefined) ort = await loadOrt();
    // The attention table is most of the work; the decode step the last fifth.
    const share = decode ? 0.8 : 1;
    const result = await runBenchmark(builds, shape, {
      causal, budgetMs, ort,
      onProgress: (fraction, label) => self.postMessage({ type: 'progress', fraction: fraction * share, label }),
    });
    if (!ort) result.notes.push('onnxruntime-web did not load here (the demo server serves it from node_modules)');
    const ma = builds.simd ?? builds.scalar;
    const decodeStep = decode ? await runDecodeStep(ma, {
      budgetMs,
      onProgress: (fraction, label) => self.postMessage({ type: 'progress', fraction: share + fraction * (1 - share), label }),
    }) : null;
    self.postMessage({ type: 'done', result, decodeStep, backend: ma.backend, cores: navigator.hardwareConcurrency ?? null });
  } catch (error) {
    self.postMessage({ type: 'error', message: String(error?.message ?? error) });
  }
});
