// Reading the caller's values, once, with the API's errors: tensors (`data` and `shape` or `dims`),
// options and configurations (own properties only), small arrays (lengths, segment ids, slopes,
// counts), and the few checks that the crossing into wasm would lose (a float64 that float32
// cannot hold, a fraction that an integer field would drop, a count past 2^31). Every other value
// check is the C++ library's (src/problem/validate.cpp), reported with the same error type and
// argument. The mask helpers (masks.js) read with these too.
//
// Everything a call takes from the caller is read once, here, before any wasm memory is touched: a
// tensor's `data` and `shape` (or `dims`), each shape entry, each option, each entry of an array
// option. Options and configurations are read from their own properties only, so nothing inherited
// from a polluted Object.prototype takes effect; tensors may be class instances whose `data` is a
// prototype getter (onnxruntime-web), so their prototypes count, but Object.prototype does not. A
// typed array's kind and length come from its internal slots (see typedKind), which a subclass's
// getters or a Proxy cannot forge: a Proxy is not a typed array. Small arrays are copied at once;
// tensors and masks are checked again right before they are copied (wasm-call.js: copyIn), since a
// getter that ran in between may have detached or shrunk them.
import { MaskAttnRangeError, MaskAttnTypeError, describe, typedKind, typedLength, typedPlace } from './errors.js';

export const TYPES = { Float32Array, Uint8Array, Uint16Array, Int32Array, Float64Array };

// The structural questions asked of a caller's object (is it an array, what are its own keys,
// where is a property defined) throw on a revoked Proxy (or a Proxy trap that throws): that is the
// argument's fault, reported as a TypeError naming it.
function structural(name, question) {
  try {
    return question();
  } catch (error) {
    throw new MaskAttnTypeError(name, `cannot be read (a revoked or throwing Proxy?): ${error?.message}`);
  }
}
export const isArray = (x, name) => structural(name, () => Array.isArray(x));

// obj[key] (read once), unless the property would come from Object.prototype alone.
export function prop(obj, key, name) {
  const where = structural(name, () => {
    let o = obj;
    for (let depth = 0; o !== null && o !== undefined && depth < 64; ++depth) {
      if (o === Object.prototype) return false;
      if (Object.hasOwn(o, key)) return true;
      o = Reflect.getPrototypeOf(o);
    }
    return false;
  });
  return where ? obj[key] : undefined;
}

/** A plain object (not an array, not a typed array), or null. */
export function isRecord(x, name) {
  return x !== null && typeof x === 'object' && !isArray(x, name) && typedKind(x) === undefined;
}

// The own enumerable properties of an options or configuration object, each read once, in a
// null-prototype object. Names outside `known` (a Set) are a TypeError naming `name`.
export function ownFields(x, name, known, expected) {
  if (!isRecord(x, name)) throw new MaskAttnTypeError(name, `must be ${expected}, given ${describe(x)}`);
  const out = Object.create(null);
  for (const key of structural(name, () => Object.keys(x))) {
    if (!known.has(key)) throw new MaskAttnTypeError(name, `unknown ${name === 'config' ? 'field' : 'option'} '${key}' (known: ${[...known].join(', ')})`);
    out[key] = x[key];
  }
  return out;
}

// The entries of an Array or a typed array, each read once (at most `max`: a longer one is an
// error before anything is read), or null when x is neither.
export function entries(x, max, name) {
  let n;
  if (typedKind(x) !== undefined) n = typedLength(x);
  else if (isArray(x, name)) n = x.length;
  else return null;
  if (!Number.isSafeInteger(n) || n < 0) throw new MaskAttnTypeError(name, `has an invalid length ${describe(n)}`);
  if (n > max) return { length: n, values: null };
  const values = new Array(n);
  for (let i = 0; i < n; ++i) values[i] = x[i];
  return { length: n, values };
}

// A tensor's dims: numbers (or bigints), each a safe non-negative integer.
export function shapeOf(t, name) {
  if (t === null || typeof t !== 'object') throw new MaskAttnTypeError(name, `must be a tensor { data, shape }, given ${describe(t)}`);
  let shape = prop(t, 'shape', name);
  if (shape === undefined || shape === null) shape = prop(t, 'dims', name);
  const e = entries(shape, 8, `${name}.shape`);
  if (!e) throw new MaskAttnTypeError(`${name}.shape`, `must be an array of dimensions, given ${describe(shape)}`);
  if (!e.values) throw new MaskAttnRangeError(`${name}.shape`, `must have at most 4 dimensions, given ${e.length}`);
  return e.values.map((d, i) => {
    if (typeof d === 'bigint') d = Number(d);
    if (typeof d !== 'number') throw new MaskAttnTypeError(`${name}.shape`, `dimension ${i} must be a non-negative integer, given ${describe(d)}`);
    if (!Number.isSafeInteger(d) || d < 0) throw new MaskAttnRangeError(`${name}.shape`, `dimension ${i} must be a non-negative integer (at most 2^53 - 1), given ${d}`);
    return d;
  });
}

export function product(dims) {
  return dims.reduce((a, b) => a * b, 1);
}

// An input record: what copyIn needs to place an array in wasm memory. heapOffset: where the array
// sits in wasm memory when it is a view of it (a Workspace's view, say), so that it can still be
// read if memory grows before the copy; -1 otherwise.
function record(array, kind, count, name, heapOffset = -1) {
  return { array, kind, count, bytes: count * TYPES[kind].BYTES_PER_ELEMENT, name, heapOffset };
}

/** A small array this file copied (lengths, ids, slopes) as an input record. */
export const owned = (array, name) => record(array, typedKind(array), typedLength(array), name);

// A tensor's data, checked against its dims, the accepted kinds and the library's byte limit (an
// input record with `dims`). `.data` is read once (it may be a getter, as on onnxruntime-web
// tensors). `heap`: the wasm memory's buffer, or null where there is none (the mask helpers).
export function dataOf(t, name, dims, kinds, limits, heap) {
  const data = prop(t, 'data', `${name}.data`);
  const kind = typedKind(data);
  if (!kinds.includes(kind)) throw new MaskAttnTypeError(`${name}.data`, `must be a ${kinds.join(' or a ')}, given ${describe(data)}`);
  const count = product(dims);
  const bytes = count * TYPES[kind].BYTES_PER_ELEMENT;
  if (limits && bytes > limits.maxBytes)
    throw new MaskAttnRangeError(name, `shape [${dims}] needs ${bytes} bytes, more than the ${limits.maxBytes} one buffer may have`);
  const length = typedLength(data);
  if (length !== count)
    throw new MaskAttnRangeError(`${name}.data`, `length must be ${count} for shape [${dims}], given ${length}`);
  const place = typedPlace(data);
  return Object.assign(record(data, kind, count, `${name}.data`, heap && place.buffer === heap ? place.byteOffset : -1), { dims });
}

// A 4-D shape within the library's byte limit (float32 elements).
export function check4(dims, name, layout, limits) {
  if (dims.length !== 4) throw new MaskAttnRangeError(`${name}.shape`, `must have 4 dimensions (${layout === 'blhd' ? '[B, L, H, D]' : '[B, H, L, D]'}), given [${dims}]`);
  if (product(dims) * 4 > limits.maxBytes)
    throw new MaskAttnRangeError(name, `shape [${dims}] needs ${product(dims) * 4} bytes, more than the ${limits.maxBytes} one buffer may have`);
  return dims;
}

// A mask's shape, right-aligned to [B, Hq, Lq, Lk] like NumPy broadcasting ([Lq, Lk] -> [1, 1, Lq, Lk]),
// and its data (an input record that takes a block even when empty: the library sees the mask).
export function maskOf(m, name, kind, limits, heap) {
  if (m === null || typeof m !== 'object') throw new MaskAttnTypeError(name, `must be a tensor { data, shape }, given ${describe(m)}`);
  const dims = shapeOf(m, name);
  if (dims.length < 1 || dims.length > 4) throw new MaskAttnRangeError(`${name}.shape`, `must have 1 to 4 dimensions (broadcast to [B, Hq, Lq, Lk]), given [${dims}]`);
  const input = dataOf(m, name, dims, [kind], limits, heap);
  input.nonEmpty = true;
  return { shape: [...Array(4 - dims.length).fill(1), ...dims], input };
}

// An Int32Array copy of x (an Int32Array or an array of integers) of the given length, or null
// when x is absent.
export function toInt32(x, name, length) {
  if (x === undefined || x === null) return null;
  if (typedKind(x) === 'Int32Array') {
    if (typedLength(x) !== length) throw new MaskAttnRangeError(name, `length must be ${length}, given ${typedLength(x)}`);
    return new Int32Array(x);  // a copy, through the internal slots
  }
  if (!isArray(x, name)) throw new MaskAttnTypeError(name, `must be an Int32Array or an array of integers, given ${describe(x)}`);
  const e = entries(x, length, name);
  if (e.length !== length) throw new MaskAttnRangeError(name, `length must be ${length}, given ${e.length}`);
  return int32Values(e.values, name);
}

// An Int32Array copy of a list whose length the caller decides (tree parents, a kept path): an
// Int32Array or an array of integers, its length read once. A list longer than `max` is refused
// before any entry is read: with the error tooLong(length) where given, else a RangeError.
export function toInt32List(x, name, max, tooLong) {
  const long = (n) => (tooLong ? tooLong(n) : new MaskAttnRangeError(name, `must have at most ${max} entries, given ${n}`));
  if (typedKind(x) === 'Int32Array') {
    if (typedLength(x) > max) throw long(typedLength(x));
    return new Int32Array(x);
  }
  if (!isArray(x, name)) throw new MaskAttnTypeError(name, `must be an Int32Array or an array of integers, given ${describe(x)}`);
  const e = entries(x, max, name);
  if (!e.values) throw long(e.length);
  return int32Values(e.values, name);
}

function int32Values(values, name) {
  const out = new Int32Array(values.length);
  values.forEach((v, i) => {
    if (typeof v !== 'number' || !Number.isInteger(v)) throw new MaskAttnTypeError(name, `entry ${i} must be an integer, given ${describe(v)}`);
    if (v < -(2 ** 31) || v >= 2 ** 31) throw new MaskAttnRangeError(name, `entry ${i} must fit in 32 bits, given ${v}`);
    out[i] = v;
  });
  return out;
}

// Segment ids [B * L]: flat (an Int32Array or an array of integers), or B nested arrays of L ids.
export function segmentIds(x, name, B, L) {
  if (typedKind(x) !== undefined || !isArray(x, name)) return toInt32(x, name, B * L);
  const e = entries(x, Math.max(B, B * L), name);
  if (!e.values) throw new MaskAttnRangeError(name, `length must be B*L = ${B * L} (or B = ${B} rows of ${L}), given ${e.length}`);
  const rows = e.values.map((row, b) => (isArray(row, `${name}[${b}]`) || typedKind(row) !== undefined ? row : null));
  if (!rows.some((row) => row !== null)) {
    if (e.length !== B * L) throw new MaskAttnRangeError(name, `length must be B*L = ${B * L}, given ${e.length}`);
    return int32Values(e.values, name);
  }
  // Nested: exactly B rows, every one of exactly L ids (ragged rows are an error, not flattened).
  if (e.length !== B) throw new MaskAttnRangeError(name, `nested ids need one row per batch: expected ${B} rows, given ${e.length}`);
  const out = new Int32Array(B * L);
  rows.forEach((row, b) => {
    if (row === null) throw new MaskAttnTypeError(`${name}[${b}]`, `must be a row of ${L} ids like the other rows, given ${describe(e.values[b])}`);
    out.set(toInt32(row, `${name}[${b}]`, L), b * L);
  });
  return out;
}

// A Float32Array copy of x (a Float32Array or an array of numbers) of the given length, or null.
export function toFloat32(x, name, length) {
  if (x === undefined || x === null) return null;
  if (typedKind(x) === 'Float32Array') {
    if (typedLength(x) !== length) throw new MaskAttnRangeError(name, `length must be ${length}, given ${typedLength(x)}`);
    return new Float32Array(x);
  }
  if (!isArray(x, name)) throw new MaskAttnTypeError(name, `must be a Float32Array or an array of numbers, given ${describe(x)}`);
  const e = entries(x, length, name);
  if (e.length !== length) throw new MaskAttnRangeError(name, `length must be ${length}, given ${e.length}`);
  return Float32Array.from(e.values, (v, i) => {
    if (typeof v !== 'number') throw new MaskAttnTypeError(name, `entry ${i} must be a number, given ${describe(v)}`);
    return v;
  });
}

// ------------------------------------------------------------------------------- single values

/** true or false (undefined: false). */
export function bool(x, name) {
  if (x === undefined) return false;
  if (typeof x !== 'boolean') throw new MaskAttnTypeError(name, `must be true or false, given ${describe(x)}`);
  return x;
}

const quoted = (names) => names.map((n) => `'${n}'`).join(', ').replace(/, ([^,]*)$/, ' or $1');

/** One of the names of `values` (a Map: 'toString' or 'constructor' are not names): its value. */
export function choice(x, name, values) {
  if (!values.has(x)) throw new MaskAttnTypeError(name, `must be ${quoted([...values.keys()])}, given ${describe(x)}`);
  return values.get(x);
}

const LAYOUTS = new Map([['bhld', 'bhld'], ['blhd', 'blhd']]);
/** 'bhld' (the default) or 'blhd'. */
export function checkLayout(layout = 'bhld') {
  return choice(layout, 'layout', LAYOUTS);
}

/** A count: a safe non-negative integer (a size, a length, a configuration field). */
export function count(x, name) {
  if (typeof x !== 'number') throw new MaskAttnTypeError(name, `must be a non-negative integer, given ${describe(x)}`);
  if (!Number.isSafeInteger(x) || x < 0) throw new MaskAttnRangeError(name, `must be a non-negative integer, given ${x}`);
  return x;
}

// An integer for an int64 field of the library, which checks its range. The crossing would drop a
// fraction (the binding truncates): that is checked here. Reaches past 2^31 are unbounded in effect
// (lengths are far smaller) and become 2^31, which keeps the conversion exact. `what` names the
// value in messages (a window's side).
export function integer(x, name, what = 'must be') {
  if (typeof x !== 'number') throw new MaskAttnTypeError(name, `${what} an integer, given ${describe(x)}`);
  if (!Number.isInteger(x)) throw new MaskAttnRangeError(name, `${what} an integer, given ${x}`);
  return Math.min(x, 2 ** 31);
}

/**
 * A window [left, right] of integers >= -1 (-1 = unbounded side): an Array or typed array of two.
 * Its range is checked here, not only by the library: the mask helpers have no library behind
 * them, and a cache with a window (a ring) replaces the caller's window with its own rule before
 * the library validates it.
 */
export function windowOf(w) {
  const e = entries(w, 2, 'window');
  if (!e || e.length !== 2) throw new MaskAttnTypeError('window', `must be [left, right] (-1 = unbounded), given ${describe(w)}`);
  return e.values.map((x, i) => {
    const side = i === 0 ? 'left' : 'right';
    const n = integer(x, 'window', `${side} must be`);
    if (n < -1) throw new MaskAttnRangeError('window', `${side} must be an integer >= -1 (-1 = unbounded), given ${x}`);
    return n;
  });
}

const FLOAT_MAX = 3.4028234663852886e38;
const FLOAT_MIN_NORMAL = 2 ** -126;

// A number for a float field of the library. The crossing rounds it to float32, which loses what
// the caller gave where float32 cannot hold it: an infinite or NaN value, one beyond float32's range
// and, when `normal` is true, a nonzero one that would be subnormal or 0 in float32 (the library could only
// name the rounded value). Everything else (sign, what it must be relative to other options) is
// the library's to check.
export function float32(x, name, normal = false) {
  if (typeof x !== 'number') throw new MaskAttnTypeError(name, `must be a number, given ${describe(x)}`);
  const f = Math.abs(Math.fround(x));
  if (!Number.isFinite(f))
    throw new MaskAttnRangeError(name, `must be finite in float32 (|${name}| <= ${FLOAT_MAX}), given ${x}`);
  if (normal && x !== 0 && f < FLOAT_MIN_NORMAL)
    throw new MaskAttnRangeError(name, `must be 0 (off) or a normal float32 in [${FLOAT_MIN_NORMAL}, ${FLOAT_MAX}], given ${x}`);
  return x;
}
