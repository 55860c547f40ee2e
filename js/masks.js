// Mask-building helpers: the dense masks the usual tutorial functions (create_causal_mask,
// create_padding_mask, ...) build, in maskattn's polarity (allowed: 1 = may attend), shaped so they
// can be passed straight to `attention(q, k, v, { allowed })` (shapes broadcast right-aligned to
// [B, Hq, Lq, Lk]).
//
// Each has a compact option that is faster and needs no Lq x Lk memory (causal, keyLengths,
// window, segments); a mask built here gives exactly the same attention as that option. Use the
// helpers when a dense mask is what the surrounding code passes around, to combine a rule with
// something custom, or to convert PyTorch-style masks. Mirrors C++ maskattn/masks.hpp.
//
// Errors are the API's MaskAttnTypeError / MaskAttnRangeError (with `argument`), from ./errors.js;
// arguments are read with the API's readers (./read.js), so a helper takes what attention() takes.
import { MaskAttnRangeError, MaskAttnTypeError, describe, typedKind, typedLength } from './errors.js';
import { choice, count, dataOf, entries, isArray, ownFields, prop, shapeOf, windowOf } from './read.js';

// The helpers build plain JavaScript arrays and keep no copy of the library's limits (sequence
// length, bytes per buffer): attention() checks a mask against them (MaskAttn.limits); here only
// what JavaScript itself can allocate bounds a mask.
const ALIGNS = new Map([['bottom-right', 'bottom-right'], ['top-left', 'top-left']]);
const ALIGN_OPTIONS = new Set(['align']);

function alignOf(options) {
  if (options === undefined) return 'bottom-right';
  const opts = ownFields(options, 'options', ALIGN_OPTIONS, "an object such as { align: 'top-left' }");
  return choice(opts.align ?? 'bottom-right', 'align', ALIGNS);
}

// Most entries of a list of lengths (sequences of a batch, packed documents): far beyond any batch,
// and a bound on what a Proxy claiming a huge length can make a helper read.
export const MAX_LIST_LENGTH = 2 ** 24;

// A plain array of integers from an Int32Array or an array of integers (each entry named in
// errors, as lengths[i]), read once by index.
function integers(x, name) {
  if (typedKind(x) === 'Int32Array') {
    if (typedLength(x) > MAX_LIST_LENGTH) throw new MaskAttnRangeError(name, `must have at most ${MAX_LIST_LENGTH} entries, given ${typedLength(x)}`);
    return Array.from(new Int32Array(x));  // a copy through the internal slots (a subclass cannot lie)
  }
  const e = isArray(x, name) ? entries(x, MAX_LIST_LENGTH, name) : null;
  if (!e) throw new MaskAttnTypeError(name, `must be an Int32Array or an array of integers, given ${describe(x)}`);
  if (!e.values) throw new MaskAttnRangeError(name, `must have at most ${MAX_LIST_LENGTH} entries, given ${e.length}`);
  e.values.forEach((v, i) => {
    if (typeof v !== 'number') throw new MaskAttnTypeError(`${name}[${i}]`, `must be an integer, given ${describe(v)}`);
    if (!Number.isInteger(v)) throw new MaskAttnRangeError(`${name}[${i}]`, `must be an integer, given ${v}`);
  });
  return e.values;
}

// A typed array of n elements; a size JavaScript cannot allocate is a RangeError naming `name`.
function allocate(Type, n, name) {
  try {
    return new Type(n);
  } catch (error) {
    throw new MaskAttnRangeError(name, `the mask needs ${n * Type.BYTES_PER_ELEMENT} bytes, more than JavaScript could allocate (${error.message})`);
  }
}

// A mask tensor { data, shape | dims }: its dims, its element count n, the helper's result array of
// n elements of type Out (allocated before any entry is read: a size JavaScript cannot allocate
// fails at once) and its entries, each read once. Data: a Uint8Array, or where `array` is true also
// an Array. A typed array's length is checked from its internal slot, so n (not its `length`
// property, which a subclass may override) is what the helpers read.
function tensor(t, name, Out, array = false) {
  const dims = shapeOf(t, name);
  const n = dims.reduce((a, b) => a * b, 1);
  const data = prop(t, 'data', `${name}.data`);  // read once
  const out = allocate(Out, n, name);
  if (!array || !isArray(data, `${name}.data`)) return { dims, n, out, values: dataOf({ data }, name, dims, ['Uint8Array'], null, null).array };
  const e = entries(data, n, `${name}.data`);
  if (e.length !== n) throw new MaskAttnRangeError(`${name}.data`, `length must be ${n} for shape [${dims}], given ${e.length}`);
  return { dims, n, out, values: e.values };
}

// The diagonal of query row i with no lengths (docs/semantics.md d(i)).
const diagonal = (i, Lq, Lk, align) => (align === 'top-left' ? i : i + (Lk - Lq));

/**
 * Causal mask [Lq, Lk]: 1 where key j <= d(i), d(i) = i + (Lk - Lq) (bottom-right, the default) or
 * i (top-left, PyTorch is_causal). Same attention as `{ causal: true, align }` (without lengths).
 */
export function createCausalMask(Lq, Lk, options) {
  count(Lq, 'Lq');
  count(Lk, 'Lk');
  const align = alignOf(options);
  const data = allocate(Uint8Array, Lq * Lk, 'Lq');
  if (data.length === 0) return { data, shape: [Lq, Lk] };  // Lq or Lk is 0: no rows to visit
  for (let i = 0; i < Lq; ++i) {
    const end = Math.min(diagonal(i, Lq, Lk, align) + 1, Lk);
    if (end > 0) data.fill(1, i * Lk, i * Lk + end);
  }
  return { data, shape: [Lq, Lk] };
}

/**
 * Key padding mask [B, 1, 1, L] (broadcasts over heads and queries): 1 where key j < lengths[b]
 * (1 = valid key). Same attention as `{ keyLengths: lengths }`.
 */
export function createPaddingMask(lengths, L) {
  const lens = integers(lengths, 'lengths');
  count(L, 'L');
  lens.forEach((n, b) => {
    if (n < 0 || n > L) throw new MaskAttnRangeError(`lengths[${b}]`, `must be in [0, L = ${L}], given ${n}`);
  });
  const B = lens.length;
  const data = allocate(Uint8Array, B * L, 'lengths');
  for (let b = 0; b < B; ++b) data.fill(1, b * L, b * L + lens[b]);
  return { data, shape: [B, 1, 1, L] };
}

/**
 * Sliding-window mask [Lq, Lk]: 1 where d(i) - left <= j <= d(i) + right (-1 = unbounded side), d(i)
 * as in createCausalMask. Not causal by itself (right = 0 makes it so). Same attention as
 * `{ window: [left, right], align }`.
 */
export function createWindowMask(Lq, Lk, window, options) {
  count(Lq, 'Lq');
  count(Lk, 'Lk');
  const [left, right] = windowOf(window);
  const align = alignOf(options);
  const data = allocate(Uint8Array, Lq * Lk, 'Lq');
  if (data.length === 0) return { data, shape: [Lq, Lk] };  // Lq or Lk is 0: no rows to visit
  for (let i = 0; i < Lq; ++i) {
    const d = diagonal(i, Lq, Lk, align);
    const lo = left < 0 ? 0 : Math.max(d - left, 0);
    const hi = right < 0 ? Lk : Math.min(d + right + 1, Lk);  // exclusive
    if (hi > lo) data.fill(1, i * Lk + lo, i * Lk + hi);
  }
  return { data, shape: [Lq, Lk] };
}

/**
 * Segment ids [L] for documents packed one after another into a sequence of length L: document n
 * (lengths[n] tokens) gets id n, the unused tail -1. Pass the same ids as `segments: { query, key }`
 * (self-attention) so each document attends only itself. The tail's ids are all -1, so tail
 * positions attend each other: add `keyLengths`/`queryLengths` = sum(lengths) to mask the tail.
 */
export function segmentsFromLengths(lengths, L) {
  const lens = integers(lengths, 'lengths');
  count(L, 'L');
  let total = 0;
  lens.forEach((n, i) => {
    if (n < 0) throw new MaskAttnRangeError(`lengths[${i}]`, `must be >= 0, given ${n}`);
    total += n;
    if (total > L) throw new MaskAttnRangeError('lengths', `the documents must fit in L = ${L}: lengths[0..${i}] sum to ${total}`);
  });
  const ids = allocate(Int32Array, L, 'L').fill(-1);
  let at = 0;
  lens.forEach((n, doc) => {
    ids.fill(doc, at, at + n);
    at += n;
  });
  return ids;
}

/**
 * Converts a PyTorch-polarity key padding mask (nonzero/true = IGNORE the key, as
 * nn.MultiheadAttention's key_padding_mask) into maskattn's `allowed` polarity (1 = may attend).
 * A [B, Lk] mask comes back as [B, 1, 1, Lk] so it broadcasts over heads and queries (a [B, Lk]
 * shape would be read as [Lq, Lk]); other shapes are kept. Data: Uint8Array or an array of
 * booleans / numbers.
 */
export function fromKeyPaddingMask(keyPaddingMask) {
  const { dims, n, out: data, values: src } = tensor(keyPaddingMask, 'keyPaddingMask', Uint8Array, true);
  for (let i = 0; i < n; ++i) {
    const x = src[i];
    if (typeof x !== 'number' && typeof x !== 'boolean')
      throw new MaskAttnTypeError(`keyPaddingMask.data[${i}]`, `must be a boolean or a number, given ${describe(x)}`);
    data[i] = x ? 0 : 1;
  }
  const shape = dims.length === 2 ? [dims[0], 1, 1, dims[1]] : dims;
  return { data, shape };
}

/**
 * The additive form of an `allowed` mask (same shape): 0 where allowed (nonzero), -Infinity where
 * not. Passed as `bias` it gives the same attention as the mask passed as `allowed`.
 */
export function toAdditiveMask(allowed) {
  const { dims, n, out: data, values } = tensor(allowed, 'allowed', Float32Array);
  for (let i = 0; i < n; ++i) data[i] = values[i] ? 0 : -Infinity;
  return { data, shape: dims };
}
