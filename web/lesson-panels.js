// The fully-masked-row lesson: one panel per way of handling a row with no key to attend (maskattn's
// 'zero' policy beside the naive JavaScript variants of lessons.js), built once, drawn per render.
import { Heatmap, COLORS, weightColor, short, shorter, full } from './heatmap.js';
import { LESSONS, naiveVariants, rowSums } from './lessons.js';
import { el, quoted } from './controls.js';
import { logitOf } from './options.js';

const lessonMaps = {};
/** The lesson panels, one article each, appended to the lessons section. */
export function buildLessonPanels() {
  for (const lesson of LESSONS) {
    const article = document.createElement('article');
    article.className = 'lesson';
    article.dataset.lesson = lesson.id;
    const h3 = document.createElement('h3');
    h3.textContent = lesson.title;
    const why = document.createElement('p');
    why.className = 'why';
    why.textContent = lesson.why;
    const box = document.createElement('div');
    box.className = 'map-box';
    const scroll = document.createElement('div');
    scroll.className = 'map-scroll';
    const canvas = document.createElement('canvas');
    canvas.tabIndex = 0;
    canvas.setAttribute('role', 'img');
    canvas.setAttribute('aria-label', `${lesson.title}: weights heatmap with a row-sum column. Arrow keys move between cells.`);
    scroll.append(canvas);
    const tip = document.createElement('div');
    tip.className = 'tooltip';
    tip.hidden = true;
    box.append(scroll, tip);
    const result = document.createElement('p');
    result.className = 'row-result';
    const readout = document.createElement('p');
    readout.className = 'readout';
    readout.setAttribute('aria-live', 'polite');
    article.append(h3, why, box, result, readout);
    el.lessons.append(article);
    lessonMaps[lesson.id] = {
      article, result,
      map: new Heatmap(canvas, { tooltip: tip, readout, hint: 'Hover or tap a cell for its numbers.', maxCell: 34, minCell: 12 }),
    };
  }
}

function vec(a) {
  return `[${Array.from(a, (x) => short(x, 2)).join(', ')}]`;
}

/**
 * Draws every panel for sentence b, head h: maskattn (through `ma`) and the naive variants on the
 * lesson's mask. Returns what the panels show (the page exposes it for tests).
 */
export function renderLessons(ma, st, P, ctx, slopes, b, h, allowed, options) {
  const { Lq, Lk, D } = P;
  const row = Number(el.lessonRow.value);
  const mask = new Uint8Array(Lq * Lk);
  for (let i = 0; i < Lq; i++) for (let j = 0; j < Lk; j++) mask[i * Lk + j] = i !== row && allowed(i, j) ? 1 : 0;
  const slice = (data, L, i0) => data.subarray(((b * P.H + h) * L + i0) * D, ((b * P.H + h) * L + i0 + L) * D);
  const q1 = slice(P.q, Lq, 0);
  const k1 = slice(P.k, Lk, 0);
  const v1 = slice(P.v, Lk, 0);

  // maskattn: the same sentence and head, the lesson's mask as `allowed`, the same logit terms.
  const o = { align: st.align, allowed: { data: mask, shape: [Lq, Lk] }, fullyMasked: 'zero', returnWeights: true, returnLse: true };
  if (options.keyLengths) o.keyLengths = [P.lengths[b]];
  if (options.queryLengths) o.queryLengths = [P.qLengths[b]];
  if (st.alibi) o.alibiSlopes = [slopes[h]];
  if (st.softcap > 0) o.softcap = st.softcap;
  const one = (data, L) => ({ data: Float32Array.from(data), shape: [1, 1, L, D] });
  const r = ma.attention(one(q1, Lq), one(k1, Lk), one(v1, Lk), o);

  const logits = new Float64Array(Lq * Lk);
  for (let i = 0; i < Lq; i++) for (let j = 0; j < Lk; j++) logits[i * Lk + j] = logitOf(st, P, ctx, slopes, b, h, i, j);
  const naive = naiveVariants(logits, mask, v1, Lq, Lk, D);
  const all = { zero: { weights: r.weights.data, output: r.output.data }, ...naive };

  const empty = Array.from({ length: Lq }, (_, i) => !mask.subarray(i * Lk, (i + 1) * Lk).some((x) => x));
  const exposed = { row, fullyMaskedRows: empty.map((e, i) => (e ? i : -1)).filter((i) => i >= 0), panels: {} };
  for (const lesson of LESSONS) {
    const { weights, output } = all[lesson.id];
    const sums = rowSums(weights, Lq, Lk);
    let total = 0;
    for (const x of output) total += x;
    const ui = lessonMaps[lesson.id];
    ui.map.update({
      rows: Lq, cols: Lk + 1, gapBeforeCol: Lk,
      rowLabels: P.queryTokens[b], colLabels: [...P.keyTokens[b], 'Σ'],
      rowLabelMuted: (i) => P.queryPos[b][i] >= P.lengths[b],
      rowMark: (i) => (empty[i] ? '∅' : null),
      highlightRow: row >= 0 ? row : null,
      cell: (i, j) => {
        if (j === Lk) {
          const s = sums[i];
          if (Number.isNaN(s)) return { fill: COLORS.nan, text: 'NaN', ink: '#ffffff' };
          const good = Math.abs(s - 1) < 1e-4 || (empty[i] && s === 0);
          return { fill: good ? '#e3f1e8' : '#fde2cc', text: s.toFixed(2), narrow: s.toFixed(1), ink: '#1f2933' };
        }
        const w = weights[i * Lk + j];
        if (Number.isNaN(w)) return { fill: COLORS.nan, text: 'NaN', ink: '#ffffff' };
        const m = mask[i * Lk + j];
        if (!m && w === 0) return { hatch: true };
        return { fill: weightColor(w), text: short(w), narrow: shorter(w), flag: !m };
      },
      info: (i, j) => {
        if (j === Lk) return `row ${i} ${quoted(P.queryTokens[b][i])}: weights sum to ${full(sums[i])}\noutput row ${vec(output.subarray(i * D, (i + 1) * D))}`;
        const w = weights[i * Lk + j];
        const m = mask[i * Lk + j];
        return `query ${i} ${quoted(P.queryTokens[b][i])} → key ${j} ${quoted(P.keyTokens[b][j])}\n${m ? 'allowed' : 'masked'}; weight ${full(w)}` +
          (m ? '' : w !== 0 && !Number.isNaN(w) ? '\na masked key that still got weight' : '');
      },
    });
    const rowW = row >= 0 ? weights.subarray(row * Lk, (row + 1) * Lk) : null;
    const rowO = row >= 0 ? output.subarray(row * D, (row + 1) * D) : null;
    ui.result.textContent = rowW
      ? `row ${row}: weights ${vec(rowW)}, Σ = ${Number.isNaN(sums[row]) ? 'NaN' : sums[row].toFixed(2)}; output ${vec(rowO)}. Σ O = ${full(total)}`
      : `no row chosen. Σ O = ${full(total)}`;
    ui.article.dataset.total = String(total);
    exposed.panels[lesson.id] = {
      rowWeights: rowW ? Array.from(rowW) : null, rowOutput: rowO ? Array.from(rowO) : null,
      rowSums: sums, totalOutput: total, weights: Array.from(weights), output: Array.from(output),
    };
  }
  return exposed;
}

