// Types of the mask-building helpers (js/masks.js), re-exported by js/index.d.ts.
import type { Align } from './index.js';

/** A dense mask tensor as the helpers return it. */
export interface MaskTensor<T extends ArrayBufferView> {
  data: T;
  shape: number[];
}

export interface AlignOptions {
  /** Where the diagonal sits when Lq != Lk: 'bottom-right' (default, d(i) = i + Lk - Lq) or 'top-left' (d(i) = i). */
  align?: Align;
}

/**
 * Causal mask [Lq, Lk] (1 = may attend): key j <= d(i). Same attention as `{ causal: true, align }`
 * without lengths. Lq, Lk: integers in [0, 2^23].
 */
export declare function createCausalMask(Lq: number, Lk: number, options?: AlignOptions): MaskTensor<Uint8Array>;

/**
 * Key padding mask [B, 1, 1, L]: 1 where key j < lengths[b]. Same attention as `{ keyLengths: lengths }`.
 * Requires 0 <= lengths[b] <= L.
 */
export declare function createPaddingMask(lengths: Int32Array | readonly number[], L: number): MaskTensor<Uint8Array>;

/**
 * Sliding-window mask [Lq, Lk]: 1 where d(i) - left <= j <= d(i) + right (-1 = unbounded side).
 * Same attention as `{ window: [left, right], align }`.
 */
export declare function createWindowMask(
  Lq: number,
  Lk: number,
  window: readonly [number, number],
  options?: AlignOptions,
): MaskTensor<Uint8Array>;

/**
 * Segment ids [L] for documents packed into one sequence: document n gets id n, the unused tail -1.
 * Use as `segments: { query: ids, key: ids }`; add keyLengths/queryLengths = sum(lengths) so the
 * tail (all -1) attends nothing. Requires lengths[n] >= 0 and sum(lengths) <= L.
 */
export declare function segmentsFromLengths(lengths: Int32Array | readonly number[], L: number): Int32Array;

/**
 * PyTorch key_padding_mask (nonzero/true = ignore) to maskattn `allowed` (1 = may attend).
 * [B, Lk] comes back as [B, 1, 1, Lk]; other shapes are kept.
 */
export declare function fromKeyPaddingMask(keyPaddingMask: {
  data: Uint8Array | readonly (boolean | number)[];
  shape?: readonly number[];
  dims?: readonly number[];
}): MaskTensor<Uint8Array>;

/** 0 where allowed, -Infinity where not (same shape): as `bias`, the same attention as the mask as `allowed`. */
export declare function toAdditiveMask(allowed: {
  data: Uint8Array;
  shape?: readonly number[];
  dims?: readonly number[];
}): MaskTensor<Float32Array>;
