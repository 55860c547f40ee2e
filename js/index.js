// maskattn for JavaScript: masked scaled-dot-product attention in WebAssembly.
//
//   import { init } from 'maskattn';
//   const ma = await init();
//   const { output } = ma.attention(q, k, v, { causal: true });
//
// Semantics: docs/semantics.md. Tensors are { data: Float32Array, shape: number[] } (or `dims`, as
// onnxruntime-web tensors have). The C++ library validates every argument; this file checks what
// only JavaScript can see (typed-array kinds, shapes as arrays, data lengths) and moves memory;
// its limits (bytes per buffer, sequence length) are the library's own (MaskAttn.limits).

const VERSION = '0.1.0';

import { MaskAttnRangeError, MaskAttnTypeError, describe, typedKind, typedLength, typedPlace } from './errors.js';

export { MaskAttnRangeError, MaskAttnTypeError } from './errors.js';

// ------------------------------------------------------------------------------------------ init

// The smallest module using a SIMD128 instruction (i32x4.splat of a constant): validates only on
// engines with SIMD128.
const SIMD_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0,
  10, 10, 1, 8, 0, 65, 0, 253, 15, 253, 98, 11]);

// The smallest module using relaxed SIMD (f32x4.relaxed_madd of three splats, final opcode 0x105):
// validates only on engines with relaxed SIMD (Chromium 114+; Node 20 behind
// --experimental-wasm-relaxed-simd, Node 22+ by default).
const RELAXED_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0,
  10, 28, 1, 26, 0, 67, 0, 0, 0, 0, 253, 19, 67, 0, 0, 0, 0, 253, 19, 67, 0, 0, 0, 0, 253, 19,
  253, 133, 2, 11]);

function validates(bytes) {
  try {
    return WebAssembly.validate(bytes);
  } catch {
    return false;
  }
}

/** Whether this engine supports WebAssembly SIMD128. */
export function simdSupported() {
  return validates(SIMD_PROBE);
}

/** Whether this engine supports WebAssembly relaxed SIMD (fused multiply-add: the relaxed builds). */
export function relaxedSimdSupported() {
  return validates(RELAXED_PROBE);
}

const isNode = typeof process !== 'undefined' && process.versions != null && process.versions.node != null;

/**
 * Whether the threaded builds can run here: shared WebAssembly memory and workers, that is Node, or
 * a page (or worker) that is cross-origin isolated (served with `Cross-Origin-Opener-Policy:
 * same-origin` and `Cross-Origin-Embedder-Policy: require-corp`).
 */
export function threadsSupported() {
  if (typeof SharedArrayBuffer === 'undefined') return false;
  if (!isNode && (globalThis.crossOriginIsolated !== true || typeof Worker === 'undefined')) return false;
  try {
    return new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true }).buffer instanceof SharedArrayBuffer;
  } catch {
    return false;
  }
}

// Module specifiers in variables: bundlers for the web leave Node's built-ins alone.
const NODE_FS = 'node:fs/promises', NODE_OS = 'node:os', NODE_URL = 'node:url', NODE_MODULE = 'node:module';

/** Cores the engine reports: navigator.hardwareConcurrency, os.availableParallelism() in Node. */
async function engineCores() {
  if (isNode) {
    const os = await import(/* @vite-ignore */ NODE_OS);
    return os.availableParallelism ? os.availableParallelism() : os.cpus().length;
  }
  return globalThis.navigator?.hardwareConcurrency || 1;
}

// threads: 'auto' uses every core the engine reports, up to this many (each is a Web Worker with
// its own instance of the module). A call uses as many of them as pay off (the library's cost model).
const AUTO_THREADS_MAX = 16;
const THREADS_MAX = 256;

// The builds (scripts/build-wasm.sh). Each URL is written out as `new URL('literal', import.meta.url)`
// so that bundlers (Vite, webpack) find and emit every file. Threaded builds add a worker script
// (?no-inline: Vite would otherwise inline a file this small as a data: URL; see workerScript).
const BUILDS = {
  'maskattn-scalar': () => ({ glue: new URL('../dist/maskattn-scalar.mjs', import.meta.url), wasm: new URL('../dist/maskattn-scalar.wasm', import.meta.url) }),
  'maskattn-simd': () => ({ glue: new URL('../dist/maskattn-simd.mjs', import.meta.url), wasm: new URL('../dist/maskattn-simd.wasm', import.meta.url) }),
  'maskattn-simd-relaxed': () => ({ glue: new URL('../dist/maskattn-simd-relaxed.mjs', import.meta.url), wasm: new URL('../dist/maskattn-simd-relaxed.wasm', import.meta.url) }),
  'maskattn-simd-threads': () => ({
    glue: new URL('../dist/maskattn-simd-threads.mjs', import.meta.url), wasm: new URL('../dist/maskattn-simd-threads.wasm', import.meta.url),
    worker: new URL('../dist/maskattn-simd-threads.worker.js?no-inline', import.meta.url),
  }),
  'maskattn-simd-relaxed-threads': () => ({
    glue: new URL('../dist/maskattn-simd-relaxed-threads.mjs', import.meta.url), wasm: new URL('../dist/maskattn-simd-relaxed-threads.wasm', import.meta.url),
    worker: new URL('../dist/maskattn-simd-relaxed-threads.worker.js?no-inline', import.meta.url),
  }),
};

const instances = new Map();

// 'auto', true or false.
function autoOrBool(options, name) {
  const x = Object.hasOwn(options, name) ? options[name] ?? 'auto' : 'auto';
  if (x !== 'auto' && x !== true && x !== false) throw new MaskAttnTypeError(name, `must be 'auto', true or false, given ${describe(x)}`);
  return x;
}

/**
 * Loads a WebAssembly build (once per build and thread count; later calls return the same instance)
 * and says which runs in `ma.backend`. See InitOptions in index.d.ts.
 * options.simd: 'auto' (default: SIMD128 when the engine has it), true (require it) or false (scalar build).
 * options.relaxed: 'auto' (default: the relaxed-SIMD build when the engine validates it), true
 *   (require it) or false (the plain SIMD128 build).
 * options.threads: 'auto' (default: the engine's cores, at most 16, where threads can run) or a
 *   count; where threads cannot run (a page that is not cross-origin isolated) the single-threaded
 *   build loads and backend.threads is 1.
 * options.locateFile(file, build): URL of a file of the build (.wasm; .worker.js for threads), for
 *   hosting the files elsewhere.
 * options.wasmBinary: the .wasm bytes of the chosen build, for environments without fetch (pass
 *   simd, relaxed and threads explicitly so that the build is known).
 */
export function init(options = {}) {
  if (options === null || typeof options !== 'object') throw new MaskAttnTypeError('options', `must be an object, given ${describe(options)}`);
  const simdOption = autoOrBool(options, 'simd');
  const relaxedOption = autoOrBool(options, 'relaxed');
  const threadsOption = Object.hasOwn(options, 'threads') ? options.threads ?? 'auto' : 'auto';
  if (threadsOption !== 'auto') {
    if (typeof threadsOption !== 'number') throw new MaskAttnTypeError('threads', `must be 'auto' or a number of threads, given ${describe(threadsOption)}`);
    if (!Number.isInteger(threadsOption) || threadsOption < 1 || threadsOption > THREADS_MAX)
      throw new MaskAttnRangeError('threads', `must be an integer in [1, ${THREADS_MAX}] or 'auto', given ${threadsOption}`);
  }
  const haveSimd = simdSupported();
  if (simdOption === true && !haveSimd)
    return Promise.reject(new MaskAttnRangeError('simd', 'this engine does not support WebAssembly SIMD128 (use simd: false or \'auto\')'));
  const simd = simdOption === 'auto' ? haveSimd : simdOption;
  if (relaxedOption === true && !simd)
    return Promise.reject(new MaskAttnRangeError('relaxed', 'relaxed SIMD extends the SIMD128 build: it cannot go with simd: false'));
  if (relaxedOption === true && !relaxedSimdSupported())
    return Promise.reject(new MaskAttnRangeError('relaxed', 'this engine does not support WebAssembly relaxed SIMD (use relaxed: false or \'auto\'; Node 20 needs --experimental-wasm-relaxed-simd)'));
  const relaxed = simd && (relaxedOption === 'auto' ? relaxedSimdSupported() : relaxedOption);
  // Threads: only SIMD builds have a threaded flavour (an engine with threads has SIMD128).
  const threaded = simd && threadsOption !== 1 && threadsSupported();
  const build = simd ? `maskattn-simd${relaxed ? '-relaxed' : ''}${threaded ? '-threads' : ''}` : 'maskattn-scalar';
  return (async () => {
    const threads = threaded ? (threadsOption === 'auto' ? Math.min(await engineCores(), AUTO_THREADS_MAX) : threadsOption) : 1;
    // 'auto' on a one-core engine: the single-threaded build (the same code without workers).
    const name = threads > 1 ? build : build.replace(/-threads$/, '');
    const key = `${name}:${threads}`;
    if (!instances.has(key)) {
      const loading = load(name, threads, options).catch((error) => {
        instances.delete(key);  // a failed load may be retried
        throw error;
      });
      instances.set(key, loading);
    }
    return instances.get(key);
  })();
}

// Loading pattern (Emscripten 3.1.6). Every build has an ES-module glue for browsers and workers
// (-sENVIRONMENT=web,worker): imported from its URL, it fetches its .wasm (Node: we pass the bytes,
// as its fetch() cannot read file paths). Threaded builds start their Web Workers from a classic
// worker script, <build>.worker.js, which imports the same glue (mainScriptUrlOrBlob) and receives
// the compiled module and the shared memory; the glue resolves once every worker has loaded.
// In Node that ES glue cannot start threads (no Worker; the 3.1.6 glue needs require and __dirname
// there, which an ES module lacks), so threaded builds also ship a CommonJS glue for Node,
// <build>.node.cjs (-sENVIRONMENT=node, the same .wasm), loaded with createRequire, and its worker
// script <build>.node.worker.cjs (CommonJS: the package is "type": "module"). That glue sets
// globalThis.Worker while it creates its workers, synchronously: it is put back at once. Its workers
// are unref()'d so that they never keep a Node process alive (they sleep between calls).
async function load(name, threads, options) {
  const urls = BUILDS[name]();
  const moduleOptions = {};
  if (threads > 1) moduleOptions.maskattnWorkers = threads - 1;  // the calling thread is the first
  const located = (file, fallback) => (options.locateFile ? options.locateFile(file, name) : fallback);
  let module;
  if (isNode && threads > 1) {
    const [{ readFile }, { fileURLToPath }, { createRequire }] = await Promise.all(
      [NODE_FS, NODE_URL, NODE_MODULE].map((m) => import(/* @vite-ignore */ m)));
    const sibling = (suffix) => fileURLToPath(urls.wasm.href.replace(/\.wasm$/, suffix));
    if (options.wasmBinary) moduleOptions.wasmBinary = options.wasmBinary;
    else if (options.locateFile) moduleOptions.wasmBinary = new Uint8Array(await (await fetch(located(`${name}.wasm`))).arrayBuffer());
    else moduleOptions.wasmBinary = await readFile(urls.wasm);
    moduleOptions.locateFile = (file) => (file.endsWith('.worker.js') ? sibling('.node.worker.cjs') : fileURLToPath(urls.wasm));
    const factory = createRequire(import.meta.url)(sibling('.node.cjs'));
    const before = Object.getOwnPropertyDescriptor(globalThis, 'Worker');
    let pending;
    try {
      pending = factory(moduleOptions);
    } finally {
      if (before) Object.defineProperty(globalThis, 'Worker', before);
      else delete globalThis.Worker;
    }
    module = await pending;
    for (const worker of module.PThread.unusedWorkers) worker.unref();
  } else {
    const { default: factory } = await import(/* @vite-ignore */ urls.glue.href);
    if (options.wasmBinary) {
      moduleOptions.wasmBinary = options.wasmBinary;
    } else if (isNode && !options.locateFile) {
      // Node's fetch cannot read file: URLs here, so pass the bytes (see TOOLCHAIN notes).
      const { readFile } = await import(/* @vite-ignore */ NODE_FS);
      moduleOptions.wasmBinary = await readFile(urls.wasm);
    }
    const worker = threads > 1 ? await workerScript(located(`${name}.worker.js`, urls.worker.href)) : null;
    moduleOptions.locateFile = (file) => (file.endsWith('.worker.js') ? worker : located(file, urls.wasm.href));
    // The workers import the glue from here (they cannot see this module's URL).
    if (threads > 1) moduleOptions.mainScriptUrlOrBlob = urls.glue.href;
    module = await factory(moduleOptions);
  }
  if (threads > 1) trackSharedMemory(module);
  return new MaskAttn(module, { build: name, threads });
}

// A worker started from a data: URL (a bundler may inline small files) has an opaque origin and could
// not import the glue: such a script runs from a blob: URL instead (the page's origin).
async function workerScript(url) {
  if (!String(url).startsWith('data:')) return url;
  const text = await (await fetch(url)).text();
  return URL.createObjectURL(new Blob([text], { type: 'text/javascript' }));
}

// In a threaded build, wasm memory may grow on any thread, and the module's HEAP views are
// re-made only when the glue itself next looks: make them getters that follow the memory's
// current buffer, so that every view this file takes covers all of memory. (Shared memory never
// detaches old views; they just stop short of the new end.)
function trackSharedMemory(module) {
  const memory = module.wasmMemory;
  const kinds = { HEAPU8: Uint8Array, HEAP32: Int32Array, HEAPF32: Float32Array, HEAPF64: Float64Array };
  let buffer = null;
  const views = {};
  for (const [key, View] of Object.entries(kinds)) {
    Object.defineProperty(module, key, {
      configurable: true,
      get() {
        if (memory.buffer !== buffer) {
          buffer = memory.buffer;
          for (const [k, T] of Object.entries(kinds)) views[k] = new T(buffer);
        }
        return views[key];
      },
      set() {},  // the glue's own updates: the getter already follows the memory
    });
  }
}

// ------------------------------------------------------------------------------------------ helpers
//
// Reading the caller's objects. Everything a call takes from them is read once, here, before any
// wasm memory is touched: a tensor's `data` and `shape` (or `dims`), each shape entry, each option,
// each entry of an array option. Options and configurations are read from their own properties
// only, so nothing inherited from a polluted Object.prototype takes effect; tensors may be class
// instances whose `data` is a prototype getter (onnxruntime-web), so their prototypes count, but
// Object.prototype does not. A typed array's kind and length come from its internal slots (see
// typedKind), which a subclass's getters or a Proxy cannot forge: a Proxy is not a typed array.
// Small arrays (lengths, segment ids, slopes, counts) are copied at once; tensors and masks are
// checked again right before they are copied (a getter that ran in between may have detached or
// shrunk them), and every copy goes into a view of exactly its block's size. The blocks' real
// element counts go to the library, which checks every view against them.

const TYPES = { Float32Array, Uint8Array, Uint16Array, Int32Array };

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
const isArray = (x, name) => structural(name, () => Array.isArray(x));

// obj[key] (read once), unless the property would come from Object.prototype alone.
function prop(obj, key, name) {
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

// The own enumerable properties of an options or configuration object, each read once, in a
// null-prototype object. Names outside `known` are a TypeError naming `name`.
function ownFields(x, name, known, expected) {
  if (x === null || typeof x !== 'object' || isArray(x, name) || typedKind(x) !== undefined)
    throw new MaskAttnTypeError(name, `must be ${expected}, given ${describe(x)}`);
  const out = Object.create(null);
  for (const key of structural(name, () => Object.keys(x))) {
    if (!known.has(key)) throw new MaskAttnTypeError(name, `unknown ${name === 'config' ? 'field' : 'option'} '${key}' (known: ${[...known].join(', ')})`);
    out[key] = x[key];
  }
  return out;
}

// The entries of an Array or a typed array, each read once (at most `max`: a longer one is an
// error before anything is read), or null when x is neither.
function entries(x, max, name) {
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
function shapeOf(t, name) {
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

function product(dims) {
  return dims.reduce((a, b) => a * b, 1);
}

// A tensor's data, checked against its dims, the accepted kinds and the library's byte limit:
// { array, kind, count, dims, name, heapOffset }. `.data` is read once (it may be a getter, as on
// onnxruntime-web tensors). heapOffset: where the array sits in wasm memory when it is a view of it
// (a Workspace's view, say), so that it can still be read if memory grows before the copy.
function dataOf(t, name, dims, kinds, limits, heap) {
  const data = prop(t, 'data', `${name}.data`);
  const kind = typedKind(data);
  if (!kinds.includes(kind)) throw new MaskAttnTypeError(`${name}.data`, `must be a ${kinds.join(' or a ')}, given ${describe(data)}`);
  const count = product(dims);
  const bytes = count * TYPES[kind].BYTES_PER_ELEMENT;
  if (bytes > limits.maxBytes)
    throw new MaskAttnRangeError(name, `shape [${dims}] needs ${bytes} bytes, more than the ${limits.maxBytes} one buffer may have`);
  const length = typedLength(data);
  if (length !== count)
    throw new MaskAttnRangeError(`${name}.data`, `length must be ${count} for shape [${dims}], given ${length}`);
  const place = typedPlace(data);
  return { array: data, kind, count, bytes, dims, name: `${name}.data`, heapOffset: place.buffer === heap ? place.byteOffset : -1 };
}

function check4(dims, name, layout, limits) {
  if (dims.length !== 4) throw new MaskAttnRangeError(`${name}.shape`, `must have 4 dimensions (${layout === 'blhd' ? '[B, L, H, D]' : '[B, H, L, D]'}), given [${dims}]`);
  if (product(dims) * 4 > limits.maxBytes)
    throw new MaskAttnRangeError(name, `shape [${dims}] needs ${product(dims) * 4} bytes, more than the ${limits.maxBytes} one buffer may have`);
  return dims;
}

// Copies a checked input into its block at byte address ptr of wasm memory `m`: exactly
// input.count elements into a view of exactly that size.
function copyIn(m, ptr, input) {
  const View = TYPES[input.kind];
  const target = new View(m.HEAPU8.buffer, ptr, input.count);
  const length = typedLength(input.array);
  if (length === input.count) return target.set(input.array);
  // A view of wasm memory that growth has detached since: its bytes are still where they were.
  if (length === 0 && input.heapOffset >= 0) return m.HEAPU8.copyWithin(ptr, input.heapOffset, input.heapOffset + input.bytes);
  throw new MaskAttnRangeError(input.name, `changed while the call was being prepared (a getter detached or resized it): length is now ${length}, it was ${input.count}`);
}

// Logical [B, H, L, D] of a tensor given in `layout`.
function logical(dims, layout) {
  return layout === 'blhd' ? [dims[0], dims[2], dims[1], dims[3]] : dims;
}

// An Int32Array copy of x (an Int32Array or an array of integers) of the given length, or null
// when x is absent.
function toInt32(x, name, length) {
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
function segmentIds(x, name, B, L) {
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
function toFloat32(x, name, length) {
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

// A mask's shape, right-aligned to [B, Hq, Lq, Lk] like NumPy broadcasting ([Lq, Lk] -> [1, 1, Lq, Lk]),
// and its data (an input record, see dataOf).
function maskOf(m, name, kind, limits, heap) {
  if (m === null || typeof m !== 'object') throw new MaskAttnTypeError(name, `must be a tensor { data, shape }, given ${describe(m)}`);
  const dims = shapeOf(m, name);
  if (dims.length < 1 || dims.length > 4) throw new MaskAttnRangeError(`${name}.shape`, `must have 1 to 4 dimensions (broadcast to [B, Hq, Lq, Lk]), given [${dims}]`);
  const input = dataOf(m, name, dims, [kind], limits, heap);
  return { shape: [...Array(4 - dims.length).fill(1), ...dims], input };
}

// Option values by name: Maps, so that 'toString' or 'constructor' are not names.
const ALIGN = new Map([['bottom-right', 0], ['top-left', 1]]);
const POLICY = new Map([['zero', 0], ['nan', 1], ['uniform', 2]]);
const KNOWN_OPTIONS = new Set(['scale', 'layout', 'causal', 'align', 'keyLengths', 'queryLengths', 'allowed', 'bias',
  'window', 'prefix', 'segments', 'alibiSlopes', 'softcap', 'fullyMasked', 'returnWeights', 'returnLse', 'returnStats',
  'threads']);
const FLOAT_MAX = 3.4028234663852886e38;
const FLOAT_MIN_NORMAL = 2 ** -126;

function checkWindow(w) {
  if (w === undefined || w === null) return [-1, -1];
  const e = entries(w, 2, 'window');
  if (!e || e.length !== 2) throw new MaskAttnTypeError('window', `must be [left, right] (-1 = unbounded), given ${describe(w)}`);
  const [left, right] = e.values;
  for (const [side, x] of [['left', left], ['right', right]]) {
    if (typeof x !== 'number') throw new MaskAttnTypeError('window', `${side} must be an integer >= -1 (-1 = unbounded), given ${describe(x)}`);
    if (!Number.isInteger(x) || x < -1) throw new MaskAttnRangeError('window', `${side} must be an integer >= -1 (-1 = unbounded), given ${x}`);
  }
  // Any reach past 2^31 is unbounded in effect (lengths are far smaller); keeps the int64 conversion exact.
  return [Math.min(left, 2 ** 31), Math.min(right, 2 ** 31)];
}

// ------------------------------------------------------------------------------------------ API

/** A loaded module. Obtain with `await init()`. */
export class MaskAttn {
  constructor(module, { build, threads = 1 } = {}) {
    this._m = module;
    const info = module.backend();
    // Most threads a call may use: the module's worker pool and the calling thread.
    this._threads = info.pthreads ? threads : 1;
    // The call's argument block: float64 fields in the order the C++ side publishes. Allocated
    // once; owned by this instance for the module's lifetime.
    this._fields = Object.fromEntries(module.callArgsLayout().split(',').map((name, i) => [name, i]));
    this._argsBytes = 8 * Object.keys(this._fields).length;
    this._args = module._malloc(this._argsBytes) >>> 0;
    const limits = module.limits();
    /** The library's limits: { maxBytes } per buffer (2^31 - 1 in wasm32), { maxSequenceLength } (2^23). */
    this.limits = Object.freeze({ maxBytes: limits.maxBytes, maxSequenceLength: limits.maxSequenceLength });
    /** { simd, relaxed, arch, lanes, threads, build, version } */
    this.backend = Object.freeze({
      simd: info.simd, relaxed: info.relaxed, arch: info.arch, lanes: info.lanes, threads: this._threads,
      build: build ?? `maskattn-${info.simd ? 'simd' : 'scalar'}${info.relaxed ? '-relaxed' : ''}${info.pthreads ? '-threads' : ''}`,
      version: info.version,
    });
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
        q: alloc(data.q.bytes), k: alloc(data.k.bytes), v: alloc(data.v.bytes),
        out: alloc(plan.outCount * 4),
        weights: plan.returnWeights ? alloc(plan.weightsCount * 4) : 0,
        lse: plan.returnLse ? alloc(plan.lseCount * 4) : 0,
      };
      const stats = this._run(plan, ptr, alloc, () => {
        copyIn(this._m, ptr.q, data.q);
        copyIn(this._m, ptr.k, data.k);
        copyIn(this._m, ptr.v, data.v);
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
      // Every size was checked against the library's limit; this guard keeps a slip from reaching
      // _malloc, whose i32 argument would wrap (2^32 bytes would become a 0-byte block).
      if (!Number.isSafeInteger(bytes) || bytes < 0 || bytes > this.limits.maxBytes)
        throw new MaskAttnRangeError('memory', `a block of ${bytes} bytes is more than the ${this.limits.maxBytes} one buffer may have`);
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
  // then writes (writeInputs() first, if given: views are taken after every allocation, since
  // memory growth detaches older ones), calls, and returns the tile counters if asked for.
  // `invoke(args)` is the C++ entry point (attention() by default; a cache's kvAttend).
  _run(plan, ptr, alloc, writeInputs, invoke) {
    const masks = this._placeMasks(plan, alloc);
    const stats = plan.returnStats ? alloc(32) : 0;
    if (writeInputs) writeInputs();
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
    const opts = this._options(options);
    const layout = checkLayout(opts.layout);
    const data = {};
    const dims = [[q, 'q'], [k, 'k'], [v, 'v']].map(([t, name]) => {
      const d = check4(shapeOf(t, name), name, layout, this.limits);
      data[name] = this._input(t, name, d, ['Float32Array']);
      return d;
    });
    const plan = this._planShapes(dims[0], dims[1], dims[2], opts);
    plan.data = data;
    return plan;
  }

  // The options of a call: own properties, each read once (see ownFields).
  _options(options) {
    return ownFields(options, 'options', KNOWN_OPTIONS, 'an object');
  }

  // A tensor's data as an input record (see dataOf).
  _input(t, name, dims, kinds) {
    return dataOf(t, name, dims, kinds, this.limits, this._m.HEAPU8.buffer);
  }

  // The plan from 4-D shapes (in the options' layout) and options (read by _options).
  _planShapes(qDims, kDims, vDims, options) {
    const layout = checkLayout(options.layout);
    const [B, Hq, Lq, D] = logical(qDims, layout);
    const [, Hkv, Lk] = logical(kDims, layout);
    const Dv = logical(vDims, layout)[3];
    // A null prototype: a field never set is undefined, whatever Object.prototype holds.
    const plan = Object.assign(Object.create(null),
      { layout, B, Hq, Hkv, Lq, Lk, D, Dv, qSize: product(qDims), kSize: product(kDims), vSize: product(vDims) });
    const maxBytes = this.limits.maxBytes;
    // Each tensor's own logical dims go to the library, whose validation names any mismatch.
    [plan.q, plan.k, plan.v] = [qDims, kDims, vDims].map((d) => logical(d, layout));
    plan.outCount = B * Hq * Lq * Dv;
    if (plan.outCount * 4 > maxBytes)
      throw new MaskAttnRangeError('output', `output [${B}, ${Hq}, ${Lq}, ${Dv}] needs ${plan.outCount * 4} bytes, more than the ${maxBytes} one buffer may have`);
    plan.outShape = layout === 'blhd' ? [B, Lq, Hq, Dv] : [B, Hq, Lq, Dv];
    plan.returnWeights = bool(options.returnWeights, 'returnWeights');
    plan.returnLse = bool(options.returnLse, 'returnLse');
    plan.returnStats = bool(options.returnStats, 'returnStats');
    plan.weightsCount = B * Hq * Lq * Lk;
    if (plan.returnWeights && plan.weightsCount * 4 > maxBytes)
      throw new MaskAttnRangeError('returnWeights', `weights [${B}, ${Hq}, ${Lq}, ${Lk}] need ${plan.weightsCount * 4} bytes, more than the ${maxBytes} one buffer may have`);
    plan.weightsShape = [B, Hq, Lq, Lk];
    plan.lseCount = B * Hq * Lq;
    if (plan.returnLse && plan.lseCount * 4 > maxBytes)
      throw new MaskAttnRangeError('returnLse', `lse [${B}, ${Hq}, ${Lq}] needs ${plan.lseCount * 4} bytes, more than the ${maxBytes} one buffer may have`);
    plan.lseShape = [B, Hq, Lq];

    const scale = options.scale;
    if (scale !== undefined) {
      if (typeof scale !== 'number') throw new MaskAttnTypeError('scale', `must be a number, given ${describe(scale)}`);
      if (!Number.isFinite(scale)) throw new MaskAttnRangeError('scale', `must be finite, given ${scale}`);
      if (Math.abs(scale) > FLOAT_MAX) throw new MaskAttnRangeError('scale', `must fit in float32 (|scale| <= 3.4e38), given ${scale}`);
    }
    plan.scale = scale;
    plan.causal = bool(options.causal, 'causal');
    const align = options.align ?? 'bottom-right';
    if (!ALIGN.has(align)) throw new MaskAttnTypeError('align', `must be 'bottom-right' or 'top-left', given ${describe(align)}`);
    plan.align = ALIGN.get(align);
    plan.keyLengths = toInt32(options.keyLengths, 'keyLengths', B);
    plan.queryLengths = toInt32(options.queryLengths, 'queryLengths', B);
    plan.allowed = null;
    plan.bias = null;
    const heap = this._m.HEAPU8.buffer;
    if (options.allowed != null) ({ shape: plan.allowedShape, input: plan.allowed } = maskOf(options.allowed, 'allowed', 'Uint8Array', this.limits, heap));
    if (options.bias != null) ({ shape: plan.biasShape, input: plan.bias } = maskOf(options.bias, 'bias', 'Float32Array', this.limits, heap));
    [plan.windowLeft, plan.windowRight] = checkWindow(options.window);
    const prefix = options.prefix ?? 0;
    if (typeof prefix !== 'number') throw new MaskAttnTypeError('prefix', `must be an integer >= 0, given ${describe(prefix)}`);
    if (!Number.isInteger(prefix) || prefix < 0) throw new MaskAttnRangeError('prefix', `must be an integer >= 0, given ${prefix}`);
    plan.prefix = Math.min(prefix, 2 ** 31);  // a prefix past every key is the same as 2^31
    plan.querySegments = null;
    plan.keySegments = null;
    if (options.segments != null) {
      const s = options.segments;
      const ids = s !== null && typeof s === 'object' && !isArray(s, 'segments') && typedKind(s) === undefined
        ? ownFields(s, 'segments', new Set(['query', 'key']), '{ query, key }') : null;
      if (!ids || ids.query == null || ids.key == null)
        throw new MaskAttnTypeError('segments', `must be { query, key } segment ids ([B*Lq] and [B*Lk]), given ${describe(s)}`);
      plan.querySegments = segmentIds(ids.query, 'segments.query', B, Lq);
      plan.keySegments = segmentIds(ids.key, 'segments.key', B, Lk);
    }
    plan.alibiSlopes = toFloat32(options.alibiSlopes, 'alibiSlopes', Hq);
    const softcap = options.softcap ?? 0;
    if (typeof softcap !== 'number') throw new MaskAttnTypeError('softcap', `must be a number, given ${describe(softcap)}`);
    if (!Number.isFinite(softcap) || softcap < 0) throw new MaskAttnRangeError('softcap', `must be finite and >= 0 (0 = off), given ${softcap}`);
    // The kernel computes in float: a softcap that would be subnormal, 0 or infinite there is not
    // the softcap given (the library checks scale / softcap in float too).
    if (softcap > 0 && !(Math.fround(softcap) >= FLOAT_MIN_NORMAL && Math.fround(softcap) <= FLOAT_MAX))
      throw new MaskAttnRangeError('softcap', `must be 0 (off) or a normal float32 in [${FLOAT_MIN_NORMAL}, ${FLOAT_MAX}], given ${softcap}`);
    plan.softcap = softcap;
    const policy = options.fullyMasked ?? 'zero';
    if (!POLICY.has(policy)) throw new MaskAttnTypeError('fullyMasked', `must be 'zero', 'nan' or 'uniform', given ${describe(policy)}`);
    plan.fullyMasked = POLICY.get(policy);
    // Most threads for this call (C++ Options::threads): by default all the module has; never more
    // (a larger count is the module's); the library's cost model runs as many as pay off.
    const threads = options.threads ?? this._threads;
    if (typeof threads !== 'number') throw new MaskAttnTypeError('threads', `must be a number of threads, given ${describe(threads)}`);
    if (!Number.isInteger(threads) || threads < 1) throw new MaskAttnRangeError('threads', `must be an integer >= 1, given ${threads}`);
    plan.threads = Math.min(threads, this._threads);
    return plan;
  }

  // Blocks for the masks and small arrays (0 for an absent or empty one).
  _placeMasks(plan, alloc) {
    return {
      keyLengths: plan.keyLengths ? alloc(plan.keyLengths.byteLength) : 0,
      queryLengths: plan.queryLengths ? alloc(plan.queryLengths.byteLength) : 0,
      allowed: plan.allowed ? alloc(Math.max(plan.allowed.bytes, 1)) : 0,
      bias: plan.bias ? alloc(Math.max(plan.bias.bytes, 4)) : 0,
      querySegments: plan.querySegments ? alloc(plan.querySegments.byteLength) : 0,
      keySegments: plan.keySegments ? alloc(plan.keySegments.byteLength) : 0,
      alibiSlopes: plan.alibiSlopes ? alloc(plan.alibiSlopes.byteLength) : 0,
    };
  }

  // The small arrays are the plan's own copies; the masks are checked again as they are copied.
  _writeMasks(plan, ptr) {
    const m = this._m;
    if (ptr.keyLengths) m.HEAP32.set(plan.keyLengths, ptr.keyLengths >>> 2);
    if (ptr.queryLengths) m.HEAP32.set(plan.queryLengths, ptr.queryLengths >>> 2);
    if (ptr.allowed) copyIn(m, ptr.allowed, plan.allowed);
    if (ptr.bias) copyIn(m, ptr.bias, plan.bias);
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
      // The real element counts of the blocks (the library checks every view against them).
      allowedSize: plan.allowed ? plan.allowed.count : 0, biasSize: plan.bias ? plan.bias.count : 0,
      keyLengthsSize: plan.keyLengths?.length ?? 0, queryLengthsSize: plan.queryLengths?.length ?? 0,
      querySegmentsSize: plan.querySegments?.length ?? 0, keySegmentsSize: plan.keySegments?.length ?? 0,
      alibiSlopesSize: plan.alibiSlopes?.length ?? 0,
      threads: plan.threads,
    };
    this._invoke(args, invoke);
  }

  // Fills the argument block (fields not named are 0) and calls invoke(address of the block).
  _invoke(args, invoke) {
    const block = new Float64Array(this._m.HEAPF64.buffer, this._args, this._argsBytes / 8);
    block.fill(0);
    for (const name of Object.keys(args)) {  // own keys: never a field from a polluted prototype
      const value = args[name];
      if (!Object.hasOwn(this._fields, name)) throw new Error(`maskattn: internal error: no call field '${name}'`);
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

function readStats(m, ptr) {
  const s = m.HEAPF64.subarray(ptr >>> 3, (ptr >>> 3) + 4);
  return { tilesSkipped: s[0], tilesFull: s[1], tilesMixed: s[2], threadsUsed: s[3] };
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
  return m && Object.hasOwn(JS_NAMES, m[1]) ? JS_NAMES[m[1]] + m[2] : arg;
}

// ------------------------------------------------------------------------------------------ Workspace

/**
 * Buffers in wasm memory reused across calls with the same shapes. `q`, `k`, `v`, `output`,
 * `weights`, `lse` are Float32Array views straight into wasm memory (zero-copy). They are
 * re-created whenever memory grows (growth detaches old views), so always read them from the
 * workspace rather than keeping them across calls.
 */
export class Workspace {
  constructor(ma, config) {
    const shapes = ownFields(config, 'shapes', WORKSPACE_FIELDS, '{ q, k, v, layout?, returnWeights?, returnLse? }');
    this._ma = ma;
    this._m = ma._m;
    this._layout = checkLayout(shapes.layout);
    const dims = ['q', 'k', 'v'].map((name) => check4(shapeOf({ shape: shapes[name] }, name), name, this._layout, ma.limits));
    this._dims = dims;
    this.returnWeights = bool(shapes.returnWeights, 'returnWeights');
    this.returnLse = bool(shapes.returnLse, 'returnLse');
    const plan = ma._planShapes(dims[0], dims[1], dims[2],
      Object.assign(Object.create(null), { layout: this._layout, returnWeights: this.returnWeights, returnLse: this.returnLse }));
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
    const opts = this._ma._options(options);
    if (opts.layout !== undefined && opts.layout !== this._layout)
      throw new MaskAttnRangeError('layout', `the workspace was created with '${this._layout}', given ${describe(opts.layout)}`);
    if (opts.returnWeights !== undefined || opts.returnLse !== undefined)
      throw new MaskAttnTypeError('options', 'returnWeights/returnLse are set when the workspace is created');
    opts.layout = this._layout;
    const plan = this._ma._planShapes(this._dims[0], this._dims[1], this._dims[2], opts);
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

const WORKSPACE_FIELDS = new Set(['q', 'k', 'v', 'layout', 'returnWeights', 'returnLse']);
const DTYPES = new Map([['float32', 0], ['float16', 1]]);
const CONFIG_FIELDS = new Set(['batch', 'kvHeads', 'capacity', 'headDim', 'valueDim', 'dtype', 'window']);
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
  constructor(ma, fields) {
    const config = ownFields(fields, 'config', CONFIG_FIELDS, '{ batch, kvHeads, capacity, headDim, valueDim?, dtype?, window? }');
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
    if (!DTYPES.has(dtype)) throw new MaskAttnTypeError('dtype', `must be 'float32' or 'float16', given ${describe(dtype)}`);
    // Sizes and limits (bytes, capacity) are the library's to check: it does before it allocates.
    this._ma = ma;
    this._m = ma._m;
    // Ownership: the C++ KVCache (and its K/V storage) belongs to the module's handle table until
    // dispose(); this object holds its handle. The scratch block is this object's (see _block).
    const handle = this._m.kvCreate(batch, kvHeads, capacity, headDim, valueDim, DTYPES.get(dtype), window);
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
    const opts = ownFields(options, 'options', APPEND_OPTIONS, 'an object');
    const layout = checkLayout(opts.layout);
    const ma = this._ma;
    const kDims = check4(shapeOf(k, 'k'), 'k', layout, ma.limits);
    const vDims = check4(shapeOf(v, 'v'), 'v', layout, ma.limits);
    const kData = ma._input(k, 'k', kDims, this.config.dtype === 'float16' ? ['Float32Array', 'Uint16Array'] : ['Float32Array']);
    const half = kData.kind === 'Uint16Array';
    const vData = ma._input(v, 'v', vDims, [kData.kind]);
    const counts = toInt32(opts.counts, 'counts', this.config.batch);
    const kBytes = align16(kData.bytes);
    const vBytes = align16(vData.bytes);
    const m = this._m;
    ma._scoped((alloc) => {
      const base = this._block(kBytes + vBytes + (counts ? counts.byteLength : 0), alloc);
      const ptr = { k: base, v: base + kBytes, counts: counts ? base + kBytes + vBytes : 0 };
      copyIn(m, ptr.k, kData);
      copyIn(m, ptr.v, vData);
      if (counts) m.HEAP32.set(counts, ptr.counts >>> 2);
      const [kl, vl] = [logical(kDims, layout), logical(vDims, layout)];
      ma._invoke({
        k: ptr.k, v: ptr.v, kB: kl[0], kH: kl[1], kL: kl[2], kD: kl[3], vB: vl[0], vH: vl[1], vL: vl[2], vD: vl[3],
        layout: layout === 'blhd' ? 1 : 0, kSize: kData.count, vSize: vData.count, half, counts: ptr.counts,
        countsSize: counts ? counts.length : 0,
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
    const ma = this._ma;
    const opts = ma._options(options);
    if (opts.keyLengths !== undefined)
      throw new MaskAttnTypeError('keyLengths', 'is implied by the cache (each sequence\'s lengths): attend() does not take it');
    if (opts.causal === undefined) opts.causal = true;
    const layout = checkLayout(opts.layout);
    const qDims = check4(shapeOf(q, 'q'), 'q', layout, ma.limits);
    const qData = ma._input(q, 'q', qDims, ['Float32Array']);
    const { batch: B, kvHeads: Hkv, headDim: D, valueDim: Dv } = this.config;
    // q against the cache, named here as q (the library would name its own view of the keys).
    const [qB, Hq, , qD] = logical(qDims, layout);
    if (qB !== B) throw new MaskAttnRangeError('q', `batch size must be the cache's batch ${B}, given ${qB} (shape [${qDims}])`);
    if (qD !== D) throw new MaskAttnRangeError('q', `head dim must be the cache's headDim ${D}, given ${qD} (shape [${qDims}])`);
    if (Hq % Hkv !== 0) throw new MaskAttnRangeError('q', `head count must be a multiple of the cache's kvHeads ${Hkv} (GQA), given ${Hq} (shape [${qDims}])`);
    const Lk = this.lengths.reduce((a, b) => Math.max(a, b), 0);  // the key axis of masks and weights
    const kDims = layout === 'blhd' ? [B, Lk, Hkv, D] : [B, Hkv, Lk, D];
    const vDims = layout === 'blhd' ? [B, Lk, Hkv, Dv] : [B, Hkv, Lk, Dv];
    const plan = ma._planShapes(qDims, kDims, vDims, opts);
    const m = this._m;
    return ma._scoped((alloc) => {
      const bytes = [qData.bytes, plan.outCount * 4, plan.returnWeights ? plan.weightsCount * 4 : 0, plan.returnLse ? plan.lseCount * 4 : 0].map(align16);
      const base = this._block(bytes.reduce((a, b) => a + b), alloc);
      const ptr = { q: base, k: 0, v: 0, out: base + bytes[0] };
      ptr.weights = plan.returnWeights ? ptr.out + bytes[1] : 0;
      ptr.lse = plan.returnLse ? ptr.out + bytes[1] + bytes[2] : 0;
      const stats = ma._run(plan, ptr, alloc, () => copyIn(m, ptr.q, qData), (args) => m.kvAttend(this._handle, args));
      return ma._results(plan, ptr, stats);
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
