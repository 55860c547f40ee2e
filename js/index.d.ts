// Public types of the maskattn JavaScript API (hand-written; checked by compiling
// tests/js/types/consumer.ts with `tsc --noEmit` in the tests).

/** A dense tensor: `shape` (or `dims`, as onnxruntime-web tensors have) in row-major order. */
export interface Tensor<T extends ArrayBufferView = Float32Array> {
  data: T;
  shape?: readonly number[];
  dims?: readonly number[];
}

export interface Backend {
  /** Whether the SIMD128 build is running. */
  readonly simd: boolean;
  /** The kernel: 'simd128' or 'scalar'. */
  readonly arch: string;
  /** Float lanes per vector (4 for SIMD128, 1 for scalar). */
  readonly lanes: number;
  readonly threads: number;
  readonly version: string;
}

export interface InitOptions {
  /** 'auto' (default) picks SIMD128 when the engine has it; true requires it; false uses the scalar build. */
  simd?: 'auto' | boolean;
  /** Where to load a .wasm file from (name is 'maskattn-simd.wasm' or 'maskattn-scalar.wasm'). */
  locateFile?: (file: string, build: 'maskattn-simd' | 'maskattn-scalar') => string;
  /** The .wasm bytes of the chosen build, for environments without fetch. */
  wasmBinary?: ArrayBuffer | Uint8Array;
}

export type Layout = 'bhld' | 'blhd';
export type Align = 'bottom-right' | 'top-left';
export type FullyMaskedPolicy = 'zero' | 'nan' | 'uniform';

/** Mask rules: every active rule must allow a (query, key) pair. See docs/semantics.md. */
export interface MaskOptions {
  /** Default 1/sqrt(D) (1 when D = 0). */
  scale?: number;
  /** Memory layout of q, k, v and the output: [B, H, L, D] (default) or [B, L, H, D]. */
  layout?: Layout;
  /** Keys j <= d(i) only. */
  causal?: boolean;
  /** Where d(i) sits when Lq != Lk: 'bottom-right' (default, i + kLen - qLen) or 'top-left' (i). */
  align?: Align;
  /** Valid keys per batch entry (padding at the end). */
  keyLengths?: Int32Array | readonly number[];
  /** Valid queries per batch entry; rows beyond are padding and attend nothing. */
  queryLengths?: Int32Array | readonly number[];
  /** Nonzero = may attend; shape broadcastable (right-aligned) to [B, Hq, Lq, Lk]. */
  allowed?: Tensor<Uint8Array>;
  /** Added to the logits (-Infinity masks); shape broadcastable to [B, Hq, Lq, Lk]. */
  bias?: Tensor<Float32Array>;
  /** Sliding window [left, right] around d(i); -1 = unbounded side. */
  window?: readonly [number, number];
  /** Prefix-LM: keys j < prefix are always visible. */
  prefix?: number;
  /** Segment ids (document masking): a pair needs equal ids. query: [B*Lq], key: [B*Lk] (flat or nested). */
  segments?: { query: Int32Array | readonly number[] | readonly (readonly number[])[]; key: Int32Array | readonly number[] | readonly (readonly number[])[] };
  /** ALiBi slope per query head: adds -slope[h] * |d(i) - j|. */
  alibiSlopes?: Float32Array | readonly number[];
  /** softcap c > 0: s = c * tanh(s / c), applied before bias and masks. */
  softcap?: number;
  /** What a row with no key to attend returns (default 'zero'). */
  fullyMasked?: FullyMaskedPolicy;
  /** Also return the tile counters of the kernel. */
  returnStats?: boolean;
}

export interface AttentionOptions extends MaskOptions {
  /** Return the attention weights [B, Hq, Lq, Lk] (O(Lq*Lk) memory). */
  returnWeights?: boolean;
  /** Return the natural-log log-sum-exp of each row [B, Hq, Lq]. */
  returnLse?: boolean;
}

export interface Stats {
  tilesSkipped: number;
  tilesFull: number;
  tilesMixed: number;
}

export interface AttentionResult {
  /** [B, Hq, Lq, Dv] (or [B, Lq, Hq, Dv] for layout 'blhd'). */
  output: { data: Float32Array; shape: number[] };
  weights?: { data: Float32Array; shape: number[] };
  lse?: { data: Float32Array; shape: number[] };
  stats?: Stats;
}

export interface WorkspaceShapes {
  q: readonly number[];
  k: readonly number[];
  v: readonly number[];
  layout?: Layout;
  returnWeights?: boolean;
  returnLse?: boolean;
}

/**
 * Buffers kept in wasm memory for repeated calls. Each property read returns a fresh zero-copy
 * view; a view kept across wasm memory growth is detached (length 0), so read the properties
 * again after anything that may allocate, and never use views after dispose().
 */
export declare class Workspace {
  readonly q: Float32Array;
  readonly k: Float32Array;
  readonly v: Float32Array;
  readonly output: Float32Array;
  readonly weights: Float32Array | null;
  readonly lse: Float32Array | null;
  readonly shapes: { q: number[]; k: number[]; v: number[]; output: number[]; weights: number[]; lse: number[] };
  run(options?: MaskOptions): { stats?: Stats };
  dispose(): void;
}

export declare class MaskAttn {
  readonly backend: Backend;
  attention(q: Tensor, k: Tensor, v: Tensor, options?: AttentionOptions): AttentionResult;
  createWorkspace(shapes: WorkspaceShapes): Workspace;
}

/** Loads the module once per build; later calls return the same instance. */
export declare function init(options?: InitOptions): Promise<MaskAttn>;
/** Whether this engine supports WebAssembly SIMD128. */
export declare function simdSupported(): boolean;

export declare class MaskAttnTypeError extends TypeError {
  readonly argument: string;
}
export declare class MaskAttnRangeError extends RangeError {
  readonly argument: string;
}
export declare const version: string;
export * from './masks.js';
