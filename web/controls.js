// The demo's controls: the page's elements, what the form says (readState), and the small formatting
// helpers the panels share (JSON with NaN kept, index ranges, quoted tokens, select boxes).
import { PAD } from './embedding.js';

export const $ = (id) => document.getElementById(id);
export const el = {
  build: $('build'), backend: $('backend'), example: $('example'), sentences: $('sentences'),
  mode: $('qkv-mode'), seed: $('seed'), reseed: $('reseed'), heads: $('heads'), headDim: $('head-dim'),
  queriesAll: $('queries-all'), queriesDecode: $('queries-decode'), decodeN: $('decode-n'),
  causal: $('causal'), align: $('align'), keyPadding: $('key-padding'), queryPadding: $('query-padding'),
  window: $('window'), windowLeft: $('window-left'), windowRight: $('window-right'), prefix: $('prefix'),
  segments: $('segments'), segmentsInfo: $('segments-info'), alibi: $('alibi'), alibiInfo: $('alibi-info'),
  softcap: $('softcap'), softcapValue: $('softcap-value'), custom: $('custom'), customReset: $('custom-reset'),
  policy: $('policy'), sentencePick: $('sentence-pick'), headPick: $('head-pick'), status: $('status'),
  error: $('error'), call: $('call'), weightsTable: $('weights-table'), weightsJson: $('weights-json'),
  lessonRow: $('lesson-row'), lessons: $('lessons'), lessonsJson: $('lessons-json'),
  notice: $('notice'), callout: $('callout'), calloutText: $('callout-text'), calloutFix: $('callout-fix'),
};

/** JSON with NaN and infinities kept (as strings), typed arrays as arrays. */
export function toJson(x) {
  return JSON.stringify(x, (_, v) => {
    if (typeof v === 'number' && !Number.isFinite(v)) return String(v);
    if (ArrayBuffer.isView(v)) return Array.from(v, (n) => (Number.isFinite(n) ? n : String(n)));
    return v;
  });
}

/**
 * A whole number from a number box, within [min, max]. When what is used is not what the box says
 * (empty, not a whole number, out of range), a sentence for the page's notice goes into `notes`.
 */
function intValue(input, fallback, min, max, name, notes) {
  const typed = input.value.trim();
  const n = Number(typed);
  let used;
  if (typed === '' || !Number.isFinite(n)) used = fallback;
  else used = Math.max(min, Math.min(max, Math.trunc(n)));
  if (typed === '' || used !== n) notes.push(`${name} ${typed === '' ? '(empty)' : typed} is not a whole number in ${min} … ${max}: using ${used}`);
  return used;
}

export function readState() {
  const notes = [];
  let softcap = 0;
  if (el.softcap.checked) {
    const c = Number(el.softcapValue.value);
    softcap = Number.isFinite(c) && c > 0 ? c : 1;
    if (softcap !== c || el.softcapValue.value.trim() === '') notes.push(`softcap c = ${el.softcapValue.value.trim() || '(empty)'} must be a number above 0: using 1`);
  }
  return {
    text: el.sentences.value,
    mode: el.mode.value,
    seed: intValue(el.seed, 42, 0, 4294967295, 'seed', notes),
    heads: Number(el.heads.value),
    headDim: Number(el.headDim.value),
    decode: el.queriesDecode.checked ? intValue(el.decodeN, 1, 1, 64, 'decode queries', notes) : 0,
    causal: el.causal.checked,
    align: el.align.value,
    keyPadding: el.keyPadding.checked,
    queryPadding: el.queryPadding.checked,
    window: el.window.checked ? [intValue(el.windowLeft, -1, -1, 1024, 'window left', notes), intValue(el.windowRight, -1, -1, 1024, 'window right', notes)] : null,
    prefix: intValue(el.prefix, 0, 0, 1024, 'prefix P', notes),
    segments: el.segments.checked,
    alibi: el.alibi.checked,
    softcap,
    custom: el.custom.checked,
    policy: el.policy.value,
    notes,
  };
}


/** [2, 3, 4, 7] -> '2–4, 7'. */
export function ranges(list) {
  const parts = [];
  for (let n = 0; n < list.length; n++) {
    let m = n;
    while (m + 1 < list.length && list[m + 1] === list[m] + 1) m++;
    parts.push(m > n ? `${list[n]}–${list[m]}` : String(list[n]));
    n = m;
  }
  return parts.join(', ');
}

export function quoted(t) {
  return t === PAD ? PAD : `“${t}”`;
}

export function fillSelect(select, values, labels, fallback = values[0]) {
  const keep = select.value;
  if (select.options.length !== values.length || [...select.options].some((o, n) => o.textContent !== labels[n])) {
    select.replaceChildren(...values.map((v, n) => {
      const o = document.createElement('option');
      o.value = String(v);
      o.textContent = labels[n];
      return o;
    }));
  }
  select.value = values.map(String).includes(keep) ? keep : String(fallback);
}
