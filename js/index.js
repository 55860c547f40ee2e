// maskattn for JavaScript: masked scaled-dot-product attention in WebAssembly.
//
//   import { init } from 'maskattn';
//   const ma = await init();
//   const { output } = ma.attention(q, k, v, { causal: true });
//
// Semantics: docs/semantics.md. Tensors are { data: Float32Array, shape: number[] } (or `dims`, as
// onnxruntime-web tensors have). The C++ library validates every argument; this file checks what
// only JavaScript can see (typed-array kinds, shapes as arrays, data lengths) and moves memory.

const VERSION = '0.1.0';

import { MaskAttnRangeError, MaskAttnTypeError, describe } from './errors.js';

export { MaskAttnRangeError, MaskAttnTypeError } from './errors.js';

// ------------------------------------------------------------------------------------------ init

// The smallest module using a SIMD128 instruction (i32x4.splat of a constant): validates only on
// engines with SIMD128.
const SIMD_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0,
  10, 10, 1, 8, 0, 65, 0, 253, 15, 253, 98, 11]);

/** Whether this engine supports WebAssembly SIMD128. */
export function simdSupported() {
  try {
    return WebAssembly.validate(SIMD_PROBE);
  } catch {
    return false;
  }
}

const isNode = typeof process !== 'undefined' && process.versions != null && process.versions.node != null;
const instances = new Map();

/**
 * Loads the WebAssembly module (once per build; later calls return the same instance).
 * options.simd: 'auto' (default: SIMD128 when the engine has it), true (require it) or false (scalar build).
 * options.locateFile(name): URL of a .wasm file, for hosting the files elsewhere.
 * options.wasmBinary: the .wasm bytes, for environments without fetch.
 */
export function init(options = {}) {
  if (options === null || typeof options !== 'object') throw new MaskAttnTypeError('options', `must be an object, given ${describe(options)}`);
  const simdOption = options.simd ?? 'auto';
  if (simdOption !== 'auto' && simdOption !== true && simdOption !== false)
    throw new MaskAttnTypeError('simd', `must be 'auto', true or false, given ${describe(simdOption)}`);
  const haveSimd = simdSupported();
  if (simdOption === true && !haveSimd)
    return Promise.reject(new MaskAttnRangeError('simd', 'this engine does not support WebAssembly SIMD128 (use simd: false or \'auto\')'));
  const simd = simdOption === 'auto' ? haveSimd : simdOption;
  const key = simd ? 'simd' : 'scalar';
  if (!instances.has(key)) {
    const loading = load(simd, options).catch((error) => {
      instances.delete(key);  // a failed load may be retried
      throw error;
    });
    instances.set(key, loading);
  }
  return instances.get(key);
}

async function load(simd, options) {
  const name = simd ? 'maskattn-simd' : 'maskattn-scalar';
  // `new URL(..., import.meta.url)` lets bundlers (Vite, webpack) find and emit the assets.
  const factoryUrl = simd ? new URL('../dist/maskattn-simd.mjs', import.meta.url) : new URL('../dist/maskattn-scalar.mjs', import.meta.url);
  const wasmUrl = simd ? new URL('../dist/maskattn-simd.wasm', import.meta.url) : new URL('../dist/maskattn-scalar.wasm', import.meta.url);
  const { default: factory } = await import(/* @vite-ignore */ factoryUrl.href);
  const moduleOptions = {};
  if (options.wasmBinary) {
    moduleOptions.wasmBinary = options.wasmBinary;
  } else if (isNode && !options.locateFile) {
    // Node's fetch cannot read file: URLs here, so pass the bytes (see TOOLCHAIN notes).
    const fsModule = 'node:fs/promises';  // a variable: bundlers for the web leave it alone
    const { readFile } = await import(/* @vite-ignore */ fsModule);
    moduleOptions.wasmBinary = await readFile(wasmUrl);
  }
  moduleOptions.locateFile = (file) => (options.locateFile ? options.locateFile(file, name) : wasmUrl.href);
  const module = await factory(moduleOptions);
  return new MaskAttn(module);
}

// ------------------------------------------------------------------------------------------ helpers

function shapeOf(t, name) {
  if (t === null || typeof t !== 'object') throw new MaskAttnTypeError(name, `must be a tensor { data, shape }, given ${describe(t)}`);
  const shape = t.shape ?? t.dims;
  if (!Array.isArray(shape) && !ArrayBuffer.isView(shape))
    throw new MaskAttnTypeError(`${name}.shape`, `must be an array of dimensions, given ${describe(shape)}`);
  const dims = Array.from(shape, Number);
  dims.forEach((d, i) => {
    if (!Number.isInteger(d) || d < 0) throw new MaskAttnRangeError(`${name}.shape`, `dimension ${i} must be a non-negative integer, given ${shape[i]}`);
  });
  return dims;
}

function product(dims) {
  return dims.reduce((a, b) => a * b, 1);
}

const MAX_BYTES = 2 ** 32;  // wasm32 memory

// A tensor's data, checked against its dims and the accepted typed-array types. `.data` is read
// once (it may be a getter, as on onnxruntime-web tensors); callers use the returned array.
function dataOf(t, name, dims, ...Types) {
  const data = t.data;
  const Type = Types.find((T) => data instanceof T);
  if (!Type) throw new MaskAttnTypeError(`${name}.data`, `must be a ${Types.map((T) => T.name).join(' or a ')}, given ${describe(data)}`);
  const n = product(dims);
  if (n * Type.BYTES_PER_ELEMENT >= MAX_BYTES)
    throw new MaskAttnRangeError(name, `shape [${dims}] needs ${n * Type.BYTES_PER_ELEMENT} bytes, more than WebAssembly memory can hold`);
  if (data.length !== n)
    throw new MaskAttnRangeError(`${name}.data`, `length must be ${n} for shape [${dims}], given ${data.length}`);
  return data;
}

function check4(dims, name, layout) {
  if (dims.length !== 4) throw new MaskAttnRangeError(`${name}.shape`, `must have 4 dimensions (${layout === 'blhd' ? '[B, L, H, D]' : '[B, H, L, D]'}), given [${dims}]`);
  if (product(dims) * 4 >= MAX_BYTES)
    throw new MaskAttnRangeError(name, `shape [${dims}] needs ${product(dims) * 4} bytes, more than WebAssembly memory can hold`);
  return dims;
}

// Logical [B, H, L, D] of a tensor given in `layout`.
function logical(dims, layout) {
  return layout === 'blhd' ? [dims[0], dims[2], dims[1], dims[3]] : dims;
}

function toInt32(x, name, length) {
  if (x == null) return null;
  let arr;
  if (x instanceof Int32Array) arr = x;
  else if (Array.isArray(x)) {
    x.forEach((e, i) => {
      if (!Number.isInteger(e)) throw new MaskAttnTypeError(name, `entry ${i} must be an integer, given ${describe(e)}`);
      if (e < -(2 ** 31) || e >= 2 ** 31) throw new MaskAttnRangeError(name, `entry ${i} must fit in 32 bits, given ${e}`);
    });
    arr = Int32Array.from(x);
  } else throw new MaskAttnTypeError(name, `must be an Int32Array or an array of integers, given ${describe(x)}`);
  if (length != null && arr.length !== length) throw new MaskAttnRangeError(name, `length must be ${length}, given ${arr.length}`);
  return arr;
}

function toFloat32(x, name, length) {
  if (x == null) return null;
  let arr;
  if (x instanceof Float32Array) arr = x;
  else if (Array.isArray(x)) arr = Float32Array.from(x, Number);
  else throw new MaskAttnTypeError(name, `must be a Float32Array or an array of numbers, given ${describe(x)}`);
  if (length != null && arr.length !== length) throw new MaskAttnRangeError(name, `length must be ${length}, given ${arr.length}`);
  return arr;
}

// A mask's shape, right-aligned to [B, Hq, Lq, Lk] like NumPy broadcasting ([Lq, Lk] -> [1, 1, Lq, Lk]),
// and its data.
function maskOf(m, name, Type) {
  if (m === null || typeof m !== 'object') throw new MaskAttnTypeError(name, `must be a tensor { data, shape }, given ${describe(m)}`);
  const dims = shapeOf(m, name);
  if (dims.length < 1 || dims.length > 4) throw new MaskAttnRangeError(`${name}.shape`, `must have 1 to 4 dimensions (broadcast to [B, Hq, Lq, Lk]), given [${dims}]`);
  const data = dataOf(m, name, dims, Type);
  return { shape: [...Array(4 - dims.length).fill(1), ...dims], data };
}

const ALIGN = { 'bottom-right': 0, 'top-left': 1 };
const POLICY = { zero: 0, nan: 1, uniform: 2 };
const KNOWN_OPTIONS = new Set(['scale', 'layout', 'causal', 'align', 'keyLengths', 'queryLengths', 'allowed', 'bias',
  'window', 'prefix', 'segments', 'alibiSlopes', 'softcap', 'fullyMasked', 'returnWeights', 'returnLse', 'returnStats']);

function checkWindow(w) {
  if (w == null) return [-1, -1];
  if ((!Array.isArray(w) && !ArrayBuffer.isView(w)) || w.length !== 2)
    throw new MaskAttnTypeError('window', `must be [left, right] (-1 = unbounded), given ${describe(w)}`);
  const [left, right] = Array.from(w, Number);
  for (const [side, x] of [['left', left], ['right', right]])
    if (!Number.isInteger(x) || x < -1) throw new MaskAttnRangeError('window', `${side} must be an integer >= -1 (-1 = unbounded), given ${x}`);
  // Any reach past 2^31 is unbounded in effect (lengths are far smaller); keeps the int64 conversion exact.
  return [Math.min(left, 2 ** 31), Math.min(right, 2 ** 31)];
}

// ------------------------------------------------------------------------------------------ API

/** A loaded module. Obtain with `await init()`. */
export class MaskAttn {
  constructor(module) {
    this._m = module;
    const info = module.backend();
    // The call's argument block: float64 fields in the order the C++ side publishes. Allocated
    // once; owned by this instance for the module's lifetime.
    this._fields = Object.fromEntries(module.callArgsLayout().split(',').map((name, i) => [name, i]));
    this._argsBytes = 8 * Object.keys(this._fields).length;
    this._args = module._malloc(this._argsBytes) >>> 0;
    /** { simd, arch, lanes, threads, version } */
    this.backend = Object.freeze({ simd: info.simd, arch: info.arch, lanes: info.lanes, threads: info.threads, version: info.version });
  }

  /**
   * O = softmax(Q·Kᵀ·scale + M)·V. Inputs are copied into wasm memory and results copied out,
   * so the caller keeps ownership of everything. See Workspace for repeated calls without copies.
   */
  attention(q, k, v, options = {}) {
    const plan = this._plan(q, k, v, options);
    const data = plan.data;
    return this._scoped((alloc) => {
      // Ownership: these buffers belong to this call and are freed when it ends.
      const ptr = {
        q: alloc(data.q.byteLength), k: alloc(data.k.byteLength), v: alloc(data.v.byteLength),
        out: alloc(plan.outCount * 4),
        weights: plan.returnWeights ? alloc(plan.weightsCount * 4) : 0,
        lse: plan.returnLse ? alloc(plan.lseCount * 4) : 0,
      };
      const stats = this._run(plan, ptr, alloc, (f32) => {
        f32.set(data.q, ptr.q >>> 2);
        f32.set(data.k, ptr.k >>> 2);
        f32.set(data.v, ptr.v >>> 2);
      });
      return this._results(plan, ptr, stats);
    });
  }

  /**
   * A key/value cache in wasm memory for token-by-token generation: append each step's keys and
   * values, attend the step's queries to everything held. See KVCache. Call `dispose()` when done.
   */
  createKVCache(config) {
    return new KVCache(this, config);
  }

  // The call's results, copied out of wasm memory (the caller owns them).
  _results(plan, ptr, stats) {
    const heap = this._m.HEAPF32;
    const result = { output: { data: heap.slice(ptr.out >>> 2, (ptr.out >>> 2) + plan.outCount), shape: plan.outShape } };
    if (plan.returnWeights) result.weights = { data: heap.slice(ptr.weights >>> 2, (ptr.weights >>> 2) + plan.weightsCount), shape: plan.weightsShape };
    if (plan.returnLse) result.lse = { data: heap.slice(ptr.lse >>> 2, (ptr.lse >>> 2) + plan.lseCount), shape: plan.lseShape };
    if (stats) result.stats = stats;
    return result;
  }

  // Runs body(alloc) with an allocator whose blocks belong to this call: all are freed when it
  // ends, on success and failure alike.
  _scoped(body) {
    const m = this._m;
    const blocks = [];
    const alloc = (bytes) => {
      const p = bytes > 0 ? m._malloc(bytes) >>> 0 : 0;  // >>> 0: addresses above 2 GiB stay positive
      if (bytes > 0 && p === 0)
        throw new MaskAttnRangeError('memory', `out of memory: could not allocate ${bytes} bytes in WebAssembly memory`);
      if (p) blocks.push(p);
      return p;
    };
    try {
      return body(alloc);
    } finally {
      blocks.forEach((b) => m._free(b));
    }
  }

  // One kernel call on tensors already placed at `ptr`: allocates the masks' and counters' blocks,
  // then writes (writeInputs(HEAPF32) first, if given: views are taken after every allocation,
  // since memory growth detaches older ones), calls, and returns the tile counters if asked for.
  // `invoke(args)` is the C++ entry point (attention() by default; a cache's kvAttend).
  _run(plan, ptr, alloc, writeInputs, invoke) {
    const masks = this._placeMasks(plan, alloc);
    const stats = plan.returnStats ? alloc(24) : 0;
    if (writeInputs) writeInputs(this._m.HEAPF32);
    this._writeMasks(plan, masks);
    this._call(plan, ptr, masks, stats, invoke);
    return plan.returnStats ? readStats(this._m, stats) : undefined;
  }

  /**
   * A reusable set of buffers in wasm memory for repeated calls with the same shapes: write inputs
   * into `ws.q`, `ws.k`, `ws.v` (zero-copy views), call `ws.run(options)`, read `ws.output`.
   * Call `dispose()` when done: the memory belongs to the workspace until then.
   */
  createWorkspace(shapes) {
    return new Workspace(this, shapes);
  }

  // Checks everything JavaScript can see and returns the call's plan (shapes, sizes, options).
  _plan(q, k, v, options) {
    if (options === null || typeof options !== 'object') throw new MaskAttnTypeError('options', `must be an object, given ${describe(options)}`);
    const layout = checkLayout(options.layout);
    const data = {};
    const dims = [[q, 'q'], [k, 'k'], [v, 'v']].map(([t, name]) => {
      const d = check4(shapeOf(t, name), name, layout);
      data[name] = dataOf(t, name, d, Float32Array);
      return d;
    });
    const plan = this._planShapes(dims[0], dims[1], dims[2], options);
    plan.data = data;
    return plan;
  }

  // The plan from 4-D shapes (in the options' layout) and options.
  _planShapes(qDims, kDims, vDims, options) {
    for (const key of Object.keys(options))
      if (!KNOWN_OPTIONS.has(key)) throw new MaskAttnTypeError('options', `unknown option '${key}' (known: ${[...KNOWN_OPTIONS].join(', ')})`);
    const layout = checkLayout(options.layout);
    const [B, Hq, Lq, D] = logical(qDims, layout);
    const [, Hkv, Lk] = logical(kDims, layout);
    const Dv = logical(vDims, layout)[3];
    const plan = { layout, B, Hq, Hkv, Lq, Lk, D, Dv, qSize: product(qDims), kSize: product(kDims), vSize: product(vDims) };
    // Each tensor's own logical dims go to the library, whose validation names any mismatch.
    [plan.q, plan.k, plan.v] = [qDims, kDims, vDims].map((d) => logical(d, layout));
    plan.outCount = B * Hq * Lq * Dv;
    plan.outShape = layout === 'blhd' ? [B, Lq, Hq, Dv] : [B, Hq, Lq, Dv];
    plan.returnWeights = bool(options.returnWeights, 'returnWeights');
    plan.returnLse = bool(options.returnLse, 'returnLse');
    plan.returnStats = bool(options.returnStats, 'returnStats');
    plan.weightsCount = B * Hq * Lq * Lk;
    if (plan.returnWeights && plan.weightsCount * 4 >= MAX_BYTES)
      throw new MaskAttnRangeError('returnWeights', `weights [${B}, ${Hq}, ${Lq}, ${Lk}] need ${plan.weightsCount * 4} bytes, more than WebAssembly memory can hold`);
    plan.weightsShape = [B, Hq, Lq, Lk];
    plan.lseCount = B * Hq * Lq;
    plan.lseShape = [B, Hq, Lq];

    if (options.scale !== undefined) {
      if (typeof options.scale !== 'number') throw new MaskAttnTypeError('scale', `must be a number, given ${describe(options.scale)}`);
      if (!Number.isFinite(options.scale)) throw new MaskAttnRangeError('scale', `must be finite, given ${options.scale}`);
      if (Math.abs(options.scale) > 3.4028234663852886e38) throw new MaskAttnRangeError('scale', `must fit in float32 (|scale| <= 3.4e38), given ${options.scale}`);
    }
    plan.scale = options.scale;
    plan.causal = bool(options.causal, 'causal');
    const align = options.align ?? 'bottom-right';
    if (!(align in ALIGN)) throw new MaskAttnTypeError('align', `must be 'bottom-right' or 'top-left', given ${describe(align)}`);
    plan.align = ALIGN[align];
    plan.keyLengths = toInt32(options.keyLengths, 'keyLengths', B);
    plan.queryLengths = toInt32(options.queryLengths, 'queryLengths', B);
    plan.allowed = null;
    plan.bias = null;
    if (options.allowed != null) ({ shape: plan.allowedShape, data: plan.allowed } = maskOf(options.allowed, 'allowed', Uint8Array));
    if (options.bias != null) ({ shape: plan.biasShape, data: plan.bias } = maskOf(options.bias, 'bias', Float32Array));
    [plan.windowLeft, plan.windowRight] = checkWindow(options.window);
    const prefix = options.prefix ?? 0;
    if (!Number.isInteger(prefix) || prefix < 0) throw new MaskAttnRangeError('prefix', `must be an integer >= 0, given ${describe(prefix)}`);
    plan.prefix = Math.min(prefix, 2 ** 31);  // a prefix past every key is the same as 2^31
    if (options.segments != null) {
      const s = options.segments;
      if (typeof s !== 'object' || s.query == null || s.key == null)
        throw new MaskAttnTypeError('segments', `must be { query, key } segment ids ([B*Lq] and [B*Lk]), given ${describe(s)}`);
      plan.querySegments = toInt32(flat(s.query), 'segments.query', B * Lq);
      plan.keySegments = toInt32(flat(s.key), 'segments.key', B * Lk);
    }
    plan.alibiSlopes = toFloat32(options.alibiSlopes, 'alibiSlopes', Hq);
    const softcap = options.softcap ?? 0;
    if (typeof softcap !== 'number') throw new MaskAttnTypeError('softcap', `must be a number, given ${describe(softcap)}`);
    if (!Number.isFinite(softcap) || softcap < 0) throw new MaskAttnRangeError('softcap', `must be finite and >= 0 (0 = off), given ${softcap}`);
    plan.softcap = softcap;
    const policy = options.fullyMasked ?? 'zero';
    if (!(policy in POLICY)) throw new MaskAttnTypeError('fullyMasked', `must be 'zero', 'nan' or 'uniform', given ${describe(policy)}`);
    plan.fullyMasked = POLICY[policy];
    return plan;
  }

  _placeMasks(plan, alloc) {
    return {
      keyLengths: plan.keyLengths ? alloc(plan.keyLengths.byteLength) : 0,
      queryLengths: plan.queryLengths ? alloc(plan.queryLengths.byteLength) : 0,
      allowed: plan.allowed ? alloc(Math.max(plan.allowed.byteLength, 1)) : 0,
      bias: plan.bias ? alloc(Math.max(plan.bias.byteLength, 4)) : 0,
      querySegments: plan.querySegments ? alloc(plan.querySegments.byteLength) : 0,
      keySegments: plan.keySegments ? alloc(plan.keySegments.byteLength) : 0,
      alibiSlopes: plan.alibiSlopes ? alloc(plan.alibiSlopes.byteLength) : 0,
    };
  }

  _writeMasks(plan, ptr) {
    const m = this._m;
    if (ptr.keyLengths) m.HEAP32.set(plan.keyLengths, ptr.keyLengths >>> 2);
    if (ptr.queryLengths) m.HEAP32.set(plan.queryLengths, ptr.queryLengths >>> 2);
    if (ptr.allowed) m.HEAPU8.set(plan.allowed, ptr.allowed);
    if (ptr.bias) m.HEAPF32.set(plan.bias, ptr.bias >>> 2);
    if (ptr.querySegments) m.HEAP32.set(plan.querySegments, ptr.querySegments >>> 2);
    if (ptr.keySegments) m.HEAP32.set(plan.keySegments, ptr.keySegments >>> 2);
    if (ptr.alibiSlopes) m.HEAPF32.set(plan.alibiSlopes, ptr.alibiSlopes >>> 2);
  }

  _call(plan, ptr, masks, stats, invoke = (args) => this._m.attention(args)) {
    const a = plan.allowedShape ?? [1, 1, 1, 1];
    const b = plan.biasShape ?? [1, 1, 1, 1];
    const args = {
      q: ptr.q, k: ptr.k, v: ptr.v, out: ptr.out,
      qB: plan.q[0], qH: plan.q[1], qL: plan.q[2], qD: plan.q[3], kB: plan.k[0], kH: plan.k[1], kL: plan.k[2], kD: plan.k[3],
      vB: plan.v[0], vH: plan.v[1], vL: plan.v[2], vD: plan.v[3],
      layout: plan.layout === 'blhd' ? 1 : 0,
      qSize: plan.qSize, kSize: plan.kSize, vSize: plan.vSize, outSize: plan.outCount,
      hasScale: plan.scale !== undefined, scale: plan.scale ?? 0,
      causal: plan.causal, align: plan.align,
      keyLengths: masks.keyLengths, queryLengths: masks.queryLengths,
      allowed: masks.allowed, allowedB: a[0], allowedH: a[1], allowedLq: a[2], allowedLk: a[3],
      bias: masks.bias, biasB: b[0], biasH: b[1], biasLq: b[2], biasLk: b[3],
      windowLeft: plan.windowLeft, windowRight: plan.windowRight, prefix: plan.prefix,
      querySegments: masks.querySegments, keySegments: masks.keySegments, alibiSlopes: masks.alibiSlopes,
      softcap: plan.softcap, fullyMasked: plan.fullyMasked,
      weights: ptr.weights, weightsSize: ptr.weights ? plan.weightsCount : 0,
      lse: ptr.lse, lseSize: ptr.lse ? plan.lseCount : 0, stats,
    };
    this._invoke(args, invoke);
  }

  // Fills the argument block (fields not named are 0) and calls invoke(address of the block).
  _invoke(args, invoke) {
    const block = new Float64Array(this._m.HEAPF64.buffer, this._args, this._argsBytes / 8);
    block.fill(0);
    for (const name in args) {
      const value = args[name];
      block[this._fields[name]] = typeof value === 'boolean' ? Number(value) : value;
    }
    this._check(invoke(this._args));
  }

  // Turns a C++ status code (0 = ok) into the error the library reported.
  _check(status) {
    if (status === 0) return;
    const cppArgument = this._m.lastErrorArgument();
    const argument = jsName(cppArgument);
    const full = this._m.lastErrorMessage();
    const message = full.startsWith(`${cppArgument}: `) ? full.slice(cppArgument.length + 2) : full;
    if (status === 2) throw new MaskAttnTypeError(argument, message);
    throw new MaskAttnRangeError(argument, message);
  }
}

function checkLayout(layout = 'bhld') {
  if (layout !== 'bhld' && layout !== 'blhd') throw new MaskAttnTypeError('layout', `must be 'bhld' or 'blhd', given ${describe(layout)}`);
  return layout;
}

function bool(x, name) {
  if (x === undefined) return false;
  if (typeof x !== 'boolean') throw new MaskAttnTypeError(name, `must be true or false, given ${describe(x)}`);
  return x;
}

function flat(x) {
  return Array.isArray(x) && Array.isArray(x[0]) ? x.flat() : x;
}

function readStats(m, ptr) {
  const s = m.HEAPF64.subarray(ptr >>> 3, (ptr >>> 3) + 3);
  return { tilesSkipped: s[0], tilesFull: s[1], tilesMixed: s[2] };
}

// The C++ library's argument names, in the JS API's spelling.
const JS_NAMES = {
  key_lengths: 'keyLengths', query_lengths: 'queryLengths', query_segments: 'segments.query',
  key_segments: 'segments.key', alibi_slopes: 'alibiSlopes', fully_masked: 'fullyMasked',
  out: 'output', weights: 'returnWeights',
  kv_heads: 'kvHeads', head_dim: 'headDim', value_dim: 'valueDim',
};
function jsName(arg) {
  const m = /^([a-z_]+)(.*)$/.exec(arg);
  return m && JS_NAMES[m[1]] ? JS_NAMES[m[1]] + m[2] : arg;
}

// ------------------------------------------------------------------------------------------ Workspace

/**
 * Buffers in wasm memory reused across calls with the same shapes. `q`, `k`, `v`, `output`,
 * `weights`, `lse` are Float32Array views straight into wasm memory (zero-copy). They are
 * re-created whenever memory grows (growth detaches old views), so always read them from the
 * workspace rather than keeping them across calls.
 */
export class Workspace {
  constructor(ma, shapes) {
    if (shapes === null || typeof shapes !== 'object') throw new MaskAttnTypeError('shapes', `must be { q, k, v, layout?, returnWeights?, returnLse? }, given ${describe(shapes)}`);
    this._ma = ma;
    this._m = ma._m;
    this._layout = checkLayout(shapes.layout);
    const dims = ['q', 'k', 'v'].map((name) => check4(shapeOf({ shape: shapes[name] }, name), name, this._layout));
    this._dims = dims;
    this.returnWeights = bool(shapes.returnWeights, 'returnWeights');
    this.returnLse = bool(shapes.returnLse, 'returnLse');
    const plan = ma._planShapes(dims[0], dims[1], dims[2], { layout: this._layout, returnWeights: this.returnWeights });
    this._count = { q: plan.qSize, k: plan.kSize, v: plan.vSize, output: plan.outCount,
      weights: this.returnWeights ? plan.weightsCount : 0, lse: this.returnLse ? plan.lseCount : 0 };
    this.shapes = { q: dims[0], k: dims[1], v: dims[2], output: plan.outShape, weights: plan.weightsShape, lse: plan.lseShape };
    this._ptr = {};
    for (const [name, n] of Object.entries(this._count)) {
      // Ownership: each block belongs to the workspace until dispose().
      const p = n > 0 ? this._m._malloc(n * 4) >>> 0 : 0;
      this._ptr[name] = p;
      if (n > 0 && p === 0) {
        this.dispose();
        throw new MaskAttnRangeError('memory', `out of memory: could not allocate ${n * 4} bytes for ${name}`);
      }
    }
  }

  _view(name) {
    if (!this._ptr) throw new MaskAttnRangeError('workspace', 'used after dispose()');
    const p = this._ptr[name];
    return new Float32Array(this._m.HEAPF32.buffer, p, this._count[name]);
  }
  get q() { return this._view('q'); }
  get k() { return this._view('k'); }
  get v() { return this._view('v'); }
  get output() { return this._view('output'); }
  get weights() { return this.returnWeights ? this._view('weights') : null; }
  get lse() { return this.returnLse ? this._view('lse') : null; }

  /** Runs attention on the workspace's q, k, v; results land in `output` (and weights, lse). */
  run(options = {}) {
    if (!this._ptr) throw new MaskAttnRangeError('workspace', 'used after dispose()');
    if (options?.layout !== undefined && options.layout !== this._layout)
      throw new MaskAttnRangeError('layout', `the workspace was created with '${this._layout}', given '${options.layout}'`);
    if (options?.returnWeights !== undefined || options?.returnLse !== undefined)
      throw new MaskAttnTypeError('options', 'returnWeights/returnLse are set when the workspace is created');
    if (options === null || typeof options !== 'object') throw new MaskAttnTypeError('options', `must be an object, given ${describe(options)}`);
    const plan = this._ma._planShapes(this._dims[0], this._dims[1], this._dims[2], { ...options, layout: this._layout });
    plan.returnWeights = this.returnWeights;
    plan.returnLse = this.returnLse;
    const p = this._ptr;
    const ptr = { q: p.q, k: p.k, v: p.v, out: p.output, weights: p.weights ?? 0, lse: p.lse ?? 0 };
    const stats = this._ma._scoped((alloc) => this._ma._run(plan, ptr, alloc));
    return stats ? { stats } : {};
  }

  /** Frees the workspace's wasm memory; views taken earlier must not be used afterwards. */
  dispose() {
    if (!this._ptr) return;
    for (const p of Object.values(this._ptr)) if (p) this._m._free(p);
    this._ptr = null;
  }
}

// ------------------------------------------------------------------------------------------ KVCache

const DTYPES = { float32: 0, float16: 1 };
const CONFIG_FIELDS = ['batch', 'kvHeads', 'capacity', 'headDim', 'valueDim', 'dtype', 'window'];
const APPEND_OPTIONS = new Set(['counts', 'layout']);
// Calls needing at most this many bytes of inputs and outputs reuse the cache's own scratch block
// (decode steps: no malloc per token); larger ones (a prompt's append, a long prefill) take a block
// for the call only, so one big call does not pin its memory for the cache's life.
const SCRATCH_KEEP = 1 << 20;

const align16 = (bytes) => Math.ceil(bytes / 16) * 16;

/**
 * Keys and values of earlier tokens, held in wasm memory, for token-by-token generation.
 * Create with `ma.createKVCache(config)`; `dispose()` frees it (twice is harmless; any other use
 * after dispose() throws). Semantics: docs/semantics.md ("KV cache").
 *
 *   const cache = ma.createKVCache({ batch: 1, kvHeads: 8, capacity: 4096, headDim: 128 });
 *   cache.append(k, v);                       // k [B, Hkv, T, D], v [B, Hkv, T, Dv]
 *   const { output } = cache.attend(q);      // q [B, Hq, Lq, D]: the newest Lq positions; causal
 */
export class KVCache {
  constructor(ma, config) {
    if (config === null || typeof config !== 'object')
      throw new MaskAttnTypeError('config', `must be { batch, kvHeads, capacity, headDim, valueDim?, dtype?, window? }, given ${describe(config)}`);
    for (const key of Object.keys(config))
      if (!CONFIG_FIELDS.includes(key)) throw new MaskAttnTypeError('config', `unknown field '${key}' (known: ${CONFIG_FIELDS.join(', ')})`);
    const field = (name, fallback) => {
      const x = config[name] ?? fallback;
      if (typeof x !== 'number') throw new MaskAttnTypeError(name, `must be a non-negative integer, given ${describe(x)}`);
      if (!Number.isSafeInteger(x) || x < 0) throw new MaskAttnRangeError(name, `must be a non-negative integer, given ${x}`);
      return x;
    };
    const batch = field('batch', 1);
    const kvHeads = field('kvHeads', 1);
    const capacity = field('capacity');
    const headDim = field('headDim');
    const valueDim = field('valueDim', headDim);
    const window = field('window', 0);
    const dtype = config.dtype ?? 'float32';
    if (!(dtype in DTYPES)) throw new MaskAttnTypeError('dtype', `must be 'float32' or 'float16', given ${describe(dtype)}`);
    const bytes = batch * kvHeads * capacity * (headDim + valueDim) * (dtype === 'float16' ? 2 : 4);
    if (bytes >= MAX_BYTES)
      throw new MaskAttnRangeError('capacity', `batch ${batch} x kvHeads ${kvHeads} x capacity ${capacity} x (headDim ${headDim} + valueDim ${valueDim}) ${dtype} values need ${bytes} bytes, more than WebAssembly memory can hold`);
    this._ma = ma;
    this._m = ma._m;
    // Ownership: the C++ KVCache (and its K/V storage) belongs to the module's handle table until
    // dispose(); this object holds its handle. The scratch block is this object's (see _block).
    const handle = this._m.kvCreate(batch, kvHeads, capacity, headDim, valueDim, DTYPES[dtype], window);
    if (handle < 0) ma._check(-handle);
    this._handle = handle;
    this._scratch = 0;
    this._scratchBytes = 0;
    /** The configuration, with defaults filled in (valueDim = headDim, window 0 = none). */
    this.config = Object.freeze({ batch, kvHeads, capacity, headDim, valueDim, dtype, window });
  }

  _live() {
    if (!this._handle) throw new MaskAttnRangeError('cache', 'used after dispose()');
  }

  // A block of `bytes` for one call's inputs and outputs: the cache's scratch when the call is
  // small (grown as needed, kept until dispose()), else a block belonging to the call (alloc).
  // Memory may grow here: take heap views afterwards.
  _block(bytes, alloc) {
    if (bytes <= this._scratchBytes) return this._scratch;
    if (bytes > SCRATCH_KEEP) return alloc(bytes);
    const size = Math.min(Math.max(bytes, 2 * this._scratchBytes, 4096), SCRATCH_KEEP);
    const p = this._m._malloc(size) >>> 0;
    if (p === 0) throw new MaskAttnRangeError('memory', `out of memory: could not allocate ${size} bytes in WebAssembly memory`);
    if (this._scratch) this._m._free(this._scratch);
    this._scratch = p;
    this._scratchBytes = size;
    return p;
  }

  /**
   * What each sequence holds (absolute positions: with a window, tokens seen): a fresh Int32Array
   * [batch] on every read, a copy the caller owns (not a view of wasm memory).
   */
  get lengths() {
    this._live();
    const B = this.config.batch;
    const p = this._m.kvLengths(this._handle) >>> 0;
    return B === 0 ? new Int32Array(0) : this._m.HEAP32.slice(p >>> 2, (p >>> 2) + B);
  }

  /** Bytes of K/V storage in wasm memory (constant for the cache's life). */
  get byteLength() {
    this._live();
    return this._m.kvByteLength(this._handle);
  }

  /**
   * Writes new positions at each sequence's current length, in place. k [B, Hkv, T, D] and
   * v [B, Hkv, T, Dv] ([B, T, Hkv, D] with layout 'blhd'): Float32Array, or for float16 caches also
   * Uint16Array (raw IEEE halves, stored as given; float input is rounded to nearest even); k and
   * v of the same kind. options.counts[b] <= T: sequence b takes its first counts[b] positions.
   * Appending past capacity (no window) is a RangeError naming the sequence; nothing is written.
   */
  append(k, v, options = {}) {
    this._live();
    if (options === null || typeof options !== 'object') throw new MaskAttnTypeError('options', `must be an object, given ${describe(options)}`);
    for (const key of Object.keys(options))
      if (!APPEND_OPTIONS.has(key)) throw new MaskAttnTypeError('options', `unknown option '${key}' (known: ${[...APPEND_OPTIONS].join(', ')})`);
    const layout = checkLayout(options.layout);
    const kDims = check4(shapeOf(k, 'k'), 'k', layout);
    const vDims = check4(shapeOf(v, 'v'), 'v', layout);
    const kData = this.config.dtype === 'float16'
      ? dataOf(k, 'k', kDims, Float32Array, Uint16Array)
      : dataOf(k, 'k', kDims, Float32Array);
    const half = kData instanceof Uint16Array;
    const vData = dataOf(v, 'v', vDims, half ? Uint16Array : Float32Array);
    const counts = toInt32(options.counts, 'counts', this.config.batch);
    const kBytes = align16(kData.byteLength);
    const vBytes = align16(vData.byteLength);
    const m = this._m;
    this._ma._scoped((alloc) => {
      const base = this._block(kBytes + vBytes + (counts ? counts.byteLength : 0), alloc);
      const ptr = { k: base, v: base + kBytes, counts: counts ? base + kBytes + vBytes : 0 };
      const Heap = half ? Uint16Array : Float32Array;
      new Heap(m.HEAPU8.buffer, ptr.k, kData.length).set(kData);
      new Heap(m.HEAPU8.buffer, ptr.v, vData.length).set(vData);
      if (counts) m.HEAP32.set(counts, ptr.counts >>> 2);
      const [kl, vl] = [logical(kDims, layout), logical(vDims, layout)];
      this._ma._invoke({
        k: ptr.k, v: ptr.v, kB: kl[0], kH: kl[1], kL: kl[2], kD: kl[3], vB: vl[0], vH: vl[1], vL: vl[2], vD: vl[3],
        layout: layout === 'blhd' ? 1 : 0, kSize: kData.length, vSize: vData.length, half, counts: ptr.counts,
      }, (args) => m.kvAppend(this._handle, args));
    });
  }

  /**
   * Attention of q [B, Hq, Lq, D] (the newest Lq positions of each sequence: query i of sequence b
   * is at position lengths[b] - Lq + i) over the positions the cache holds. Causal by default
   * (`causal: false` turns it off); every other option of attention() works the same, except
   * `keyLengths` (the cache's lengths). Weights are [B, Hq, Lq, max(lengths)]. Results are copies.
   */
  attend(q, options = {}) {
    this._live();
    if (options === null || typeof options !== 'object') throw new MaskAttnTypeError('options', `must be an object, given ${describe(options)}`);
    if (options.keyLengths !== undefined)
      throw new MaskAttnTypeError('keyLengths', 'is implied by the cache (each sequence\'s lengths): attend() does not take it');
    const layout = checkLayout(options.layout);
    const qDims = check4(shapeOf(q, 'q'), 'q', layout);
    const qData = dataOf(q, 'q', qDims, Float32Array);
    const { batch: B, kvHeads: Hkv, headDim: D, valueDim: Dv } = this.config;
    // q against the cache, named here as q (the library would name its own view of the keys).
    const [qB, Hq, , qD] = logical(qDims, layout);
    if (qB !== B) throw new MaskAttnRangeError('q', `batch size must be the cache's batch ${B}, given ${qB} (shape [${qDims}])`);
    if (qD !== D) throw new MaskAttnRangeError('q', `head dim must be the cache's headDim ${D}, given ${qD} (shape [${qDims}])`);
    if (Hq % Hkv !== 0) throw new MaskAttnRangeError('q', `head count must be a multiple of the cache's kvHeads ${Hkv} (GQA), given ${Hq} (shape [${qDims}])`);
    const Lk = this.lengths.reduce((a, b) => Math.max(a, b), 0);  // the key axis of masks and weights
    const kDims = layout === 'blhd' ? [B, Lk, Hkv, D] : [B, Hkv, Lk, D];
    const vDims = layout === 'blhd' ? [B, Lk, Hkv, Dv] : [B, Hkv, Lk, Dv];
    const plan = this._ma._planShapes(qDims, kDims, vDims, { ...options, causal: options.causal === undefined ? true : options.causal });
    const m = this._m;
    return this._ma._scoped((alloc) => {
      const bytes = [qData.byteLength, plan.outCount * 4, plan.returnWeights ? plan.weightsCount * 4 : 0, plan.returnLse ? plan.lseCount * 4 : 0].map(align16);
      const base = this._block(bytes.reduce((a, b) => a + b), alloc);
      const ptr = { q: base, k: 0, v: 0, out: base + bytes[0] };
      ptr.weights = plan.returnWeights ? ptr.out + bytes[1] : 0;
      ptr.lse = plan.returnLse ? ptr.out + bytes[1] + bytes[2] : 0;
      const stats = this._ma._run(plan, ptr, alloc, (f32) => f32.set(qData, ptr.q >>> 2), (args) => m.kvAttend(this._handle, args));
      return this._ma._results(plan, ptr, stats);
    });
  }

  /** Shortens sequences (rollback): lengths [batch], each in [0, current length]. */
  truncate(lengths) {
    this._live();
    const next = toInt32(lengths, 'lengths', this.config.batch);
    if (next === null) throw new MaskAttnTypeError('lengths', `must be an Int32Array or an array of integers, given ${describe(lengths)}`);
    this._ma._scoped((alloc) => {
      const p = this._block(next.byteLength, alloc);
      this._m.HEAP32.set(next, p >>> 2);
      this._ma._check(this._m.kvTruncate(this._handle, p, next.length));
    });
  }

  /** Empties every sequence (the memory stays the cache's). */
  reset() {
    this._live();
    this._ma._check(this._m.kvReset(this._handle));
  }

  /** Frees the cache's wasm memory. Twice is harmless; any other use afterwards throws. */
  dispose() {
    if (!this._handle) return;
    this._m.kvDestroy(this._handle);
    if (this._scratch) this._m._free(this._scratch);
    this._handle = 0;
    this._scratch = 0;
    this._scratchBytes = 0;
  }
}

export { VERSION as version };
export * from './masks.js';
