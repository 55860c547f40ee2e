// Why a (query, key) pair is masked, in words: the rules of docs/semantics.md evaluated pair by pair.
// The page draws the mask maskattn itself decided; this only explains it (and cross-checks it).

/**
 * ctx: { Lq, Lk, causal, align, keyLengths, queryLengths, window: [l, r] | null, prefix,
 *        segQ: [B][Lq] | null, segK: [B][Lk] | null, allowed: Uint8Array [B, 1, Lq, Lk] | null }
 */
export function diagonal(ctx, b, i) {
  const kLen = ctx.keyLengths ? ctx.keyLengths[b] : ctx.Lk;
  const qLen = ctx.queryLengths ? ctx.queryLengths[b] : ctx.Lq;
  return ctx.align === 'top-left' ? i : i + (kLen - qLen);
}

/** The rules that forbid pair (i, j) of batch entry b (empty: allowed). */
export function blockingRules(ctx, b, i, j) {
  const reasons = [];
  if (ctx.keyLengths && j >= ctx.keyLengths[b]) reasons.push('key padding');
  if (ctx.queryLengths && i >= ctx.queryLengths[b]) reasons.push('query padding');
  const d = diagonal(ctx, b, i);
  const inPrefix = j < (ctx.prefix ?? 0);
  if (ctx.causal && j > d && !inPrefix) reasons.push('causal');
  if (ctx.window && !inPrefix) {
    const [left, right] = ctx.window;
    if (left >= 0 && j < d - left) reasons.push('window (left)');
    if (right >= 0 && j > d + right) reasons.push('window (right)');
  }
  if (ctx.segQ && ctx.segK && ctx.segQ[b][i] !== ctx.segK[b][j]) reasons.push('segments');
  if (ctx.allowed && !ctx.allowed[(b * ctx.Lq + i) * ctx.Lk + j]) reasons.push('custom mask');
  return reasons;
}
