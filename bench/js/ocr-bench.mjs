// End-to-end time of the real recognizer (examples/ocr.mjs) per rendered line of tests/ocr/: the
// unmodified model in one onnxruntime-node session against the split path (three sessions,
// maskattn's attention between them), 1 thread each, runs alternated, medians of --reps runs.
// Also the time maskattn's two attention calls take inside the split path, and the fastest run of
// each (on a shared machine, the run least disturbed by other work).
//   node bench/js/ocr-bench.mjs [--reps 21] [--json out.json]
import * as ort from 'onnxruntime-node';
import { init } from 'maskattn';
import { readFileSync, writeFileSync } from 'node:fs';

import { batchInput } from '../../examples/ocr/image.mjs';
import { loadModelFiles, readPng } from '../../examples/ocr/node.mjs';
import { createRecognizer, maskattnLayer } from '../../examples/ocr/recognizer.mjs';
import { machine } from './common.mjs';

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const reps = Number(opt('--reps', 21));
const jsonOut = opt('--json', null);

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1];
};

const dir = new URL('../../tests/ocr/', import.meta.url);
const lines = JSON.parse(readFileSync(new URL('lines.json', dir), 'utf8'));
const ma = await init({ threads: 1 });
const rec = await createRecognizer(ort, ma, { files: loadModelFiles() });
const rows = [];
console.log(`${machine().cpu}, maskattn ${ma.backend.build}, onnxruntime-node ${ort.env.versions?.common ?? ''}, ${reps} runs`);
console.log('line            L  unmodified ms  split ms  ratio  maskattn attention ms  fastest: unmodified  split  ratio');
let totalPlain = 0;
let totalSplit = 0;
let totalPlainMin = 0;
let totalSplitMin = 0;
for (const line of lines) {
  const x = batchInput([readPng(new URL(line.file, dir))]);
  await rec.reference(x);
  const probe = await rec.run(x);
  const plain = [];
  const split = [];
  const attention = [];
  for (let r = 0; r < reps; ++r) {
    let t = performance.now();
    await rec.reference(x);
    plain.push(performance.now() - t);
    t = performance.now();
    await rec.run(x);
    split.push(performance.now() - t);
    t = performance.now();
    for (const l of probe.layers) maskattnLayer(ma, l.q, l.k, l.v);
    attention.push(performance.now() - t);
  }
  const row = { file: line.file, tokens: x.tokens[0], plainMs: median(plain), splitMs: median(split), attentionMs: median(attention) };
  row.ratio = row.splitMs / row.plainMs;
  row.plainMin = Math.min(...plain);
  row.splitMin = Math.min(...split);
  totalPlain += row.plainMs;
  totalSplit += row.splitMs;
  totalPlainMin += row.plainMin;
  totalSplitMin += row.splitMin;
  rows.push(row);
  console.log(`${row.file.padEnd(14)} ${String(row.tokens).padStart(3)}  ${row.plainMs.toFixed(2).padStart(13)}  ${row.splitMs.toFixed(2).padStart(8)}  ${row.ratio.toFixed(3)}  ${row.attentionMs.toFixed(3).padStart(8)}  ${row.plainMin.toFixed(2).padStart(8)}  ${row.splitMin.toFixed(2).padStart(8)}  ${(row.splitMin / row.plainMin).toFixed(3)}`);
}
console.log(`all lines, medians: unmodified ${totalPlain.toFixed(1)} ms, split ${totalSplit.toFixed(1)} ms, ratio ${(totalSplit / totalPlain).toFixed(3)}; ` +
  `fastest runs: ${totalPlainMin.toFixed(1)} ms, ${totalSplitMin.toFixed(1)} ms, ratio ${(totalSplitMin / totalPlainMin).toFixed(3)}`);
if (jsonOut) writeFileSync(jsonOut, JSON.stringify({ machine: machine(), build: ma.backend.build, reps, rows }, null, 2));
