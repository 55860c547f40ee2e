// A one-node ONNX model, the standard Attention operator (opset 23), written as protobuf bytes so
// the speed panel can time onnxruntime-web on the same shapes as maskattn with no model file.
// Field numbers (onnx.proto3): ModelProto ir_version 1, producer_name 2, graph 7, opset_import 8;
// GraphProto node 1, name 2, input 11, output 12; NodeProto input 1, output 2, name 3, op_type 4,
// attribute 5; AttributeProto name 1, i 3, type 20 (INT = 2); ValueInfoProto name 1, type 2;
// TypeProto tensor_type 1; Tensor elem_type 1 (FLOAT = 1), shape 2; Dimension dim_value 1.

const utf8 = new TextEncoder();
const varint = (n) => {
  const out = [];
  do {
    out.push((n & 0x7f) | (n > 0x7f ? 0x80 : 0));
    n = Math.floor(n / 128);
  } while (n > 0);
  return out;
};
const cat = (parts) => Uint8Array.from(parts.flatMap((p) => Array.from(p)));
const int = (field, n) => Uint8Array.from([...varint(field << 3), ...varint(n)]);
const bytes = (field, b) => cat([Uint8Array.from([...varint((field << 3) | 2), ...varint(b.length)]), b]);
const str = (field, s) => bytes(field, utf8.encode(s));
const msg = (field, parts) => bytes(field, cat(parts));

const tensor = (field, name, shape) => msg(field, [str(1, name), msg(2, [msg(1, [int(1, 1), msg(2, shape.map((d) => msg(1, [int(1, d)])))])])]);

/** Attention(Q, K, V) -> Y, all float32 [B, H, L, D]; is_causal: the bottom-right-free causal mask (Lq = Lk). */
export function attentionModel({ B, H, Lq, Lk, D }, causal) {
  const node = msg(1, [
    str(1, 'Q'), str(1, 'K'), str(1, 'V'), str(2, 'Y'), str(3, 'attention'), str(4, 'Attention'),
    ...(causal ? [msg(5, [str(1, 'is_causal'), int(3, 1), int(20, 2)])] : []),
  ]);
  const graph = msg(7, [
    node, str(2, 'maskattn_speed_panel'),
    tensor(11, 'Q', [B, H, Lq, D]), tensor(11, 'K', [B, H, Lk, D]), tensor(11, 'V', [B, H, Lk, D]),
    tensor(12, 'Y', [B, H, Lq, D]),
  ]);
  return cat([int(1, 11), str(2, 'maskattn-demo'), graph, msg(8, [str(1, ''), int(2, 23)])]);
}
