// Builds a one-node ONNX model (the standard `Attention` operator, domain '', opset 23) as
// protobuf bytes, written by hand so the oracle test needs no model files and no protobuf library.
//
// Field numbers are those of onnx/onnx.proto3:
//   ModelProto:  ir_version 1, producer_name 2, graph 7, opset_import 8
//   OperatorSetIdProto: domain 1, version 2
//   GraphProto:  node 1, name 2, input 11, output 12
//   NodeProto:   input 1, output 2, name 3, op_type 4, attribute 5, domain 7
//   AttributeProto: name 1, f 2, i 3, type 20 (FLOAT = 1, INT = 2)
//   ValueInfoProto: name 1, type 2;  TypeProto: tensor_type 1;  TypeProto.Tensor: elem_type 1, shape 2
//   TensorShapeProto: dim 1;  Dimension: dim_value 1, dim_param 2
//   TensorProto.DataType: FLOAT = 1, BOOL = 9

export const ONNX_FLOAT = 1;
export const ONNX_BOOL = 9;

const utf8 = new TextEncoder();

function varint(value) {
  // Protobuf base-128 varint; a negative int64 is encoded as its 64-bit two's complement.
  let v = BigInt(value);
  if (v < 0n) v += 1n << 64n;  // two's complement, 10 bytes
  const out = [];
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v !== 0n) byte |= 0x80;
    out.push(byte);
  } while (v !== 0n);
  return out;
}

const key = (field, wire) => varint((field << 3) | wire);

function concat(parts) {
  const n = parts.reduce((s, p) => s + p.length, 0);
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

// Field encoders: each returns a Uint8Array.
const fInt = (field, value) => Uint8Array.from([...key(field, 0), ...varint(value)]);
const fBytes = (field, bytes) => concat([Uint8Array.from([...key(field, 2), ...varint(bytes.length)]), bytes]);
const fString = (field, s) => fBytes(field, utf8.encode(s));
const fMsg = (field, parts) => fBytes(field, concat(parts));
function fFloat(field, value) {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setFloat32(0, value, true);
  return concat([Uint8Array.from(key(field, 5)), b]);
}

function attribute(name, value) {
  if (value.type === 'float') return fMsg(5, [fString(1, name), fFloat(2, value.value), fInt(20, 1)]);
  return fMsg(5, [fString(1, name), fInt(3, value.value), fInt(20, 2)]);
}

function valueInfo(field, name, elemType, shape) {
  // shape == null leaves the rank unknown (ORT infers it); a string is a symbolic dimension.
  const parts = [fInt(1, elemType)];
  if (shape != null) parts.push(fMsg(2, shape.map((d) => fMsg(1, [typeof d === 'string' ? fString(2, d) : fInt(1, d)]))));
  const tensorType = fMsg(1, parts);
  return fMsg(field, [fString(1, name), fMsg(2, [tensorType])]);
}

/**
 * An ONNX model with one `Attention` node.
 *   inputs: [{ name, type: ONNX_FLOAT | ONNX_BOOL, shape }]  (Q, K, V [, attn_mask]); an empty name
 *           leaves an optional input out.
 *   outputs: [{ name, type, shape? }]  (Y [, present_key, present_value, qk_matmul_output]); shape
 *           may be left out (unknown rank: ORT infers it). An empty name leaves an optional output out.
 *   attributes: { is_causal: 1, q_num_heads: 4, scale: 0.5, softcap: 2, ... }; floats are the keys
 *           in FLOAT_ATTRIBUTES, the rest are ints.
 */
const FLOAT_ATTRIBUTES = new Set(['scale', 'softcap']);
export function attentionModel({ inputs, outputs, attributes = {}, opset = 23, irVersion = 11 }) {
  const attrs = Object.entries(attributes)
    .filter(([, v]) => v !== undefined)
    .map(([name, v]) => attribute(name, { type: FLOAT_ATTRIBUTES.has(name) ? 'float' : 'int', value: v }));
  const node = fMsg(1, [
    ...inputs.map((i) => fString(1, i.name)),
    ...outputs.map((o) => fString(2, o.name)),
    fString(3, 'attention'),
    fString(4, 'Attention'),
    ...attrs,
    fString(7, ''),
  ]);
  const graph = fMsg(7, [
    node,
    fString(2, 'maskattn_oracle'),
    ...inputs.filter((i) => i.name !== '').map((i) => valueInfo(11, i.name, i.type, i.shape)),
    ...outputs.filter((o) => o.name !== '').map((o) => valueInfo(12, o.name, o.type, o.shape)),
  ]);
  return concat([
    fInt(1, irVersion),
    fString(2, 'maskattn-tests'),
    graph,
    fMsg(8, [fString(1, ''), fInt(2, opset)]),
  ]);
}
