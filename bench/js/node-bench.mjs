// Node benchmark, WebAssembly: maskattn (SIMD128, relaxed-SIMD and scalar builds) against
// onnxruntime-web's wasm backend running the standard ONNX Attention operator (opset 23), same
// inputs, one thread each; and maskattn's threaded relaxed build on 1 and N threads.
// maskattn SIMD128 is measured through attention() (inputs copied into wasm memory and the output
// copied out on every call) and through a Workspace (inputs already in wasm memory); the relaxed
// rows through Workspaces of the threaded module, with `threads: 1` and `threads: N`.
//   node bench/js/node-bench.mjs [--quick] [--json FILE] [--case ID[,ID...]] [--threads N] [--ort-threads N]
// --ort-threads N runs onnxruntime-web on N threads (its threaded wasm; default 1), to compare
// maskattn's N-thread rows with it at the same thread count.
// Relaxed SIMD: Node 20 needs --experimental-wasm-relaxed-simd, set below before anything compiles.
// Method: interleaved calls in shuffled order, inputs rotated over 2-4 copies, medians (wall clock).
// Each implementation's output is checked once against maskattn SIMD128's (max abs diff <= 1e-3).
import v8 from 'node:v8';
import * as ort from 'onnxruntime-web';

import { init } from '../../js/index.js';
import { CASES, copiesFor, lpad, machine, makeInputs, maskattnOptions, maxAbsDiff, measure, ortCase, ortFeeds, pad, parseArgs, setup, writeJson } from './common.mjs';

v8.setFlagsFromString('--experimental-wasm-relaxed-simd');
const threadsArg = process.argv.indexOf('--threads');
const THREADS = threadsArg > 0 ? Number(process.argv.splice(threadsArg, 2)[1]) : 2;
const ortThreadsArg = process.argv.indexOf('--ort-threads');
const ORT_THREADS = ortThreadsArg > 0 ? Number(process.argv.splice(ortThreadsArg, 2)[1]) : 1;
const args = parseArgs();
ort.env.wasm.numThreads = ORT_THREADS;  // 1 by default: one core for everyone
ort.env.logLevel = 'error';

const simd = await init({ simd: true, relaxed: false, threads: 1 });
const scalar = await init({ simd: false });
const relaxed = await init({ simd: true, relaxed: true, threads: THREADS });  // threads: 1 or THREADS per call
const info = machine();
const ortVersion = ort.env.versions?.web ?? ort.env.versions?.common ?? '?';
console.log(`maskattn ${simd.backend.version}: ${simd.backend.arch} (${simd.backend.lanes} lanes), ${relaxed.backend.build} (${relaxed.backend.threads} threads) and scalar; onnxruntime-web ${ortVersion} wasm, ${ORT_THREADS} thread${ORT_THREADS > 1 ? 's' : ''}; Node ${process.versions.node}`);
console.log(`${info.cpu}, ${info.cores} cores; ${info.date}; median of interleaved calls over rotating input copies${args.quick ? '; QUICK run' : ''}`);
console.log(`${pad('case', 34)} ${pad('impl', 24)} ${lpad('ms/call', 10)} ${lpad('rate', 12)} ${lpad('vs ort', 8)}`);

const out = { machine: info, node: process.versions.node, ort: { package: 'onnxruntime-web', version: ortVersion, threads: ORT_THREADS }, quick: args.quick, cases: [] };
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
      impls.push({ name: 'onnxruntime-web', threads: ORT_THREADS, run: (cp) => session.run(feeds[cp]) });
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
    const relaxedSpaces = inputs.map(({ q, k, v }) => {
      const ws = relaxed.createWorkspace({ q: s.qShape, k: s.kvShape, v: s.kvShape });
      workspaces.push(ws);
      ws.q.set(q); ws.k.set(k); ws.v.set(v);
      return ws;
    });
    const one = { ...opts, threads: 1 }, many = { ...opts, threads: THREADS };
    relaxedSpaces[0].run(one);
    check('maskattn relaxed (ws)', relaxedSpaces[0].output);
    impls.push({ name: 'maskattn relaxed (ws)', run: (cp) => relaxedSpaces[cp].run(one) });
    relaxedSpaces[0].run(many);
    check(`maskattn relaxed ${THREADS}T (ws)`, relaxedSpaces[0].output);
    impls.push({ name: `maskattn relaxed ${THREADS}T (ws)`, threads: THREADS, run: (cp) => relaxedSpaces[cp].run(many) });
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
      console.log(`${pad(`#${c.id} ${c.name}`, 34)} ${pad(r.impl, 24)} ${lpad(r.medianMs.toFixed(3), 10)} ${lpad(rate, 12)} ${lpad(vs, 8)}`);
      const res = entry.results.find((x) => x.impl === r.impl);
      Object.assign(res, { threads: impls.find((x) => x.name === r.impl)?.threads ?? 1, median_ms: r.medianMs, min_ms: r.minMs, calls: r.calls });
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
