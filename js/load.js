// Loading: the engine probes (SIMD128, relaxed SIMD, threads), the choice of build, loading a build's
// glue and .wasm (ES module in browsers and workers, CommonJS with worker threads in Node), and the
// threaded builds' shared-memory views. init() resolves to a MaskAttn (attention.js) per build and
// thread count. The package's version is here too.
import { MaskAttnRangeError, MaskAttnTypeError, describe } from './errors.js';
import { MaskAttn } from './attention.js';
import { BUILDS, findBuild } from './builds.js';

/** The package's version (package.json). */
export const version = '0.1.0';

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
  // The build is the table's row (builds.js) with these features. Threads: where the table has a
  // threaded flavour (only SIMD builds: an engine with threads has SIMD128).
  const threaded = threadsOption !== 1 && findBuild({ simd, relaxed, threads: true }) !== undefined && threadsSupported();
  return (async () => {
    const threads = threaded ? (threadsOption === 'auto' ? Math.min(await engineCores(), AUTO_THREADS_MAX) : threadsOption) : 1;
    // 'auto' on a one-core engine: the single-threaded build (the same code without workers).
    const { name } = findBuild({ simd, relaxed, threads: threads > 1 });
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
  const urls = BUILDS.find((b) => b.name === name).urls();
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
