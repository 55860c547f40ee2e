#!/usr/bin/env node
// A zero-dependency static server for the maskattn demo page.
//
//   node scripts/serve.mjs [--port N]      (or PORT=N; default 8080, the next free port if taken)
//
// Serves only web/, js/, dist/ and docs/semantics.md of the repository, on 127.0.0.1, with a strict
// Content-Security-Policy (no inline scripts, no eval; 'wasm-unsafe-eval' lets WebAssembly compile)
// and cross-origin isolation headers. Tests import it: `const { url, close } = await start({ port: 0 })`.

import { createServer } from 'node:http';
import { readFile, stat } from 'node:fs/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import path from 'node:path';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const HOST = '127.0.0.1';

export const CSP = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; " +
  "img-src 'self' data:; connect-src 'self'; worker-src 'self'";

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

// What may be served: these folders, and these single files.
const DIRS = ['web', 'js', 'dist'];
const FILES = ['docs/semantics.md'];

function headers(extra = {}) {
  return {
    'Content-Security-Policy': CSP,
    'Cross-Origin-Opener-Policy': 'same-origin',
    'Cross-Origin-Embedder-Policy': 'require-corp',
    'Cross-Origin-Resource-Policy': 'same-origin',
    'X-Content-Type-Options': 'nosniff',
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
  if (!DIRS.includes(top) && !FILES.includes(rel)) return null;
  const file = path.join(root, rel);
  if (!file.startsWith(root + path.sep)) return null;
  return file;
}

async function handle(req, res, root) {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.setHeader('Allow', 'GET, HEAD');
    return send(res, 405, 'method not allowed\n');
  }
  const url = new URL(req.url, `http://${HOST}`);
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
  const file = resolve(url.pathname, root);
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
  res.writeHead(200, headers({ 'Content-Type': type, 'Content-Length': body.length }));
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
export async function start({ port = 8080, root = ROOT, quiet = true } = {}) {
  const server = createServer((req, res) => {
    handle(req, res, root).catch((error) => {
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
  const { url, close } = await start({ port, quiet: false });
  console.log(`maskattn demo: ${url}`);
  const stop = () => close().then(() => process.exit(0));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}
