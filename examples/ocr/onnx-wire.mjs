// Reading and re-assembling an ONNX model at the protobuf wire level: a message is a list of fields
// whose bytes are kept as they are, so cutting a graph copies nodes and weights unchanged and only
// the few fields it rewrites (a graph's nodes, inputs and outputs) are encoded here.
//
// Field numbers (onnx/onnx.proto):
//   ModelProto: ir_version 1, opset_import 8, graph 7 (the rest copied unchanged)
//   GraphProto: node 1, name 2, initializer 5, input 11, output 12, value_info 13
//   NodeProto: input 1, output 2, name 3, op_type 4, attribute 5, domain 7
//   AttributeProto: name 1, f 2, i 3, ints 8, type 20
//   TensorProto: dims 1, data_type 2, name 8;  ValueInfoProto: name 1, type 2
//   TypeProto: tensor_type 1;  TypeProto.Tensor: elem_type 1, shape 2

const utf8Decoder = new TextDecoder();
const utf8Encoder = new TextEncoder();

function readVarint(bytes, at) {
  let value = 0n;
  let shift = 0n;
  for (;;) {
    if (at >= bytes.length) throw new Error('ONNX model: a varint runs past the end of the bytes');
    const b = bytes[at++];
    value |= BigInt(b & 0x7f) << shift;
    if (b < 0x80) return { value, at };
    shift += 7n;
  }
}

/** The fields of one message: { field, wire, start, end, body: Uint8Array | null, int: bigint | null }. */
export function readFields(bytes) {
  const fields = [];
  let at = 0;
  while (at < bytes.length) {
    const start = at;
    const key = readVarint(bytes, at);
    at = key.at;
    const field = Number(key.value >> 3n);
    const wire = Number(key.value & 7n);
    let body = null;
    let int = null;
    if (wire === 0) {
      const v = readVarint(bytes, at);
      int = v.value;
      at = v.at;
    } else if (wire === 2) {
      const n = readVarint(bytes, at);
      at = n.at + Number(n.value);
      body = bytes.subarray(n.at, at);
    } else if (wire === 5) {
      body = bytes.subarray(at, at + 4);
      at += 4;
    } else if (wire === 1) {
      body = bytes.subarray(at, at + 8);
      at += 8;
    } else {
      throw new Error(`ONNX model: unsupported protobuf wire type ${wire} (field ${field})`);
    }
    if (at > bytes.length) throw new Error('ONNX model: a field runs past the end of the bytes');
    fields.push({ field, wire, start, end: at, raw: bytes.subarray(start, at), body, int });
  }
  return fields;
}

const text = (f) => utf8Decoder.decode(f.body);
const strings = (fields, n) => fields.filter((f) => f.field === n).map(text);

function varint(value) {
  let v = BigInt(value);
  if (v < 0n) v += 1n << 64n;
  const out = [];
  for (;;) {
    const low = Number(v & 0x7fn);
    v >>= 7n;
    if (v === 0n) return out.concat(low);
    out.push(low | 0x80);
  }
}

export function join(parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

const bytesField = (field, bytes) => join([Uint8Array.from([...varint((field << 3) | 2), ...varint(bytes.length)]), bytes]);
const stringField = (field, s) => bytesField(field, utf8Encoder.encode(s));
const intField = (field, v) => Uint8Array.from([...varint(field << 3), ...varint(v)]);

/** A tensor's value info: its name and element type, its shape left unknown (ORT infers it). */
export function tensorValueInfo(field, name, elemType) {
  const tensorType = bytesField(1, intField(1, elemType));
  return bytesField(field, join([stringField(1, name), bytesField(2, tensorType)]));
}
function parseAttribute(body) {
  const fields = readFields(body);
  const name = strings(fields, 1)[0];
  const f = fields.find((x) => x.field === 2);
  const i = fields.find((x) => x.field === 3);
  return {
    name,
    f: f ? new DataView(f.body.buffer, f.body.byteOffset, 4).getFloat32(0, true) : undefined,
    i: i ? Number(BigInt.asIntN(64, i.int)) : undefined,
  };
}

function parseNode(f) {
  const fields = readFields(f.body);
  return {
    raw: f.raw,
    body: f.body,
    inputs: strings(fields, 1),
    outputs: strings(fields, 2),
    name: strings(fields, 3)[0] ?? '',
    opType: strings(fields, 4)[0] ?? '',
    attributes: fields.filter((x) => x.field === 5).map((x) => parseAttribute(x.body)),
  };
}

/** A model's graph as nodes, initializers by name, inputs and outputs; the rest kept as bytes. */
export function parseModel(bytes) {
  const top = readFields(bytes);
  const graphField = top.find((f) => f.field === 7);
  if (!graphField) throw new Error('ONNX model: no graph');
  const graph = readFields(graphField.body);
  const initializers = new Map();
  for (const f of graph.filter((x) => x.field === 5)) {
    const name = strings(readFields(f.body), 8)[0];
    initializers.set(name, f.raw);
  }
  const valueInfoName = (f) => strings(readFields(f.body), 1)[0];
  return {
    header: top.filter((f) => f.field !== 7).map((f) => f.raw),
    nodes: graph.filter((f) => f.field === 1).map(parseNode),
    initializers,
    inputs: graph.filter((f) => f.field === 11).map((f) => ({ name: valueInfoName(f), raw: f.raw })),
    outputs: graph.filter((f) => f.field === 12).map((f) => ({ name: valueInfoName(f), raw: f.raw })),
  };
}

/**
 * A model of some of `model`'s nodes (in their order), fed by `inputs` and giving `outputs`
 * ([{ name, type }], type an ONNX element type). Initializers the nodes read come along.
 */
export function subModel(model, nodes, inputs, outputs, name) {
  const needed = new Set(nodes.flatMap((n) => n.inputs));
  const inits = [...needed].filter((n) => model.initializers.has(n)).map((n) => model.initializers.get(n));
  const graph = join([
    ...nodes.map((n) => n.raw),
    stringField(2, name),
    ...inits,
    ...inputs.map((t) => tensorValueInfo(11, t.name, t.type)),
    ...outputs.map((t) => tensorValueInfo(12, t.name, t.type)),
  ]);
  return join([...model.header, bytesField(7, graph)]);
}
