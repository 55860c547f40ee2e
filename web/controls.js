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
};

/** JSON with NaN and infinities kept (as strings), typed arrays as arrays. */
export function toJson(x) {
  return JSON.stringify(x, (_, v) => {
    if (typeof v === 'number' && !Number.isFinite(v)) return String(v);
    if (ArrayBuffer.isView(v)) return Array.from(v, (n) => (Number.isFinite(n) ? n : String(n)));
    return v;
  });
}

function intValue(input, fallback, min, max) {
  const n = Number.parseInt(input.value, 10);
  if (!Number.isFinite(n)) return fallback;
  return Math.max(min, Math.min(max, n));
}

export function readState() {
  return {
    text: el.sentences.value,
    mode: el.mode.value,
    seed: intValue(el.seed, 42, 0, 4294967295),
    heads: Number(el.heads.value),
    headDim: Number(el.headDim.value),
    decode: el.queriesDecode.checked ? intValue(el.decodeN, 1, 1, 64) : 0,
    causal: el.causal.checked,
    align: el.align.value,
    keyPadding: el.keyPadding.checked,
    queryPadding: el.queryPadding.checked,
    window: el.window.checked ? [intValue(el.windowLeft, -1, -1, 1024), intValue(el.windowRight, -1, -1, 1024)] : null,
    prefix: intValue(el.prefix, 0, 0, 1024),
    segments: el.segments.checked,
    alibi: el.alibi.checked,
    softcap: el.softcap.checked ? Math.max(0.01, Number(el.softcapValue.value) || 1) : 0,
    custom: el.custom.checked,
    policy: el.policy.value,
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
