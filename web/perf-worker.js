// Worker running the speed benchmark off the main thread, so the page stays responsive.
import { init, simdSupported } from '../js/index.js';
import { runBenchmark } from './perf-core.js';

let builds = null;

self.addEventListener('message', async (event) => {
  const { shape, causal, budgetMs } = event.data;
  try {
    builds ??= { simd: simdSupported() ? await init({ simd: true }) : null, scalar: await init({ simd: false }) };
    const result = await runBenchmark(builds, shape, {
      causal, budgetMs,
      onProgress: (fraction, label) => self.postMessage({ type: 'progress', fraction, label }),
    });
    self.postMessage({ type: 'done', result, backend: (builds.simd ?? builds.scalar).backend });
  } catch (error) {
    self.postMessage({ type: 'error', message: String(error?.message ?? error) });
  }
});
