// The real recognizer's attention shapes (1 x 8 heads x L x 15, not causal, L = tokens of a line)
// timed in one run: maskattn (WebAssembly in Node, 1 thread: attention() as examples/ocr.mjs calls
// it, and a workspace) against onnxruntime's own attention nodes: the model's attention core cut out
// of the model file (Transpose, MatMul, Softmax, MatMul, as the unmodified model runs it) and the
// standard ONNX Attention operator (opset 23), each in onnxruntime-node (native) and onnxruntime-web
// (WebAssembly, in Node), 1 thread. Medians of --reps timings of --calls back-to-back calls.
//   node bench/js/ocr-attention-bench.mjs [--reps 15] [--calls 50] [--json out.json]
import * as ortNode from 'onnxruntime-node';
import * as ortWeb from 'onnxruntime-web';
import { init } from 'maskattn';
import { writeFileSync } from 'node:fs';

import { HEADS, HEAD_SIZE, LAYERS } from '../../examples/ocr/model.mjs';
import { loadModelFiles } from '../../examples/ocr/node.mjs';
import { maxAbsDiff } from '../../examples/ocr/recognizer.mjs';
import { parseModel, subModel } from '../../examples/ocr/onnx-wire.mjs';
import { ONNX_FLOAT, attentionModel } from '../../tests/js/onnx-model.mjs';
import { machine, rng } from './common.mjs';

const args = process.argv.slice(2);
const opt = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const reps = Number(opt('--reps', 15));
const calls = Number(opt('--calls', 50));
const jsonOut = opt('--json', null);
const LENGTHS = [14, 20, 40, 60, 80, 100, 120, 125];

ortWeb.env.wasm.numThreads = 1;
ortWeb.env.logLevel = 'error';
const ma = await init({ simd: true, threads: 1 });

// The first layer's core as its own model: inputs Q (scaled), K, V [1, 8, L, 15], output O.
function coreModel() {
  const model = parseModel(loadModelFiles().bytes);
  const layer = LAYERS[0];
  const producers = new Map(model.nodes.flatMap((n) => n.outputs.map((o) => [o, n])));
  const out = producers.get(layer.output);
  const softmax = producers.get(out.inputs[0]);
  const scores = producers.get(softmax.inputs[0]);
  const kt = producers.get(scores.inputs[1]);
  const io = (name) => ({ name, type: ONNX_FLOAT });
  return { bytes: subModel(model, [kt, scores, softmax, out], [io(layer.q), io(layer.k), io(layer.v)], [io(layer.output)], 'core'), layer };
}

async function sessions(ort, core, L) {
  const options = { intraOpNumThreads: 1, interOpNumThreads: 1, graphOptimizationLevel: 'all', executionProviders: ['cpu'] };
  if (ort === ortWeb) options.executionProviders = ['wasm'];
  const shape = [1, HEADS, L, HEAD_SIZE];
  const op = attentionModel({
    inputs: ['Q', 'K', 'V'].map((name) => ({ name, type: ONNX_FLOAT, shape })),
    outputs: [{ name: 'Y', type: ONNX_FLOAT, shape }],
    attributes: { scale: 1 },
  });
  return {
    core: await ort.InferenceSession.create(core.bytes, options),
    op: await ort.InferenceSession.create(op, options),
  };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

// Round robin: each repetition times every implementation once, so a load that comes and goes
// on a shared machine falls on all of them alike.
async function timeAll(fns) {
  const names = Object.keys(fns);
  for (const n of names) for (let i = 0; i < 5; ++i) await fns[n]();
  const ms = Object.fromEntries(names.map((n) => [n, []]));
  for (let r = 0; r < reps; ++r) {
    for (const n of names) {
      const t = performance.now();
      for (let i = 0; i < calls; ++i) await fns[n]();
      ms[n].push((performance.now() - t) / calls);
    }
  }
  return Object.fromEntries(names.map((n) => [n, median(ms[n]) * 1000]));  // µs per call
}

const core = coreModel();
const info = machine();
console.log(`attention 1x${HEADS}xLx${HEAD_SIZE}, not causal; maskattn ${ma.backend.build}; onnxruntime-node/-web ${ortNode.env.versions?.common ?? ''}, 1 thread; ` +
  `Node ${process.versions.node}; ${info.cpu}, ${info.cores} cores; ${info.date}; µs per call, medians of ${reps} x ${calls} calls`);
console.log('|  L | maskattn attention() | maskattn workspace | ORT-node model nodes | ORT-node Attention op | ORT-web model nodes | ORT-web Attention op |');
console.log('|---:|---:|---:|---:|---:|---:|---:|');
const rows = [];
const random = rng(40);
for (const L of LENGTHS) {
  const n = HEADS * L * HEAD_SIZE;
  const shape = [1, HEADS, L, HEAD_SIZE];
  const [q, k, v] = [0, 1, 2].map(() => Float32Array.from({ length: n }, () => random()));
  const expect = ma.attention({ data: q, shape }, { data: k, shape }, { data: v, shape }, { scale: 1 }).output.data;
  const ws = ma.createWorkspace({ q: shape, k: shape, v: shape });
  ws.q.set(q);
  ws.k.set(k);
  ws.v.set(v);
  const fns = {
    maskattn: () => ma.attention({ data: q, shape }, { data: k, shape }, { data: v, shape }, { scale: 1 }),
    workspace: () => ws.run({ scale: 1 }),
  };
  for (const [name, ort] of [['node', ortNode], ['web', ortWeb]]) {
    const s = await sessions(ort, core, L);
    const t = (data) => new ort.Tensor('float32', data, shape);
    const coreFeeds = { [core.layer.q]: t(q), [core.layer.k]: t(k), [core.layer.v]: t(v) };
    const opFeeds = { Q: t(q), K: t(k), V: t(v) };
    // Same results first: both ORT graphs against maskattn.
    const a = (await s.core.run(coreFeeds))[core.layer.output].data;
    const b = (await s.op.run(opFeeds)).Y.data;
    if (maxAbsDiff(a, expect) > 1e-5 || maxAbsDiff(b, expect) > 1e-5) throw new Error(`L=${L}: ${name} results differ from maskattn's`);
    fns[`${name}Core`] = () => s.core.run(coreFeeds);
    fns[`${name}Op`] = () => s.op.run(opFeeds);
  }
  const row = { L, ...(await timeAll(fns)) };
  ws.dispose();
  rows.push(row);
  const c = (x) => x.toFixed(1);
  const ratio = (x) => `${c(x)} (${(x / row.maskattn).toFixed(2)}x)`;
  console.log(`| ${L} | ${c(row.maskattn)} | ${c(row.workspace)} | ${ratio(row.nodeCore)} | ${ratio(row.nodeOp)} | ${ratio(row.webCore)} | ${ratio(row.webOp)} |`);
}
console.log('(x): onnxruntime time / maskattn attention() time; above 1, maskattn is faster.');
if (jsonOut) writeFileSync(jsonOut, JSON.stringify({ machine: info, build: ma.backend.build, reps, calls, rows }, null, 2));
