// Node benchmark, WebAssembly: maskattn (SIMD128 and scalar builds) against onnxruntime-web's wasm
// backend running the standard ONNX Attention operator (opset 23), same inputs, one thread each.
// maskattn SIMD128 is measured through attention() (inputs copied into wasm memory and the output
// copied out on every call) and through a Workspace (inputs already in wasm memory).
//   node bench/js/node-bench.mjs [--quick] [--json FILE] [--case ID[,ID...]]
// Method: interleaved calls in shuffled order, inputs rotated over 2-4 copies, medians (wall clock).
// Each implementation's output is checked once against maskattn SIMD128's (max abs diff <= 1e-3).
import * as ort from 'onnxruntime-web';

import { init } from '../../js/index.js';
import { CASES, copiesFor, lpad, machine, makeInputs, maskattnOptions, maxAbsDiff, measure, ortCase, ortFeeds, pad, parseArgs, setup, writeJson } from './common.mjs';

const args = parseArgs();
ort.env.wasm.numThreads = 1;  // one core for everyone
ort.env.logLevel = 'error';

const simd = await init({ simd: true });
const scalar = await init({ simd: false });
const info = machine();
const ortVersion = ort.env.versions?.web ?? ort.env.versions?.common ?? '?';
console.log(`maskattn ${simd.backend.version}: ${simd.backend.arch} (${simd.backend.lanes} lanes) and scalar; onnxruntime-web ${ortVersion} wasm, 1 thread; Node ${process.versions.node}`);
console.log(`${info.cpu}, ${info.cores} cores; ${info.date}; median of interleaved calls over rotating input copies${args.quick ? '; QUICK run' : ''}`);
console.log(`${pad('case', 34)} ${pad('impl', 22)} ${lpad('ms/call', 10)} ${lpad('rate', 12)} ${lpad('vs ort', 8)}`);

const out = { machine: info, node: process.versions.node, ort: { package: 'onnxruntime-web', version: ortVersion, threads: 1 }, quick: args.quick, cases: [] };
const selected = CASES.filter((c) => c.wasm && (!args.cases || args.cases.includes(c.id)));
for (const [ci, c] of selected.entries()) {
  const s = setup(c);
  const copies = copiesFor(s);
  process.stderr.write(`[${ci + 1}/${selected.length}] #${c.id} ${c.name}: ${copies} copies\n`);
  const entry = { id: c.id, name: c.name, kind: c.decode ? 'decode' : 'prefill', flops: s.flops, kv_bytes: s.kvBytes, results: [], notes: [] };
  out.cases.push(entry);
  const inputs = makeInputs(s, copies);
  const tensors = inputs.map(({ q, k, v }) => [{ data: q, shape: s.qShape }, { data: k, shape: s.kvShape }, { data: v, shape: s.kvShape }]);
  const opts = maskattnOptions(s);
  const want = simd.attention(...tensors[0], opts).output.data;

  const impls = [];
  const check = (name, got) => {
    const d = maxAbsDiff(got, want);
    entry.results.push({ impl: name, max_abs_diff: d });
    if (!(d <= 1e-3)) throw new Error(`${name} differs from maskattn simd128 by ${d.toPrecision(3)} (> 1e-3)`);
  };
  let session = null;
  const workspaces = [];
  try {
    // onnxruntime-web: a rejected case is reported, the rest still runs.
    const { model, mask, note } = ortCase(s);
    entry.ort_mask = note;
    try {
      session = await ort.InferenceSession.create(model, { executionProviders: ['wasm'] });
      const feeds = inputs.map((input) => ortFeeds(ort, s, input, mask));
      check('onnxruntime-web', (await session.run(feeds[0])).Y.data);
      impls.push({ name: 'onnxruntime-web', run: (cp) => session.run(feeds[cp]) });
    } catch (e) {
      const msg = String(e?.message ?? e).split('\n')[0];
      entry.notes.push(`onnxruntime-web could not run this case: ${msg}`);
      console.log(`${pad(`#${c.id} ${c.name}`, 34)} onnxruntime-web could not run this case: ${msg}`);
    }
    entry.results.push({ impl: 'maskattn simd128', max_abs_diff: 0 });  // the reference
    impls.push({ name: 'maskattn simd128', run: (cp) => simd.attention(...tensors[cp], opts) });
    for (const { q, k, v } of inputs) {
      const ws = simd.createWorkspace({ q: s.qShape, k: s.kvShape, v: s.kvShape });
      workspaces.push(ws);
      ws.q.set(q); ws.k.set(k); ws.v.set(v);
    }
    workspaces[0].run(opts);
    check('maskattn simd128 (ws)', workspaces[0].output);
    impls.push({ name: 'maskattn simd128 (ws)', run: (cp) => workspaces[cp].run(opts) });
    check('maskattn scalar', scalar.attention(...tensors[0], opts).output.data);
    impls.push({ name: 'maskattn scalar', run: (cp) => scalar.attention(...tensors[cp], opts) });

    const small = c.Lq * c.Lk * c.Hq * c.B <= 4096;
    const results = await measure(impls, {
      copies, budgetMs: args.quick || small ? 400 : 4000, minReps: args.quick ? 3 : 7, maxReps: small ? 400 : args.quick ? 15 : 200, gapMs: small ? 0 : 1,
    });
    const ortMs = results.find((r) => r.impl === 'onnxruntime-web')?.medianMs;
    for (const r of results) {
      const rate = c.decode ? `${(s.kvBytes / r.medianMs / 1e6).toFixed(1)} GB/s` : `${(s.flops / r.medianMs / 1e6).toFixed(1)} GF/s`;
      const vs = ortMs ? `${(ortMs / r.medianMs).toFixed(2)}x` : '-';
      console.log(`${pad(`#${c.id} ${c.name}`, 34)} ${pad(r.impl, 22)} ${lpad(r.medianMs.toFixed(3), 10)} ${lpad(rate, 12)} ${lpad(vs, 8)}`);
      const res = entry.results.find((x) => x.impl === r.impl);
      Object.assign(res, { threads: 1, median_ms: r.medianMs, min_ms: r.minMs, calls: r.calls });
    }
    if (note) entry.notes.push(`onnxruntime-web mask: ${note}`);
  } catch (e) {
    entry.error = String(e?.message ?? e).split('\n')[0];
    console.log(`${pad(`#${c.id} ${c.name}`, 34)} ABORTED: ${entry.error}`);
  } finally {
    if (session) await session.release();
    for (const ws of workspaces) ws.dispose();
  }
}
writeJson(args.json, out);
