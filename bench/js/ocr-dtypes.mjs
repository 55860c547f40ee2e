// Real activations through every KV cache dtype: each attention layer of the real recognizer
// (examples/ocr.mjs) with its K and V appended to a cache of that dtype and attended by its Q, over
// every rendered line of tests/ocr/. Per dtype: the attention output's max |Δ| relative to max |V|
// (on the unmodified model's own Q, K, V, against its own attention), the max |Δprob| of the whole
// model against the unmodified model, and how many lines' text changes.
//   node bench/js/ocr-dtypes.mjs [--json out.json]
import * as ort from 'onnxruntime-node';
import { init } from 'maskattn';
import { readFileSync, writeFileSync } from 'node:fs';

import { batchInput } from '../../examples/ocr/image.mjs';
import { loadModelFiles, readPng } from '../../examples/ocr/node.mjs';
import { createRecognizer, maskattnLayer, maxAbsDiff } from '../../examples/ocr/recognizer.mjs';
import { machine } from './common.mjs';

export const CONFIGS = [
  { name: 'attention() (no cache)', dtype: 'float32' },
  { name: 'float32 cache', dtype: 'float32', keyRotation: 'none' },
  { name: 'float16', dtype: 'float16' },
  { name: 'bfloat16', dtype: 'bfloat16' },
  { name: 'q8', dtype: 'q8', keyRotation: 'none' },
  { name: 'q8, keys rotated (Q, K zero-padded to 16)', dtype: 'q8', keyRotation: 'hadamard' },
  // q4's default rotation needs an even head size: at 15 the default leaves keys as they are.
  { name: 'q4 (the default: at D = 15, keys not rotated)', dtype: 'q4', keyRotation: 'none' },
  { name: 'q4, keys rotated (Q, K zero-padded to 16)', dtype: 'q4', keyRotation: 'hadamard' },
];

const args = process.argv.slice(2);
const jsonOut = args.includes('--json') ? args[args.indexOf('--json') + 1] : null;
const dir = new URL('../../tests/ocr/', import.meta.url);
const lines = JSON.parse(readFileSync(new URL('lines.json', dir), 'utf8'));
const ma = await init({ threads: 1 });
const rec = await createRecognizer(ort, ma, { files: loadModelFiles() });

const results = CONFIGS.map((c) => ({ ...c, maxRelOutput: 0, maxDeltaProb: 0, changed: [] }));
for (const line of lines) {
  const x = batchInput([readPng(new URL(line.file, dir))]);
  const ref = await rec.reference(x);
  const refText = rec.decode(ref.probs, ref.dims);
  const own = await rec.probe(x);
  for (const r of results) {
    const options = { dtype: r.dtype, keyRotation: r.dtype === 'float32' && !r.keyRotation ? undefined : r.keyRotation };
    for (const l of own.layers) {
      const maxV = l.v.data.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
      const out = maskattnLayer(ma, l.q, l.k, l.v, options).output.data;
      r.maxRelOutput = Math.max(r.maxRelOutput, maxAbsDiff(out, l.output.data) / maxV);
    }
    const split = await rec.run(x, options);
    r.maxDeltaProb = Math.max(r.maxDeltaProb, maxAbsDiff(split.probs, ref.probs));
    const text = rec.decode(split.probs, split.dims);
    if (text !== refText) r.changed.push({ file: line.file, text, reference: refText });
  }
}

console.log(`${lines.length} lines, ${machine().cpu}, maskattn ${ma.backend.build}`);
console.log('| cache dtype | max abs Δ output / max abs V | max abs Δprob | lines whose text changes |');
console.log('|---|---:|---:|---:|');
for (const r of results) {
  console.log(`| ${r.name} | ${r.maxRelOutput.toExponential(1)} | ${r.maxDeltaProb.toExponential(1)} | ${r.changed.length} of ${lines.length} |`);
}
for (const r of results) for (const c of r.changed) console.log(`  ${r.name}: ${c.file} "${c.text}" (unmodified: "${c.reference}")`);
if (jsonOut) writeFileSync(jsonOut, JSON.stringify({ machine: machine(), build: ma.backend.build, results }, null, 2));
