// From the controls' state to the library: the options of the call (maskOptions), the custom mask
// the user paints (customFor / resetCustom), and the context the rule explanations and the naive
// lessons evaluate pair by pair (rulesContext, logitOf: the pre-mask logit as the library forms it).
import { segmentIds } from './embedding.js';
import { diagonal } from './rules.js';

let custom = null;          // { key, data: Uint8Array [B, 1, Lq, Lk] }

/** Every cell of the custom mask allowed again (its size stays). */
export function resetCustom() {
  if (custom) custom.data.fill(1);
}


export function segmentsOf(P) {
  const k = P.keyTokens.map((row, b) => {
    const ids = segmentIds(row.slice(0, P.lengths[b]));
    return row.map((_, j) => (j < P.lengths[b] ? ids[j] : -1));
  });
  const q = P.queryPos.map((row, b) => row.map((pos) => (pos < P.lengths[b] ? k[b][pos] : -1)));
  return { q, k };
}

export function customFor(P) {
  const key = `${P.B}x${P.Lq}x${P.Lk}`;
  if (!custom || custom.key !== key) custom = { key, data: new Uint8Array(P.B * P.Lq * P.Lk).fill(1) };
  return custom.data;
}

/** The options passed to ma.attention, from the controls. */
export function maskOptions(st, P, seg) {
  const o = {};
  if (st.causal) o.causal = true;
  o.align = st.align;
  if (st.keyPadding) o.keyLengths = P.lengths;
  if (st.queryPadding) o.queryLengths = P.qLengths;
  if (st.window) o.window = st.window;
  if (st.prefix > 0) o.prefix = st.prefix;
  if (st.segments) o.segments = { query: seg.q.flat(), key: seg.k.flat() };
  if (st.custom) o.allowed = { data: customFor(P), shape: [P.B, 1, P.Lq, P.Lk] };
  return o;
}

export function rulesContext(st, P, seg) {
  return {
    Lq: P.Lq, Lk: P.Lk, causal: st.causal, align: st.align,
    keyLengths: st.keyPadding ? P.lengths : null, queryLengths: st.queryPadding ? P.qLengths : null,
    window: st.window, prefix: st.prefix, segQ: st.segments ? seg.q : null, segK: st.segments ? seg.k : null,
    allowed: st.custom ? customFor(P) : null,
  };
}

/** The pre-mask logit of (b, h, i, j), as the library forms it: q·k·scale -> softcap -> + ALiBi. */
export function logitOf(st, P, ctx, slopes, b, h, i, j) {
  const { D, H, Lq, Lk } = P;
  const qo = ((b * H + h) * Lq + i) * D;
  const ko = ((b * H + h) * Lk + j) * D;
  let s = 0;
  for (let d = 0; d < D; d++) s += P.q[qo + d] * P.k[ko + d];
  s *= D > 0 ? 1 / Math.sqrt(D) : 1;
  if (st.softcap > 0) s = st.softcap * Math.tanh(s / st.softcap);
  if (st.alibi) s += -slopes[h] * Math.abs(diagonal(ctx, b, i) - j);
  return s;
}

