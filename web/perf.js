// The speed panel: times the chosen shape with the SIMD128 build (1 thread, and N threads where the
// page is cross-origin isolated), the scalar build and plain JS, in a Web Worker (progress bar while
// it runs), and shows the speed-ups.

import { runBenchmark } from './perf-core.js';
import { full } from './heatmap.js';

export const PRESETS = [
  { id: 'page', label: 'this page’s shape' },
  { id: '1x4x128x64', label: '4 heads × 128 tokens, D 64', shape: { B: 1, H: 4, Lq: 128, Lk: 128, D: 64 } },
  { id: '1x8x256x64', label: '8 heads × 256 tokens, D 64', shape: { B: 1, H: 8, Lq: 256, Lk: 256, D: 64 } },
  { id: '1x8x512x64', label: '8 heads × 512 tokens, D 64', shape: { B: 1, H: 8, Lq: 512, Lk: 512, D: 64 } },
  { id: '1x8x1024x64', label: '8 heads × 1024 tokens, D 64', shape: { B: 1, H: 8, Lq: 1024, Lk: 1024, D: 64 } },
  { id: 'decode', label: 'decode: 1 query, 4096 keys', shape: { B: 1, H: 8, Lq: 1, Lk: 4096, D: 64 } },
];

const fmtMs = (ms) => (ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms >= 1 ? ms.toFixed(2) : ms.toFixed(3));

/**
 * els: { preset, causal, run, stop, progress, status, table, summary }; pageShape() -> the demo's
 * current { B, H, Lq, Lk, D }; builds() -> Promise<{simd, scalar}> for the main-thread fallback;
 * onResult(result) for exposing numbers.
 */
export function setupPerf(els, { pageShape, builds, onResult, budgetMs = 400 }) {
  let worker = null;
  let running = false;

  for (const p of PRESETS) {
    const o = document.createElement('option');
    o.value = p.id;
    o.textContent = p.label;
    els.preset.append(o);
  }
  els.preset.value = '1x8x256x64';

  const shapeOf = () => {
    const p = PRESETS.find((x) => x.id === els.preset.value) ?? PRESETS[2];
    return p.shape ?? pageShape();
  };
  const describeShape = (s) => `B=${s.B}, H=${s.H}, Lq=${s.Lq}, Lk=${s.Lk}, D=${s.D}`;
  const refreshLabel = () => {
    const s = pageShape();
    els.preset.options[0].textContent = `this page (${s.B}×${s.H}×${s.Lk}×${s.D})`;
  };

  const setRunning = (on) => {
    running = on;
    els.run.disabled = on;
    els.stop.disabled = !on;
    els.progress.hidden = !on;
    els.root.setAttribute('aria-busy', String(on));
    els.root.dataset.state = on ? 'running' : els.root.dataset.state === 'running' ? 'idle' : els.root.dataset.state ?? 'idle';
  };
  const progress = (fraction, label) => {
    els.progress.value = fraction;
    els.progress.textContent = `${Math.round(fraction * 100)}%`;
    els.status.textContent = `Timing ${label}… ${Math.round(fraction * 100)}%`;
    // The table says what is happening too (it said "Not run yet" under a moving bar).
    const placeholder = els.table.querySelector('td.empty');
    if (placeholder) placeholder.textContent = `Running: ${Math.round(fraction * 100)}%, timing ${label}…`;
    else if (fraction === 0) {
      const td = document.createElement('td');
      td.colSpan = 6;
      td.className = 'empty';
      td.textContent = `Running: 0%, timing ${label}…`;
      const tr = document.createElement('tr');
      tr.append(td);
      els.table.replaceChildren(tr);
    }
  };

  const show = (result, backend) => {
    const { results } = result;
    const js = results.find((r) => r.id === 'js');
    const scalar = results.find((r) => r.id === 'scalar');
    const simd = results.find((r) => r.id === 'simd');
    const threads = results.find((r) => r.id === 'threads');
    els.table.replaceChildren();
    const maxG = Math.max(...results.map((r) => r.gflops));
    for (const r of results) {
      const tr = document.createElement('tr');
      tr.dataset.impl = r.id;
      tr.dataset.ms = r.medianMs;
      tr.dataset.gflops = r.gflops;
      const cells = [
        r.label,
        `${fmtMs(r.medianMs)} ms`,
        `${r.gflops.toFixed(2)}`,
        js && r.medianMs > 0 ? `${(js.medianMs / r.medianMs).toFixed(1)}×` : '–',
        r.id === 'simd' ? 'reference' : full(r.maxDiff),
      ];
      cells.forEach((text, n) => {
        const td = document.createElement(n === 0 ? 'th' : 'td');
        if (n === 0) td.scope = 'row';
        td.textContent = text;
        tr.append(td);
      });
      const bar = document.createElement('td');
      bar.className = 'bar-cell';
      const meter = document.createElement('meter');
      meter.min = 0;
      meter.max = maxG;
      meter.value = r.gflops;
      meter.textContent = `${r.gflops.toFixed(2)} GFLOP/s`;
      meter.setAttribute('aria-label', `${r.label}: ${r.gflops.toFixed(2)} GFLOP/s`);
      bar.append(meter);
      tr.append(bar);
      els.table.append(tr);
    }
    const parts = [];
    if (simd && js) parts.push(`SIMD128 is ${(js.medianMs / simd.medianMs).toFixed(1)}× faster than plain JS`);
    if (simd && scalar) parts.push(`${(scalar.medianMs / simd.medianMs).toFixed(1)}× faster than the scalar build`);
    if (!simd && scalar && js) parts.push(`the scalar build is ${(js.medianMs / scalar.medianMs).toFixed(1)}× faster than plain JS (this engine has no SIMD128)`);
    if (simd && threads) parts.push(`${backend.threads} threads run at ${(simd.medianMs / threads.medianMs).toFixed(2)}× the speed of 1`);
    else if (simd) parts.push(backend.threads > 1 ? '' : 'one thread: threads need a cross-origin isolated page (COOP/COEP headers)');
    const strong = document.createElement('strong');
    strong.textContent = `${parts.filter(Boolean).join(', ')}.`;
    els.summary.replaceChildren(strong, ` ${describeShape(result.shape)}, ${result.causal ? 'causal' : 'no mask'}, ` +
      `${(result.flops / 1e6).toFixed(1)} MFLOP per call; the median of repeated runs in a worker ` +
      `(build ${backend.build}, ${backend.threads} thread${backend.threads > 1 ? 's' : ''}).`);
    els.status.textContent = 'Done.';
    els.root.dataset.state = 'done';
    onResult?.(result);
  };

  const fail = (message) => {
    els.status.textContent = `The benchmark failed: ${message}`;
    const placeholder = els.table.querySelector('td.empty');
    if (placeholder) placeholder.textContent = `The benchmark failed: ${message}`;
    els.root.dataset.state = 'error';
    console.error('maskattn demo: benchmark failed:', message);
  };

  async function runHere(shape, causal) {
    // Fallback when module workers are unavailable: same code on the main thread, yielding between runs.
    const result = await runBenchmark(await builds(), shape, { causal, budgetMs, onProgress: progress });
    return { result, backend: (await builds()).simd?.backend ?? (await builds()).scalar.backend };
  }

  async function start() {
    if (running) return;
    const shape = shapeOf();
    const causal = els.causal.checked;
    setRunning(true);
    progress(0, 'the SIMD128 build');
    els.summary.textContent = '';
    try {
      worker ??= new Worker(new URL('./perf-worker.js', import.meta.url), { type: 'module' });
    } catch {
      worker = null;
    }
    if (!worker) {
      try {
        const { result, backend } = await runHere(shape, causal);
        setRunning(false);
        show(result, backend);
      } catch (error) {
        setRunning(false);
        fail(error.message);
      }
      return;
    }
    await new Promise((resolve) => {
      worker.onmessage = (e) => {
        const m = e.data;
        if (m.type === 'progress') progress(m.fraction, m.label);
        else {
          setRunning(false);
          if (m.type === 'done') show(m.result, m.backend);
          else fail(m.message);
          resolve();
        }
      };
      worker.onerror = (e) => {
        e.preventDefault();
        setRunning(false);
        worker?.terminate();
        worker = null;
        fail(e.message || 'the worker could not start');
        resolve();
      };
      worker.postMessage({ shape, causal, budgetMs });
      els.stopHandler = () => {
        worker?.terminate();
        worker = null;
        setRunning(false);
        els.status.textContent = 'Stopped.';
        els.root.dataset.state = 'stopped';
        const placeholder = els.table.querySelector('td.empty');
        if (placeholder) placeholder.textContent = 'Stopped before it finished: press “Run the benchmark” to start again.';
        resolve();
      };
    });
  }

  els.run.addEventListener('click', start);
  els.stop.addEventListener('click', () => els.stopHandler?.());
  els.preset.addEventListener('focus', refreshLabel);
  setRunning(false);
  refreshLabel();
  return { refreshLabel, start };
}
