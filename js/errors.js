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

/** A short description of a value for error messages ("a Float64Array of length 40"). */
export function describe(x) {
  if (x === null) return 'null';
  if (Array.isArray(x)) return `an array of length ${x.length}`;
  if (ArrayBuffer.isView(x)) return `a ${x.constructor.name} of length ${x.length}`;
  if (typeof x === 'object') return `an object (${Object.prototype.toString.call(x)})`;
  return `${typeof x} ${String(x)}`;
}
