// The speed panel: times the chosen shape with the SIMD128 build (1 thread, and N threads where the
// page is cross-origin isolated), the scalar build, onnxruntime-web and plain JS, in a Web Worker
// (progress bar while it runs), then a decode step of a real model's size per cache dtype; shows each
// time's median and spread, the core count and threadsUsed, and says plainly who wins and why
// (perf-view.js draws the results; perf-core.js is the benchmark itself).

import { runBenchmark, runDecodeStep } from './perf-core.js';
import { show } from './perf-view.js';

export const PRESETS = [
  { id: 'page', label: 'this page’s shape' },
  { id: '1x4x128x64', label: '4 heads × 128 tokens, D 64', shape: { B: 1, H: 4, Lq: 128, Lk: 128, D: 64 } },
  { id: '1x8x256x64', label: '8 heads × 256 tokens, D 64', shape: { B: 1, H: 8, Lq: 256, Lk: 256, D: 64 } },
  { id: '1x8x512x64', label: '8 heads × 512 tokens, D 64', shape: { B: 1, H: 8, Lq: 512, Lk: 512, D: 64 } },
  { id: '1x8x1024x64', label: '8 heads × 1024 tokens, D 64', shape: { B: 1, H: 8, Lq: 1024, Lk: 1024, D: 64 } },
  { id: 'decode', label: 'decode: 1 query, 4096 keys', shape: { B: 1, H: 8, Lq: 1, Lk: 4096, D: 64 } },
];

function setRunning(p, on) {
  const { els } = p;
  p.running = on;
  els.run.disabled = on;
  els.stop.disabled = !on;
  els.progress.hidden = !on;
  els.root.setAttribute('aria-busy', String(on));
  els.root.dataset.state = on ? 'running' : els.root.dataset.state === 'running' ? 'idle' : els.root.dataset.state ?? 'idle';
}

/** A table of one placeholder cell (td.empty) spanning `span` columns. */
function placeholderRow(span, text) {
  const td = document.createElement('td');
  td.colSpan = span;
  td.className = 'empty';
  td.textContent = text;
  const tr = document.createElement('tr');
  tr.append(td);
  return tr;
}

function progress(els, fraction, label) {
  els.progress.value = fraction;
  els.progress.textContent = `${Math.round(fraction * 100)}%`;
  els.status.textContent = `Timing ${label}… ${Math.round(fraction * 100)}%`;
  // The table says what is happening too (it said "Not run yet" under a moving bar).
  const placeholder = els.table.querySelector('td.empty');
  if (placeholder) placeholder.textContent = `Running: ${Math.round(fraction * 100)}%, timing ${label}…`;
  else if (fraction === 0) els.table.replaceChildren(placeholderRow(6, `Running: 0%, timing ${label}…`));
}

function fail(els, message) {
  els.status.textContent = `The benchmark failed: ${message}`;
  const placeholder = els.table.querySelector('td.empty');
  if (placeholder) placeholder.textContent = `The benchmark failed: ${message}`;
  els.root.dataset.state = 'error';
  console.error('maskattn demo: benchmark failed:', message);
}

function finish(p, result, backend, decodeStep, cores) {
  const said = show(p.els, result, backend, decodeStep, cores);
  p.onResult?.({ ...result, decodeStep, cores, verdicts: said });
}

/** Fallback when module workers are unavailable: the same code on the main thread, yielding between runs. */
async function runHere(p, shape, causal) {
  const { budgetMs } = p;
  try {
    const b = await p.builds();
    const result = await runBenchmark(b, shape, { causal, budgetMs, onProgress: (f, label) => progress(p.els, f * 0.8, label) });
    const decodeStep = await runDecodeStep(b.simd ?? b.scalar, { budgetMs, onProgress: (f, label) => progress(p.els, 0.8 + f * 0.2, label) });
    setRunning(p, false);
    finish(p, result, (b.simd ?? b.scalar).backend, decodeStep, navigator.hardwareConcurrency ?? null);
  } catch (error) {
    setRunning(p, false);
    fail(p.els, error.message);
  }
}

/** Runs in the worker; resolves when it is done, has failed or was stopped (els.stopHandler). */
function runInWorker(p, shape, causal) {
  const { els } = p;
  return new Promise((resolve) => {
    p.worker.onmessage = (e) => {
      const m = e.data;
      if (m.type === 'progress') return progress(els, m.fraction, m.label);
      setRunning(p, false);
      if (m.type === 'done') finish(p, m.result, m.backend, m.decodeStep, m.cores);
      else fail(els, m.message);
      resolve();
    };
    p.worker.onerror = (e) => {
      e.preventDefault();
      setRunning(p, false);
      p.worker?.terminate();
      p.worker = null;
      fail(els, e.message || 'the worker could not start');
      resolve();
    };
    p.worker.postMessage({ shape, causal, budgetMs: p.budgetMs });
    els.stopHandler = () => {
      p.worker?.terminate();
      p.worker = null;
      setRunning(p, false);
      els.status.textContent = 'Stopped.';
      els.root.dataset.state = 'stopped';
      const placeholder = els.table.querySelector('td.empty');
      if (placeholder) placeholder.textContent = 'Stopped before it finished: press “Run the benchmark” to start again.';
      resolve();
    };
  });
}

async function start(p) {
  if (p.running) return;
  const { els } = p;
  const preset = PRESETS.find((x) => x.id === els.preset.value) ?? PRESETS[2];
  const shape = preset.shape ?? p.pageShape();
  const causal = els.causal.checked;
  setRunning(p, true);
  progress(els, 0, 'the SIMD128 build');
  els.summary.textContent = '';
  els.decodeSummary.textContent = '';
  els.decode.replaceChildren(placeholderRow(4, 'Runs after the attention table above.'));
  try {
    p.worker ??= new Worker(new URL('./perf-worker.js', import.meta.url), { type: 'module' });
  } catch {
    p.worker = null;
  }
  await (p.worker ? runInWorker(p, shape, causal) : runHere(p, shape, causal));
}

/**
 * els: { root, preset, causal, run, stop, progress, status, table, summary, decode, decodeSummary };
 * pageShape() -> the demo's current { B, H, Lq, Lk, D }; builds() -> Promise<{simd, scalar}> for the
 * main-thread fallback; onResult(result) for exposing numbers.
 */
export function setupPerf(els, { pageShape, builds, onResult, budgetMs = 400 }) {
  const p = { els, pageShape, builds, onResult, budgetMs, worker: null, running: false };
  for (const preset of PRESETS) {
    const o = document.createElement('option');
    o.value = preset.id;
    o.textContent = preset.label;
    els.preset.append(o);
  }
  els.preset.value = '1x8x256x64';
  const refreshLabel = () => {
    const s = pageShape();
    els.preset.options[0].textContent = `this page (${s.B}×${s.H}×${s.Lk}×${s.D})`;
  };
  els.run.addEventListener('click', () => start(p));
  els.stop.addEventListener('click', () => els.stopHandler?.());
  els.preset.addEventListener('focus', refreshLabel);
  setRunning(p, false);
  refreshLabel();
  return { refreshLabel, start: () => start(p) };
}
