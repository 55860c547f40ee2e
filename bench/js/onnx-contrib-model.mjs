// A one-node ONNX model of any operator and domain, as protobuf bytes written by hand (no protobuf
// library, no model files): what tests/js/onnx-model.mjs does for the standard `Attention` node,
// extended with an operator domain (e.g. 'com.microsoft' for contrib operators such as
// GroupQueryAttention), several opset imports, int32/int64 inputs and rank-0 (scalar) shapes.
// tests/js/onnx-model.mjs is left as it is; this file has its own encoders.
//
// Field numbers (onnx/onnx.proto3):
//   ModelProto: ir_version 1, producer_name 2, graph 7, opset_import 8
//   OperatorSetIdProto: domain 1, version 2
//   GraphProto: node 1, name 2, input 11, output 12
//   NodeProto: input 1, output 2, name 3, op_type 4, attribute 5, domain 7
//   AttributeProto: name 1, f 2, i 3, type 20 (FLOAT = 1, INT = 2)
//   ValueInfoProto: name 1, type 2;  TypeProto: tensor_type 1;  TypeProto.Tensor: elem_type 1, shape 2
//   TensorShapeProto: dim 1 (none: a scalar);  Dimension: dim_value 1, dim_param 2

export const ONNX_TYPES = Object.freeze({ float: 1, int32: 6, int64: 7, bool: 9, float16: 10 });

const utf8 = new TextEncoder();

function varint(value) {
  let v = BigInt(value);
  if (v < 0n) v += 1n << 64n;  // negative int64: 64-bit two's complement (10 bytes)
  const bytes = [];
  for (;;) {
    const low = Number(v & 0x7fn);
    v >>= 7n;
    if (v === 0n) {
      bytes.push(low);
      return bytes;
    }
    bytes.push(low | 0x80);
  }
}

function join(parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

const tag = (field, wire) => varint((field << 3) | wire);
const intField = (field, value) => Uint8Array.from([...tag(field, 0), ...varint(value)]);
const bytesField = (field, bytes) => join([Uint8Array.from([...tag(field, 2), ...varint(bytes.length)]), bytes]);
const stringField = (field, text) => bytesField(field, utf8.encode(text));
const messageField = (field, parts) => bytesField(field, join(parts));
function floatField(field, value) {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setFloat32(0, value, true);
  return join([Uint8Array.from(tag(field, 5)), b]);
}

/** value: a number (an INT attribute) or { float: x } (a FLOAT attribute). */
function attribute(name, value) {
  if (typeof value === 'object') return messageField(5, [stringField(1, name), floatField(2, value.float), intField(20, 1)]);
  return messageField(5, [stringField(1, name), intField(3, value), intField(20, 2)]);
}

/** shape: null (rank unknown), [] (a scalar), or dims (numbers, or strings for symbolic dims). */
function valueInfo(field, { name, type, shape }) {
  const elemType = ONNX_TYPES[type];
  if (!elemType) throw new Error(`unknown ONNX element type ${type} (known: ${Object.keys(ONNX_TYPES).join(', ')})`);
  const tensor = [intField(1, elemType)];
  if (shape != null) tensor.push(messageField(2, shape.map((d) => messageField(1, [typeof d === 'string' ? stringField(2, d) : intField(1, d)]))));
  return messageField(field, [stringField(1, name), messageField(2, [messageField(1, tensor)])]);
}

/**
 * A model with one node.
 *   op: the operator type ('GroupQueryAttention'); domain: '' (standard) or e.g. 'com.microsoft'.
 *   inputs / outputs: [{ name, type: 'float' | 'int32' | ..., shape }] in the operator's order; an
 *     empty name leaves an optional input or output out (it keeps its position).
 *   attributes: { num_heads: 32, scale: { float: 0.125 } }.
 *   opsets: { '': 21, 'com.microsoft': 1 } (the node's domain must be among them).
 */
export function oneNodeModel({ op, domain = '', inputs, outputs, attributes = {}, opsets = { '': 21 }, irVersion = 10, name = 'maskattn_bench' }) {
  if (!(domain in opsets)) throw new Error(`the node's domain '${domain}' needs an opset import`);
  const node = messageField(1, [
    ...inputs.map((i) => stringField(1, i.name)),
    ...outputs.map((o) => stringField(2, o.name)),
    stringField(3, op.toLowerCase()),
    stringField(4, op),
    ...Object.entries(attributes).filter(([, v]) => v !== undefined).map(([k, v]) => attribute(k, v)),
    stringField(7, domain),
  ]);
  const graph = messageField(7, [
    node,
    stringField(2, name),
    ...inputs.filter((i) => i.name !== '').map((i) => valueInfo(11, i)),
    ...outputs.filter((o) => o.name !== '').map((o) => valueInfo(12, o)),
  ]);
  const imports = Object.entries(opsets).map(([d, v]) => messageField(8, [stringField(1, d), intField(2, v)]));
  return join([intField(1, irVersion), stringField(2, 'maskattn-bench'), graph, ...imports]);
}

/**
 * The com.microsoft GroupQueryAttention contrib operator for decoding with a growing cache, the way
 * transformers.js feeds it: query [B, S, Hq*D], key/value [B, S, Hkv*D] (BSNH, packed heads),
 * past_key/past_value [B, Hkv, past, D] (BNSH), seqlens_k int32 [B] (total length - 1),
 * total_sequence_length int32 scalar; outputs output [B, S, Hq*D], present_key/present_value
 * [B, Hkv, total, D] (fed back as the next step's past). Lengths are symbolic dimensions.
 */
export function groupQueryAttentionModel({ B, Hq, Hkv, D, scale }) {
  return oneNodeModel({
    op: 'GroupQueryAttention',
    domain: 'com.microsoft',
    opsets: { '': 21, 'com.microsoft': 1 },
    inputs: [
      { name: 'query', type: 'float', shape: [B, 'S', Hq * D] },
      { name: 'key', type: 'float', shape: [B, 'S', Hkv * D] },
      { name: 'value', type: 'float', shape: [B, 'S', Hkv * D] },
      { name: 'past_key', type: 'float', shape: [B, Hkv, 'past', D] },
      { name: 'past_value', type: 'float', shape: [B, Hkv, 'past', D] },
      { name: 'seqlens_k', type: 'int32', shape: [B] },
      { name: 'total_sequence_length', type: 'int32', shape: [] },
    ],
    outputs: [
      { name: 'output', type: 'float', shape: [B, 'S', Hq * D] },
      { name: 'present_key', type: 'float', shape: [B, Hkv, 'total', D] },
      { name: 'present_value', type: 'float', shape: [B, Hkv, 'total', D] },
    ],
    attributes: { num_heads: Hq, kv_num_heads: Hkv, ...(scale !== undefined ? { scale: { float: scale } } : {}) },
  });
}
