// The JavaScript API's errors: a TypeError for a wrong kind of value, a RangeError for a wrong
// value, shape or size (and out-of-memory); both carry `argument`, the name of the culprit.

/** Thrown for a wrong kind of value: `argument` names it. */
export class MaskAttnTypeError extends TypeError {
  constructor(argument, message) {
    super(`${argument}: ${message}`);
    this.name = 'TypeError';
    this.argument = argument;
  }
}

/** Thrown for a wrong value, shape or size (and out-of-memory): `argument` names it. */
export class MaskAttnRangeError extends RangeError {
  constructor(argument, message) {
    super(argument ? `${argument}: ${message}` : message);
    this.name = 'RangeError';
    this.argument = argument;
  }
}

// A typed array's kind and length from its internal slots (the intrinsic getters of
// %TypedArray%.prototype): neither a subclass's own getters nor a Proxy can forge them. For anything
// that is not a genuine typed array (a Proxy around one included), typedKind() is undefined.
const TypedArrayPrototype = Object.getPrototypeOf(Uint8Array.prototype);
const intrinsicGetter = (key) => Object.getOwnPropertyDescriptor(TypedArrayPrototype, key).get;
const KIND = intrinsicGetter(Symbol.toStringTag);
const LENGTH = intrinsicGetter('length');
const BUFFER = intrinsicGetter('buffer');
const BYTE_OFFSET = intrinsicGetter('byteOffset');

/** 'Float32Array', 'Uint8Array', ... for a genuine typed array; undefined for anything else. */
export function typedKind(x) {
  return Reflect.apply(KIND, x, []);
}
/** The element count of a genuine typed array (0 once its buffer is detached). */
export function typedLength(x) {
  return Reflect.apply(LENGTH, x, []);
}
/** The buffer and byte offset of a genuine typed array. */
export function typedPlace(x) {
  return { buffer: Reflect.apply(BUFFER, x, []), byteOffset: Reflect.apply(BYTE_OFFSET, x, []) };
}

/**
 * A short description of a value for error messages ("a Float64Array of length 40"). Runs no code
 * of the value's own (no getters, no toString), so a hostile value cannot change the error.
 */
export function describe(x) {
  if (x === null) return 'null';
  if (x === undefined) return 'undefined';
  const kind = typedKind(x);
  if (kind !== undefined) return `a ${kind} of length ${typedLength(x)}`;
  if (typeof x === 'function') return 'a function';
  if (typeof x === 'object') {
    if (ArrayBuffer.isView(x)) return 'a DataView';
    try {
      if (Array.isArray(x)) return 'an array';
    } catch {
      return 'a revoked Proxy';
    }
    return 'an object';
  }
  if (typeof x === 'string') return `string ${x.length > 40 ? `${x.slice(0, 40)}...` : x}`;
  if (typeof x === 'symbol') return 'a symbol';
  return `${typeof x} ${String(x)}`;
}
