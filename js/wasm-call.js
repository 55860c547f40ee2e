// The wire protocol between JavaScript and the module (bindings/maskattn_embind.cpp): the call's
// argument block, scoped allocation, copying inputs in, invoking an entry point, copying results
// out, and turning the module's status into the API's error. MaskAttn, Workspace and KVCache each
// hold the module's one Wire and call it; they never call each other's private methods.
//
// Memory: every view of wasm memory is taken after the last allocation that precedes its use
// (growth detaches older views), through the module's HEAP* properties (in threaded builds those
// follow the shared memory: load.js trackSharedMemory). The module's functions (_malloc, _free,
// attention, kv*) are looked up at each call, never kept.
import { MaskAttnRangeError, MaskAttnTypeError, typedLength } from './errors.js';
import { TYPES, dataOf } from './read.js';
import { callFields, jsName, optionBlocks } from './plan.js';

export class Wire {
  /** `threads`: the most threads a call may use (the module's worker pool and the calling thread). */
  constructor(module, threads) {
    this.m = module;
    this.threads = threads;
    const limits = module.limits();
    this.limits = Object.freeze({
      maxBytes: limits.maxBytes, maxSequenceLength: limits.maxSequenceLength, maxRingLength: limits.maxRingLength,
    });
    // The call's argument block: float64 fields in the order the C++ side publishes. Allocated
    // once; owned by this Wire (the MaskAttn instance) for the module's lifetime.
    this.fields = Object.fromEntries(module.callArgsLayout().split(',').map((name, i) => [name, i]));
    this.argsCount = Object.keys(this.fields).length;
    this.args = module._malloc(8 * this.argsCount) >>> 0;
  }

  /** The wasm memory's buffer now (a tensor that is a view of it is read from its offset). */
  get heap() {
    return this.m.HEAPU8.buffer;
  }

  /** A tensor's data as an input record (read.js dataOf), within the library's limits. */
  input(t, name, dims, kinds) {
    return dataOf(t, name, dims, kinds, this.limits, this.heap);
  }

  // Runs body(alloc) with an allocator whose blocks belong to this call: all are freed when it
  // ends, on success and failure alike.
  scoped(body) {
    const m = this.m;
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

  // Copies a checked input record into its block at byte address ptr: exactly input.count
  // elements into a view of exactly that size.
  copyIn(ptr, input) {
    const m = this.m;
    const target = new TYPES[input.kind](m.HEAPU8.buffer, ptr, input.count);
    const length = typedLength(input.array);
    if (length === input.count) return target.set(input.array);
    // A view of wasm memory that growth has detached since: its bytes are still where they were.
    if (length === 0 && input.heapOffset >= 0) return m.HEAPU8.copyWithin(ptr, input.heapOffset, input.heapOffset + input.bytes);
    throw new MaskAttnRangeError(input.name, `changed while the call was being prepared (a getter detached or resized it): length is now ${length}, it was ${input.count}`);
  }

  // One kernel call on tensors already placed at `ptr` (q, k, v, out, weights, lse): allocates the
  // options' blocks and the counters' block, then writes (writeInputs() first, if given: views are
  // taken after every allocation), calls `entry(args address)` (the module's attention() by
  // default; a cache's kvAttend) and returns the tile counters if the plan asks for them.
  run(plan, ptr, alloc, writeInputs, entry = (args) => this.m.attention(args)) {
    // Blocks of the options' arrays (0 for an absent or empty one; a mask takes one even when empty).
    const blocks = optionBlocks(plan);
    const at = Object.create(null);
    for (const [name, records] of blocks)
      at[name] = records.map((r) => (r ? alloc(r.nonEmpty ? Math.max(r.bytes, TYPES[r.kind].BYTES_PER_ELEMENT) : r.bytes) : 0));
    const stats = plan.returnStats ? alloc(32) : 0;
    if (writeInputs) writeInputs();
    for (const [name, records] of blocks) records.forEach((r, i) => at[name][i] && this.copyIn(at[name][i], r));
    this.invoke(callFields(plan, ptr, at, stats), entry);
    if (!plan.returnStats) return undefined;
    const s = this.m.HEAPF64.subarray(stats >>> 3, (stats >>> 3) + 4);
    return { tilesSkipped: s[0], tilesFull: s[1], tilesMixed: s[2], threadsUsed: s[3] };
  }

  // The call's results, copied out of wasm memory (the caller owns them).
  results(plan, ptr, stats) {
    const heap = this.m.HEAPF32;
    const copy = (p, n) => heap.slice(p >>> 2, (p >>> 2) + n);
    const result = { output: { data: copy(ptr.out, plan.outCount), shape: plan.outShape } };
    if (plan.returnWeights) result.weights = { data: copy(ptr.weights, plan.weightsCount), shape: plan.weightsShape };
    if (plan.returnLse) result.lse = { data: copy(ptr.lse, plan.lseCount), shape: plan.lseShape };
    if (stats) result.stats = stats;
    return result;
  }

  // Fills the argument block (fields not named are 0) and calls entry(address of the block).
  invoke(args, entry) {
    const block = new Float64Array(this.m.HEAPF64.buffer, this.args, this.argsCount);
    block.fill(0);
    for (const name of Object.keys(args)) {  // own keys: never a field from a polluted prototype
      const value = args[name];
      if (!Object.hasOwn(this.fields, name)) throw new Error(`maskattn: internal error: no call field '${name}'`);
      block[this.fields[name]] = typeof value === 'boolean' ? Number(value) : value;
    }
    this.check(entry(this.args));
  }

  // Turns a module status code (0 = ok) into the error the library reported, named in JS spelling.
  check(status) {
    if (status === 0) return;
    const cppArgument = this.m.lastErrorArgument();
    const argument = jsName(cppArgument);
    const full = this.m.lastErrorMessage();
    const message = full.startsWith(`${cppArgument}: `) ? full.slice(cppArgument.length + 2) : full;
    if (status === 2) throw new MaskAttnTypeError(argument, message);
    throw new MaskAttnRangeError(argument, message);
  }
}
