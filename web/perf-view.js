// The speed panel's results: the attention table (median and spread per implementation, GFLOP/s,
// the speed-up over plain JS, the largest difference from the first row), the verdicts said plainly,
// and the decode step per cache dtype. perf.js runs the benchmark and calls show().

import { full } from './heatmap.js';

export const fmtMs = (ms) => (ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms >= 1 ? ms.toFixed(2) : ms.toFixed(3));
export const describeShape = (s) => `B=${s.B}, H=${s.H}, Lq=${s.Lq}, Lk=${s.Lk}, D=${s.D}`;
const range = (r) => `${fmtMs(r.medianMs)} ms (${fmtMs(r.minMs)}–${fmtMs(r.maxMs)})`;
// Spread: a wide one (the slowest run several times the fastest) says the machine was busy.
const busy = (r) => r.maxMs > 3 * r.minMs;

/** Plain JavaScript against the best maskattn build. */
function jsVerdict(best, js, simd, scalar, mflop) {
  if (js.medianMs < best.medianMs)
    return `Plain JavaScript wins here (${fmtMs(js.medianMs)} ms against ${fmtMs(best.medianMs)} ms): at ${mflop.toFixed(mflop < 1 ? 3 : 1)} MFLOP the work is smaller than a call’s fixed cost ` +
      '(validating the call, copying Q, K and V into WebAssembly and the output out); maskattn pays off on larger shapes.';
  return `${simd ? 'SIMD128' : 'The scalar build'} is ${(js.medianMs / best.medianMs).toFixed(1)}× faster than plain JavaScript` +
    `${simd && scalar ? ` and ${(scalar.medianMs / simd.medianMs).toFixed(1)}× faster than the scalar build` : ''}.`;
}

/** N threads against one, and why one wins when it does. */
function threadsVerdict(simd, threads, cores, mflop) {
  const used = threads.threadsUsed;
  if (threads.medianMs < simd.medianMs) return `${used} threads (threadsUsed) run at ${(simd.medianMs / threads.medianMs).toFixed(2)}× the speed of 1, on ${cores ?? '?'} cores.`;
  const why = used < threads.threads
    ? `maskattn used ${used} of its ${threads.threads} threads (threadsUsed), as this shape is too small to share out`
    : busy(threads) || busy(simd) || (cores ?? 2) <= threads.threads
      ? `the machine is busy or has few cores (${cores ?? '?'} cores; the runs spread ${fmtMs(threads.minMs)}–${fmtMs(threads.maxMs)} ms): threads wait for a core`
      : `sharing ${mflop.toFixed(1)} MFLOP between threads costs more than it saves`;
  return `One thread wins here (${fmtMs(simd.medianMs)} ms against ${fmtMs(threads.medianMs)} ms on ${used} threads): ${why}.`;
}

/** The verdicts, said plainly: who wins, and why when it is not the one expected. */
export function verdicts(result, cores) {
  const { results } = result;
  const by = (id) => results.find((r) => r.id === id);
  const [simd, threads, scalar, ort, js] = ['simd', 'threads', 'scalar', 'ort', 'js'].map(by);
  const best = simd ?? scalar;
  const mflop = result.flops / 1e6;
  const out = [];
  if (best && js) out.push(jsVerdict(best, js, simd, scalar, mflop));
  if (simd && threads) out.push(threadsVerdict(simd, threads, cores, mflop));
  else if (simd) out.push('One thread only: threads need a cross-origin isolated page (COOP/COEP headers).');
  if (ort && best) {
    const ratio = ort.medianMs / best.medianMs;
    out.push(ratio >= 1 ? `onnxruntime-web’s Attention takes ${ratio.toFixed(1)}× maskattn’s time (1 thread each).`
      : `onnxruntime-web’s Attention is ${(1 / ratio).toFixed(1)}× faster than maskattn here (1 thread each).`);
  }
  if (results.some(busy)) out.push('Some runs took over 3× the fastest: a busy machine; compare the minima.');
  return out;
}

/** A table row: a header cell, then data cells. */
function tableRow(texts) {
  const tr = document.createElement('tr');
  texts.forEach((text, n) => {
    const td = document.createElement(n === 0 ? 'th' : 'td');
    if (n === 0) td.scope = 'row';
    td.textContent = text;
    tr.append(td);
  });
  return tr;
}

/** One implementation's row of the attention table, with a bar of its GFLOP/s against the best's. */
function resultRow(r, results, maxG) {
  const js = results.find((x) => x.id === 'js');
  const label = r.id === 'threads' ? `${r.label} (threadsUsed ${r.threadsUsed})` : r.label;
  const tr = tableRow([
    label,
    range(r),
    `${r.gflops.toFixed(2)}`,
    js && r.medianMs > 0 ? `${(js.medianMs / r.medianMs).toFixed(1)}×` : '–',
    r.id === results[0].id ? 'reference' : full(r.maxDiff),
  ]);
  Object.assign(tr.dataset, { impl: r.id, ms: r.medianMs, min: r.minMs, max: r.maxMs, gflops: r.gflops });
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
  return tr;
}

/** The decode step per cache dtype: its table and what it says. */
function showDecode(els, decodeStep) {
  els.decode.replaceChildren(...decodeStep.rows.map((r) => {
    const tr = tableRow([r.dtype, range(r), `${r.tokensPerSecond.toFixed(r.tokensPerSecond < 10 ? 1 : 0)}`, `${(r.bytes / 1e6).toFixed(1)} MB`]);
    Object.assign(tr.dataset, { dtype: r.dtype, ms: r.medianMs, bytes: r.bytes });
    return tr;
  }));
  const f32 = decodeStep.rows.find((r) => r.dtype === 'float32');
  const fastest = decodeStep.rows.reduce((a, b) => (a.medianMs <= b.medianMs ? a : b));
  els.decodeSummary.textContent = `${decodeStep.heads} heads × ${decodeStep.keys} keys × ${decodeStep.headDim}, one query per head, ${decodeStep.build} ` +
    `(up to ${decodeStep.threads} thread${decodeStep.threads > 1 ? 's' : ''}). ` +
    (f32 && fastest !== f32 ? `A ${fastest.dtype} cache takes ${(f32.bytes / fastest.bytes).toFixed(1)}× less memory than float32 and its step is ${(f32.medianMs / fastest.medianMs).toFixed(1)}× faster: a decode step reads the whole cache, so its bytes set its time. ` : '') +
    'Tokens per second count this attention alone, one layer; a model runs it once per layer, with its matrix products besides.';
}

/** Shows a finished run; returns the verdicts said. */
export function show(els, result, backend, decodeStep, cores) {
  const { results } = result;
  const maxG = Math.max(...results.map((r) => r.gflops));
  els.table.replaceChildren(...results.map((r) => resultRow(r, results, maxG)));
  const said = verdicts(result, cores);
  const strong = document.createElement('strong');
  strong.textContent = said.join(' ');
  const mflop = result.flops / 1e6;
  els.summary.replaceChildren(strong, ` ${describeShape(result.shape)}, ${result.causal ? 'causal' : 'no mask'}, ` +
    `${mflop.toFixed(mflop < 1 ? 3 : 1)} MFLOP per call; the median, fastest and slowest of ${Math.min(...results.map((r) => r.reps))} or more runs each, in a worker ` +
    `(build ${backend.build}, up to ${backend.threads} thread${backend.threads > 1 ? 's' : ''}; this machine: ${cores ?? '?'} cores).` +
    `${result.notes?.length ? ` ${result.notes.join('; ')}.` : ''}`);
  if (decodeStep) showDecode(els, decodeStep);
  els.status.textContent = 'Done.';
  els.root.dataset.state = 'done';
  return said;
}
