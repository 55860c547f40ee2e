// Native peer in Node: onnxruntime-node (CPU execution provider) running the ONNX `Attention`
// operator (opset 23) on the native benchmark's cases, with 1 and 2 intra-op threads. Its output is
// checked once against maskattn's (the SIMD128 build, in this process; max abs diff <= 1e-3).
// Compare its times with maskattn_bench's (bench/run.mjs puts them side by side).
//   node bench/js/ort-node-bench.mjs [--quick] [--json FILE] [--case ID[,ID...]]
import * as ort from 'onnxruntime-node';

import { init } from '../../js/index.js';
import { CASES, copiesFor, lpad, machine, makeInputs, maskattnOptions, maxAbsDiff, measure, ortCase, ortFeeds, pad, parseArgs, setup, writeJson } from './common.mjs';

const args = parseArgs();
const THREADS = [1, 2];
const ma = await init({ simd: true });
const info = machine();
const version = ort.env.versions?.node ?? ort.env.versions?.common ?? '?';
console.log(`onnxruntime-node ${version} (CPU EP) running ONNX Attention; ${info.cpu}, ${info.cores} cores; ${info.date}`);
console.log(`median of interleaved runs over rotating input copies${args.quick ? '; QUICK run' : ''}; checked against maskattn ${ma.backend.arch}`);
console.log(`${pad('case', 44)} ${THREADS.map((t) => lpad(`${t}T ms/call`, 12)).join(' ')}  ORT's mask`);

const out = { machine: info, ort: { package: 'onnxruntime-node', version }, quick: args.quick, cases: [] };
const selected = CASES.filter((c) => c.native && (!args.cases || args.cases.includes(c.id)));
for (const [ci, c] of selected.entries()) {
  const s = setup(c);
  const copies = copiesFor(s);
  process.stderr.write(`[${ci + 1}/${selected.length}] #${c.id} ${c.name}: ${copies} copies\n`);
  const entry = { id: c.id, name: c.name, kind: c.decode ? 'decode' : 'prefill', flops: s.flops, kv_bytes: s.kvBytes, results: [] };
  out.cases.push(entry);
  const inputs = makeInputs(s, copies);
  const { model, mask, note } = ortCase(s);
  entry.ort_mask = note;
  const sessions = [];
  try {
    for (const t of THREADS)
      sessions.push(await ort.InferenceSession.create(model, {
        executionProviders: ['cpu'], intraOpNumThreads: t, interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: 'all',
      }));
    const feeds = inputs.map((input) => ortFeeds(ort, s, input, mask));
    const want = ma.attention({ data: inputs[0].q, shape: s.qShape }, { data: inputs[0].k, shape: s.kvShape },
      { data: inputs[0].v, shape: s.kvShape }, maskattnOptions(s)).output.data;
    for (const [i, session] of sessions.entries()) {
      const got = (await session.run(feeds[0])).Y.data;
      const d = maxAbsDiff(got, want);
      entry[`max_abs_diff_${THREADS[i]}T`] = d;
      if (!(d <= 1e-3)) throw new Error(`ORT output (${THREADS[i]}T) differs from maskattn by ${d.toPrecision(3)} (> 1e-3)`);
    }
    const results = await measure(sessions.map((session, i) => ({ name: `onnxruntime-node ${THREADS[i]}T`, threads: THREADS[i], run: (cp) => session.run(feeds[cp]) })),
      { copies, budgetMs: args.quick ? 300 : 3000, minReps: args.quick ? 3 : 7, maxReps: args.quick ? 15 : 300 });
    entry.results = results.map((r, i) => ({ impl: 'onnxruntime-node', threads: THREADS[i], median_ms: r.medianMs, min_ms: r.minMs, calls: r.calls }));
    console.log(`${pad(`#${c.id} ${c.name}`, 44)} ${results.map((r) => lpad(r.medianMs.toFixed(3), 12)).join(' ')}  ${note || '-'}`);
  } catch (e) {
    const msg = String(e?.message ?? e).split('\n')[0];
    entry.error = msg;
    console.log(`${pad(`#${c.id} ${c.name}`, 44)} ORT could not run this case: ${msg}`);
  } finally {
    for (const session of sessions) await session.release();
  }
}
writeJson(args.json, out);
