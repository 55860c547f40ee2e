// The speed panel: times the chosen shape with the SIMD128 build (1 thread, and N threads where the
// page is cross-origin isolated), the scalar build, onnxruntime-web and plain JS, in a Web Worker
// (progress bar while it runs), then a decode step of a real model's size per cache dtype; shows each
// time's median and spread, the core count and threadsUsed, and says plainly who wins and why.

import { runBenchmark, runDecodeStep } from './perf-core.js';
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

  const range = (r) => `${fmtMs(r.medianMs)} ms (${fmtMs(r.minMs)}–${fmtMs(r.maxMs)})`;
  // Spread: a wide one (the slowest run several times the fastest) says the machine was busy.
  const busy = (r) => r.maxMs > 3 * r.minMs;

  /** The verdicts, said plainly: who wins, and why when it is not the one expected. */
  function verdicts(result, backend, cores) {
    const { results } = result;
    const by = (id) => results.find((r) => r.id === id);
    const [simd, threads, scalar, ort, js] = ['simd', 'threads', 'scalar', 'ort', 'js'].map(by);
    const best = simd ?? scalar;
    const mflop = result.flops / 1e6;
    const out = [];
    if (best && js) {
      if (js.medianMs < best.medianMs)
        out.push(`Plain JavaScript wins here (${fmtMs(js.medianMs)} ms against ${fmtMs(best.medianMs)} ms): at ${mflop.toFixed(mflop < 1 ? 3 : 1)} MFLOP the work is smaller than a call’s fixed cost ` +
          '(validating the call, copying Q, K and V into WebAssembly and the output out); maskattn pays off on larger shapes.');
      else out.push(`${simd ? 'SIMD128' : 'The scalar build'} is ${(js.medianMs / best.medianMs).toFixed(1)}× faster than plain JavaScript` +
        `${simd && scalar ? ` and ${(scalar.medianMs / simd.medianMs).toFixed(1)}× faster than the scalar build` : ''}.`);
    }
    if (simd && threads) {
      const used = threads.threadsUsed;
      if (threads.medianMs >= simd.medianMs) {
        const why = used < threads.threads
          ? `maskattn used ${used} of its ${threads.threads} threads (threadsUsed), as this shape is too small to share out`
          : busy(threads) || busy(simd) || (cores ?? 2) <= threads.threads
            ? `the machine is busy or has few cores (${cores ?? '?'} cores; the runs spread ${fmtMs(threads.minMs)}–${fmtMs(threads.maxMs)} ms): threads wait for a core`
            : `sharing ${mflop.toFixed(1)} MFLOP between threads costs more than it saves`;
        out.push(`One thread wins here (${fmtMs(simd.medianMs)} ms against ${fmtMs(threads.medianMs)} ms on ${used} threads): ${why}.`);
      } else out.push(`${used} threads (threadsUsed) run at ${(simd.medianMs / threads.medianMs).toFixed(2)}× the speed of 1, on ${cores ?? '?'} cores.`);
    } else if (simd) out.push('One thread only: threads need a cross-origin isolated page (COOP/COEP headers).');
    if (ort && best) {
      const ratio = ort.medianMs / best.medianMs;
      out.push(ratio >= 1 ? `onnxruntime-web’s Attention takes ${ratio.toFixed(1)}× maskattn’s time (1 thread each).`
        : `onnxruntime-web’s Attention is ${(1 / ratio).toFixed(1)}× faster than maskattn here (1 thread each).`);
    }
    if (results.some(busy)) out.push('Some runs took over 3× the fastest: a busy machine; compare the minima.');
    return out;
  }

  const show = (result, backend, decodeStep, cores) => {
    const { results } = result;
    const js = results.find((r) => r.id === 'js');
    els.table.replaceChildren();
    const maxG = Math.max(...results.map((r) => r.gflops));
    for (const r of results) {
      const tr = document.createElement('tr');
      tr.dataset.impl = r.id;
      tr.dataset.ms = r.medianMs;
      tr.dataset.min = r.minMs;
      tr.dataset.max = r.maxMs;
      tr.dataset.gflops = r.gflops;
      const label = r.id === 'threads' ? `${r.label} (threadsUsed ${r.threadsUsed})` : r.label;
      const cells = [
        label,
        range(r),
        `${r.gflops.toFixed(2)}`,
        js && r.medianMs > 0 ? `${(js.medianMs / r.medianMs).toFixed(1)}×` : '–',
        r.id === results[0].id ? 'reference' : full(r.maxDiff),
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
      meter.setAttribute('aria-label', `${label}: ${r.gflops.toFixed(2)} GFLOP/s`);
      bar.append(meter);
      tr.append(bar);
      els.table.append(tr);
    }
    const said = verdicts(result, backend, cores);
    const strong = document.createElement('strong');
    strong.textContent = said.join(' ');
    const mflop = result.flops / 1e6;
    els.summary.replaceChildren(strong, ` ${describeShape(result.shape)}, ${result.causal ? 'causal' : 'no mask'}, ` +
      `${mflop.toFixed(mflop < 1 ? 3 : 1)} MFLOP per call; the median, fastest and slowest of ${Math.min(...results.map((r) => r.reps))} or more runs each, in a worker ` +
      `(build ${backend.build}, up to ${backend.threads} thread${backend.threads > 1 ? 's' : ''}; this machine: ${cores ?? '?'} cores).` +
      `${result.notes?.length ? ` ${result.notes.join('; ')}.` : ''}`);
    if (decodeStep) {
      els.decode.replaceChildren(...decodeStep.rows.map((r) => {
        const tr = document.createElement('tr');
        tr.dataset.dtype = r.dtype;
        tr.dataset.ms = r.medianMs;
        tr.dataset.bytes = r.bytes;
        [r.dtype, range(r), `${r.tokensPerSecond.toFixed(r.tokensPerSecond < 10 ? 1 : 0)}`, `${(r.bytes / 1e6).toFixed(1)} MB`].forEach((text, n) => {
          const td = document.createElement(n === 0 ? 'th' : 'td');
          if (n === 0) td.scope = 'row';
          td.textContent = text;
          tr.append(td);
        });
        return tr;
      }));
      const f32 = decodeStep.rows.find((r) => r.dtype === 'float32');
      const fastest = decodeStep.rows.reduce((a, b) => (a.medianMs <= b.medianMs ? a : b));
      els.decodeSummary.textContent = `${decodeStep.heads} heads × ${decodeStep.keys} keys × ${decodeStep.headDim}, one query per head, ${decodeStep.build} ` +
        `(up to ${decodeStep.threads} thread${decodeStep.threads > 1 ? 's' : ''}). ` +
        (f32 && fastest !== f32 ? `A ${fastest.dtype} cache takes ${(f32.bytes / fastest.bytes).toFixed(1)}× less memory than float32 and its step is ${(f32.medianMs / fastest.medianMs).toFixed(1)}× faster: a decode step reads the whole cache, so its bytes set its time. ` : '') +
        'Tokens per second count this attention alone, one layer; a model runs it once per layer, with its matrix products besides.';
    }
    els.status.textContent = 'Done.';
    els.root.dataset.state = 'done';
    onResult?.({ ...result, decodeStep, cores, verdicts: said });
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
    const b = await builds();
    const result = await runBenchmark(b, shape, { causal, budgetMs, onProgress: (f, label) => progress(f * 0.8, label) });
    const decodeStep = await runDecodeStep(b.simd ?? b.scalar, { budgetMs, onProgress: (f, label) => progress(0.8 + f * 0.2, label) });
    return { result, backend: (b.simd ?? b.scalar).backend, decodeStep };
  }

  async function start() {
    if (running) return;
    const shape = shapeOf();
    const causal = els.causal.checked;
    setRunning(true);
    progress(0, 'the SIMD128 build');
    els.summary.textContent = '';
    els.decodeSummary.textContent = '';
    const wait = document.createElement('td');
    wait.colSpan = 4;
    wait.className = 'empty';
    wait.textContent = 'Runs after the attention table above.';
    const waitRow = document.createElement('tr');
    waitRow.append(wait);
    els.decode.replaceChildren(waitRow);
    try {
      worker ??= new Worker(new URL('./perf-worker.js', import.meta.url), { type: 'module' });
    } catch {
      worker = null;
    }
    if (!worker) {
      try {
        const { result, backend, decodeStep } = await runHere(shape, causal);
        setRunning(false);
        show(result, backend, decodeStep, navigator.hardwareConcurrency ?? null);
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
          if (m.type === 'done') show(m.result, m.backend, m.decodeStep, m.cores);
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
