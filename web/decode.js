// The decode panel: token-by-token generation through maskattn's KV cache. Each step appends the
// new token's K and V (cache.append, with per-sequence counts for a ragged batch) and attends the
// newest query of every sequence over what the cache holds (cache.attend with returnWeights). Shows
// the weights over the cached positions, the cache's slots (a ring with a sliding window) and how
// full it is. Q, K and V come from the page's seeded token embeddings (embedding.js). With RoPE on,
// the cache rotates each key by its position as it is appended and each query as it attends
// (createKVCache({ rope })); a plain float32 cache fed Q and K rotated here in JavaScript checks it.
// This file reads the panel's settings and wires it; decode-session.js runs the caches,
// decode-view.js draws, decode-code.js writes the step as code.

import { tokenize } from './embedding.js';
import { Heatmap } from './heatmap.js';
import { startSession, step, done, dispose } from './decode-session.js';
import { render } from './decode-view.js';

// Two sequences of a batch: the second is shorter (its prompt is padded) and finishes early.
const TEXTS = ['The cat sat on the mat and then it slept in the warm sun all day', 'Birds sing at dawn .'];
const PLAY_MS = 650;
const THETA = 10000;          // RoPE's usual base (Llama 2)

const int = (input, fallback, min, max) => {
  const n = Number.parseInt(input.value, 10);
  return Number.isFinite(n) ? Math.max(min, Math.min(max, n)) : fallback;
};
const shown = (typed) => (typed === '' ? '(empty)' : typed);

/** The window and the ring's capacity as the form asks for them, clamped; notes say what was adjusted. */
function ringSettings(els, longest, notes) {
  const windowOn = els.window.checked;
  const W = int(els.windowSize, 4, 1, 16);
  if (Number(els.capacity.min) !== W) els.capacity.min = String(W);
  const capacity = windowOn ? int(els.capacity, W + 2, W, 16) : longest;
  els.windowSize.disabled = !windowOn;
  els.capacity.disabled = !windowOn;
  const typedW = els.windowSize.value, typedC = els.capacity.value;
  if (windowOn && String(W) !== typedW.trim()) notes.push(`window ${shown(typedW)} is not a whole number in 1…16: using ${W}`);
  if (windowOn && String(capacity) !== typedC.trim()) notes.push(`capacity ${shown(typedC)} is not a whole number in ${W}…16: using ${capacity}`);
  els.windowSize.value = String(W);
  els.capacity.value = String(capacity);
  return { window: windowOn ? W : 0, capacity };
}

/** RoPE as the form asks for it (null when off), θ clamped to a number > 0. */
function ropeSettings(els, notes) {
  const ropeOn = els.rope.checked;
  els.ropeTheta.disabled = !ropeOn;
  els.ropeLayout.disabled = !ropeOn;
  const typedTheta = els.ropeTheta.value;
  const theta = Number(typedTheta) > 0 && Number.isFinite(Number(typedTheta)) ? Number(typedTheta) : THETA;
  if (ropeOn && String(theta) !== typedTheta.trim()) notes.push(`θ ${shown(typedTheta)} is not a number > 0: using ${theta}`);
  els.ropeTheta.value = String(theta);
  return ropeOn ? { theta, layout: els.ropeLayout.value } : null;
}

/** The session's settings from the form: { dtype, window, capacity, B, rope }; the notice says what was adjusted. */
function settings(els, texts) {
  const notes = [];
  const ring = ringSettings(els, Math.max(...texts.map((t) => t.length)), notes);
  const rope = ropeSettings(els, notes);
  if (els.notice) {
    els.notice.hidden = notes.length === 0;
    els.notice.textContent = notes.length ? `Adjusted: ${notes.join('; ')}.` : '';
  }
  return { dtype: els.dtype.value, ...ring, B: els.ragged.checked ? 2 : 1, rope };
}

function showError(els, error) {
  els.error.hidden = false;
  els.error.textContent = `maskattn rejected the call: ${error.message}`;
}

/** The buttons and inputs: Next, Play/Pause, Reset, and settings that replay the steps taken. */
function wire(els, { reset, next, stop, play, stepsTaken }) {
  els.form.addEventListener('submit', (e) => e.preventDefault());
  els.next.addEventListener('click', () => {
    stop();
    next();
  });
  els.play.addEventListener('click', play);
  els.reset.addEventListener('click', reset);
  // A new dtype, window size or capacity replays the steps taken so far into the new cache (they are
  // not thrown away); a different batch starts again.
  const replay = () => {
    const steps = stepsTaken();
    reset();
    for (let n = 0; n < steps; n++) if (!next()) break;
  };
  els.window.addEventListener('change', () => {
    // A ring two slots larger than the window: the slots picture shows what is held but not seen.
    if (els.window.checked) els.capacity.value = String((Number.parseInt(els.windowSize.value, 10) || 4) + 2);
    replay();
  });
  els.ragged.addEventListener('change', reset);
  for (const input of [els.dtype, els.windowSize, els.capacity, els.rope, els.ropeTheta, els.ropeLayout]) input.addEventListener('change', replay);
  // A typed number applies as soon as it is a whole number in range (not only when the box loses focus).
  let typed = 0;
  for (const input of [els.windowSize, els.capacity]) input.addEventListener('input', () => {
    clearTimeout(typed);
    const n = Number(input.value);
    if (!Number.isInteger(n) || n < Number(input.min) || n > Number(input.max)) return;
    typed = setTimeout(replay, 250);
  });
}

/**
 * The dtype select offers the module's cache dtypes (ma.kvDtypes: the library's table): the page's
 * options keep their labels, one the module lacks goes, and a dtype the page does not know is added
 * under its name.
 */
function offerDtypes(select, names) {
  for (const option of [...select.options]) if (!names.includes(option.value)) option.remove();
  for (const name of names) if (![...select.options].some((o) => o.value === name)) select.add(new Option(name, name));
}

/**
 * els: { root, form, dtype, window, windowSize, capacity, ragged, next, play, reset, status, memory, error, fills,
 *        weightsCanvas, weightsTooltip, weightsReadout, slotsCanvas, slotsTooltip, slotsReadout,
 *        call, json, notice, rope, ropeTheta, ropeLayout, ropeCheck }
 * getMa() -> the MaskAttn instance in use; expose(state) publishes the state for tests.
 */
export function setupDecode(els, { getMa, expose }) {
  const texts = TEXTS.map(tokenize);
  let s = null;          // the session: cache, lengths, the last step's result
  let timer = 0;
  const maps = {
    weights: new Heatmap(els.weightsCanvas, {
      tooltip: els.weightsTooltip, readout: els.weightsReadout, maxCell: 44,
      hint: 'Hover or tap a cell for the position, its token and its weight.',
    }),
    slots: new Heatmap(els.slotsCanvas, { tooltip: els.slotsTooltip, readout: els.slotsReadout, maxCell: 48, hint: 'Hover or tap a slot for the position it holds.' }),
  };
  const stop = () => {
    if (timer) clearInterval(timer);
    timer = 0;
    els.play.textContent = 'Play';
    els.play.setAttribute('aria-pressed', 'false');
  };
  const draw = () => {
    const state = render(els, maps, s, getMa());
    if (done(s)) stop();
    expose(state);
  };
  /** Runs fn on the session and draws it; on an error, says it and returns false. */
  const run = (fn) => {
    try {
      fn();
      els.error.hidden = true;
    } catch (error) {
      stop();
      showError(els, error);
      return false;
    }
    draw();
    return true;
  };
  /** A new session: a fresh cache holding the prompts (step 0). */
  const reset = () => {
    stop();
    const ma = getMa();
    if (!ma) return;
    offerDtypes(els.dtype, ma.kvDtypes);
    dispose(s);
    const cfg = settings(els, texts);
    s = {};
    run(() => startSession(ma, cfg, texts, s));
  };
  /** One generation step: the next token of every sequence that has one. */
  const next = () => (s?.cache && !done(s) ? run(() => step(s)) : false);
  const play = () => {
    if (timer) return stop();
    if (!s || done(s)) return;
    els.play.textContent = 'Pause';
    els.play.setAttribute('aria-pressed', 'true');
    next();
    timer = setInterval(() => {
      if (!next()) stop();
    }, PLAY_MS);
  };
  wire(els, { reset, next, stop, play, stepsTaken: () => s?.step ?? 0 });
  return { reset, next, stop };
}
