// The maskattn demo page: tokens -> Q, K, V -> maskattn (WebAssembly) -> heatmaps.
// The effective mask, the weights and the output all come from the library; the fully-masked-row
// lesson puts maskattn next to naive JavaScript; the speed panel times the builds. This file loads
// maskattn and wires the page; each panel is its own module: main-panel.js (what maskattn computed,
// with callout.js over it and presets.js's examples), decode.js (the KV cache), branching.js
// (forks and a draft tree), lesson-panels.js, perf.js (speed) and real-model.js; controls.js reads
// the form, options.js turns it into the call's options, call-panels.js writes the call as code.

import { init, simdSupported } from '../js/index.js';
import { rng } from './random.js';
import { $, el } from './controls.js';
import { resetCustom } from './options.js';
import { buildLessonPanels } from './lesson-panels.js';
import { setupMainPanel, showError } from './main-panel.js';
import { pick, setExample, leaveExample } from './presets.js';
import { setupPerf } from './perf.js';
import { setupDecode } from './decode.js';
import { setupBranching } from './branching.js';

// State exposed for tests and the curious: window.__maskattnDemo.
const demo = (window.__maskattnDemo = { ready: false, renders: 0, errors: [] });

let ma = null;              // the MaskAttn instance used for the pictures
let perfUi = null;
let decodeUi = null;
const main = setupMainPanel({ demo, getMa: () => ma, afterRender: () => perfUi?.refreshLabel() });

/** Renders now; a failure shows as the error line, not as an uncaught exception. */
function renderNow() {
  try {
    main.render();
  } catch (error) {
    console.error('maskattn demo: render failed:', error);
    showError(error);
  }
}

let scheduled = false;
function schedule() {
  if (scheduled) return;
  scheduled = true;
  requestAnimationFrame(() => {
    scheduled = false;
    renderNow();
  });
}

/** The Tokens box, the examples list, the callout's button and the form's controls. */
function wireControls() {
  let textTimer = 0;
  el.sentences.addEventListener('input', () => {
    if (el.example.value !== 'custom') leaveExample();
    el.example.value = 'custom';
    clearTimeout(textTimer);
    textTimer = setTimeout(schedule, 150);
  });
  el.example.addEventListener('change', () => {
    if (el.example.value === 'custom') leaveExample();
    else setExample(el.example.value);
    schedule();
  });
  el.calloutFix.addEventListener('click', () => {
    el.queryPadding.checked = el.calloutFix.dataset.action === 'query-padding-on';
    // The pitfall shows on a padded sentence: from one without <pad>, go to the shortest.
    const b = Number(el.sentencePick.value) || 0;
    const problem = main.problem();
    if (problem && problem.lengths[b] === problem.Lk) pick.pendingSentence = problem.lengths.indexOf(Math.min(...problem.lengths));
    schedule();
  });
  el.reseed.addEventListener('click', () => {
    el.seed.value = String(Math.floor(rng(Date.now() >>> 0)() * 100000));
    schedule();
  });
  el.customReset.addEventListener('click', () => {
    resetCustom();
    schedule();
  });
  $('table-details').addEventListener('toggle', schedule);
  el.build.addEventListener('change', async () => {
    try {
      await loadBuild(el.build.value);
      schedule();
      decodeUi?.reset();
    } catch (error) {
      showError(error);
    }
  });
  const controls = $('controls');
  controls.addEventListener('submit', (e) => e.preventDefault());
  controls.addEventListener('change', (e) => {
    if (e.target === el.example || e.target === el.sentences) return;
    schedule();
  });
  controls.addEventListener('input', (e) => {
    if (e.target === el.sentences) return;
    if (e.target.type === 'number') schedule();
  });
  for (const s of [el.sentencePick, el.headPick, el.lessonRow]) s.addEventListener('change', schedule);
}

/** The start strip's guided examples. */
function wirePresets() {
  for (const button of document.querySelectorAll('button.preset')) {
    button.addEventListener('click', () => {
      const preset = button.dataset.preset;
      if (preset === 'kv-cache') {
        // Land on the picture, its one line of what to look for just above it (on a phone the panel's
        // text and form would fill the screen).
        $('decode-guide').hidden = false;
        $('decode-guide').scrollIntoView({ behavior: 'instant', block: 'start' });
        $('decode-next').focus({ preventScroll: true });
        return;
      }
      setExample(preset === 'padding' ? 'batch' : 'window');
      // Drawn now, not at the next frame: the scroll below lands on the callout as it will read.
      renderNow();
      // Land on the callout that says what to look for, the maps right under it.
      (el.callout.hidden ? $('views') : el.callout).scrollIntoView({ behavior: 'instant', block: 'start' });
    });
  }
}

/** Copy buttons: the code panels and the install line. */
function wireCopyButtons() {
  for (const button of document.querySelectorAll('button.copy')) {
    button.addEventListener('click', async () => {
      let ok = false;
      try {
        await navigator.clipboard.writeText($(button.dataset.copy).textContent);
        ok = true;
      } catch {
        // No clipboard access (an insecure origin, or permission denied): select the text instead.
        const range = document.createRange();
        range.selectNodeContents($(button.dataset.copy));
        getSelection().removeAllRanges();
        getSelection().addRange(range);
      }
      button.dataset.copied = String(ok);
      button.textContent = ok ? 'Copied' : 'Selected: press Ctrl+C';
      setTimeout(() => {
        button.dataset.copied = 'false';
        button.textContent = 'Copy';
      }, 1500);
    });
  }
}

async function loadBuild(value) {
  const simd = value === 'auto' ? 'auto' : value === 'simd';
  ma = await init({ simd });
  const be = ma.backend;
  el.backend.dataset.state = 'ready';
  el.backend.dataset.arch = be.arch;
  el.backend.textContent = `ma.backend: ${be.arch} · ${be.lanes} lane${be.lanes > 1 ? 's' : ''} · ${be.threads} thread${be.threads > 1 ? 's' : ''}` +
    `${be.relaxed ? ' · relaxed SIMD' : ''} · maskattn ${be.version}`;
  demo.backend = be;
}

// The install line: maskattn is not on the npm registry yet, so the page offers the package as this
// server packed it (npm start), or `npm pack` in a checkout when the server has none.
async function setupInstall(version) {
  let info = null;
  try {
    const r = await fetch('/install.json', { cache: 'no-store' });
    if (r.ok) info = await r.json();
  } catch {
    // A static host without the demo server: the npm pack line stays.
  }
  const line = $('install-line');
  const note = $('install-note');
  if (info?.tarball) {
    line.textContent = `npm install ${new URL(info.tarball, location.href)}`;
    note.textContent = 'in your project, while this server runs; maskattn is not on the npm registry yet (from a checkout: npm pack).';
  } else {
    line.textContent = 'npm pack';
    note.textContent = `in a checkout of maskattn writes maskattn-${version}.tgz: npm install it in your project (maskattn is not on the npm registry yet).`;
  }
  demo.install = { line: line.textContent, tarball: info?.tarball ?? null };
}

function startPerf() {
  perfUi = setupPerf({
    root: $('perf'), preset: $('perf-preset'), causal: $('perf-causal'), run: $('perf-run'), stop: $('perf-stop'),
    progress: $('perf-progress'), status: $('perf-status'), table: $('perf-table'), summary: $('perf-summary'),
    decode: $('perf-decode'), decodeSummary: $('perf-decode-summary'),
  }, {
    pageShape: () => {
      const problem = main.problem();
      return problem ? { B: problem.B, H: problem.H, Lq: problem.Lq, Lk: problem.Lk, D: problem.D } : { B: 1, H: 4, Lq: 6, Lk: 6, D: 8 };
    },
    builds: async () => ({ simd: simdSupported() ? await init({ simd: true }) : null, scalar: await init({ simd: false }) }),
    onResult: (result) => {
      demo.perf = result;
    },
  });
}

function startDecode() {
  decodeUi = setupDecode({
    root: $('decode'), form: $('decode-controls'), dtype: $('decode-dtype'), window: $('decode-window'),
    windowSize: $('decode-window-size'), capacity: $('decode-capacity'), ragged: $('decode-ragged'),
    next: $('decode-next'), play: $('decode-play'), reset: $('decode-reset'), status: $('decode-status'),
    error: $('decode-error'), fills: $('decode-fills'), memory: $('decode-memory'),
    weightsCanvas: $('decode-weights-canvas'), weightsTooltip: $('decode-weights-tooltip'), weightsReadout: $('decode-weights-readout'),
    slotsCanvas: $('decode-slots-canvas'), slotsTooltip: $('decode-slots-tooltip'), slotsReadout: $('decode-slots-readout'),
    call: $('decode-call'), json: $('decode-json'), notice: $('decode-notice'),
    rope: $('decode-rope'), ropeTheta: $('decode-rope-theta'), ropeLayout: $('decode-rope-layout'), ropeCheck: $('decode-rope-check'),
  }, {
    getMa: () => ma,
    expose: (state) => {
      demo.decode = state;
      demo.decodeRenders = (demo.decodeRenders ?? 0) + 1;
    },
  });
  decodeUi.reset();
}

function startBranching() {
  setupBranching({
    fork: $('fork-run'), verify: $('tree-verify'), keep: $('tree-keep'), path: $('tree-path'),
    status: $('branching-status'), error: $('branching-error'),
    pagesCanvas: $('pages-canvas'), pagesTooltip: $('pages-tooltip'), pagesReadout: $('pages-readout'),
    treeCanvas: $('tree-canvas'), treeTooltip: $('tree-tooltip'), treeReadout: $('tree-readout'),
    call: $('branching-call'), json: $('branching-json'),
  }, {
    getMa: () => ma,
    expose: (state) => {
      demo.branching = state;
      demo.branchingRenders = (demo.branchingRenders ?? 0) + 1;
    },
  }).reset();
}

async function start() {
  setExample('sentence');
  if (!simdSupported()) el.build.querySelector('option[value="simd"]').disabled = true;
  buildLessonPanels();
  try {
    await loadBuild('auto');
  } catch (error) {
    el.backend.dataset.state = 'error';
    el.backend.textContent = 'WebAssembly failed to load';
    el.error.hidden = false;
    el.error.textContent = `maskattn could not be loaded: ${error.message}` + (error instanceof EvalError
      ? ' — the WebAssembly glue evaluates strings, which this page’s Content-Security-Policy forbids (build it with -sDYNAMIC_EXECUTION=0).'
      : '');
    console.error('maskattn demo: init failed:', error);
    return;
  }
  await setupInstall(ma.backend.version);
  startPerf();
  main.render();
  startDecode();
  startBranching();
  demo.ready = true;
  document.body.dataset.ready = 'true';
}

wireControls();
wirePresets();
wireCopyButtons();
start();
