// The demo server (scripts/serve.mjs) against raw requests: request targets are written to the
// socket byte for byte (node:net), so nothing normalises `..`, `%2e%2e` or `//` on the way, as
// fetch() and browsers do before a request leaves. Covered: paths out of the served folders in every
// spelling, symbolic links leading out of them, the Host header (DNS rebinding), non-origin-form
// targets, and the headers (CSP with frame-ancestors 'none').
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { mkdtempSync, mkdirSync, writeFileSync, symlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { start, CSP } from '../../scripts/serve.mjs';

// One raw HTTP/1.1 exchange: `target` goes on the request line as given.
function raw(port, target, { host = `127.0.0.1:${port}`, method = 'GET', extra = '' } = {}) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk) => { data += chunk; });
    socket.on('end', () => {
      const [head, ...body] = data.split('\r\n\r\n');
      const [status, ...lines] = head.split('\r\n');
      const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
      resolve({ status: Number(status.split(' ')[1]), headers, body: body.join('\r\n\r\n') });
    });
    socket.on('error', reject);
    const hostLine = host === null ? '' : `Host: ${host}\r\n`;
    socket.write(`${method} ${target} HTTP/1.1\r\n${hostLine}Connection: close\r\n${extra}\r\n`);
  });
}

let server;
let tmp;
let sandbox;  // a served tree with symbolic links in it, in a temporary folder
before(async () => {
  server = await start({ port: 0 });
  tmp = mkdtempSync(path.join(tmpdir(), 'maskattn-serve-'));
  writeFileSync(path.join(tmp, 'secret.txt'), 'secret outside the served folders\n');
  const root = path.join(tmp, 'root');
  for (const dir of ['web', 'js', 'dist', 'docs', 'private']) mkdirSync(path.join(root, dir), { recursive: true });
  writeFileSync(path.join(root, 'web', 'index.html'), '<!doctype html><title>t</title>\n');
  writeFileSync(path.join(root, 'js', 'a.js'), 'export const a = 1;\n');
  writeFileSync(path.join(root, 'private', 'key.txt'), 'private\n');
  writeFileSync(path.join(root, 'package.json'), '{}\n');
  symlinkSync(path.join(tmp, 'secret.txt'), path.join(root, 'web', 'secret.txt'));  // a file out of the tree
  symlinkSync(path.join(root, 'private'), path.join(root, 'web', 'private'));     // a folder out of web/
  symlinkSync(tmp, path.join(root, 'web', 'up'));                                 // a folder above the tree
  symlinkSync('/etc', path.join(root, 'dist', 'etc'));
  symlinkSync(path.join(root, 'js', 'a.js'), path.join(root, 'web', 'also-a.js'));  // leaves web/ into js/: refused too
  symlinkSync(path.join(root, 'web', 'index.html'), path.join(root, 'web', 'home.html'));  // stays inside web/: fine
  symlinkSync(path.join(root, 'private', 'key.txt'), path.join(root, 'docs', 'semantics.md'));  // a doc leading out of docs/
  symlinkSync(path.join(root, 'private', 'key.txt'), path.join(root, 'docs', 'leak.md'));
  sandbox = await start({ port: 0, root });
});
after(async () => {
  await server?.close();
  await sandbox?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

test('served files, and the headers: CSP with frame-ancestors \'none\', no framing, isolation', async () => {
  const r = await raw(server.port, '/web/');
  assert.equal(r.status, 200);
  assert.equal(r.headers['content-security-policy'], CSP);
  assert.match(CSP, /frame-ancestors 'none'/);
  assert.equal(r.headers['x-frame-options'], 'DENY');
  assert.equal(r.headers['x-content-type-options'], 'nosniff');
  assert.equal(r.headers['cross-origin-opener-policy'], 'same-origin');
  for (const p of ['/js/index.js', '/docs/semantics.md', '/web/index.html', '/docs/bench-chart.svg', '/docs/index.html'])
    assert.equal((await raw(server.port, p)).status, 200, p);
  const err = await raw(server.port, '/nope');
  assert.equal(err.headers['content-security-policy'], CSP, 'errors carry the CSP too');
});

test('paths out of the served folders, in every spelling, sent raw: 404 (or 400), never the file', async () => {
  const targets = [
    '/package.json', '/scripts/serve.mjs', '/src/problem/validate.cpp', '/.git/config', '/docs/../package.json',
    '/docs/%2e%2e/package.json', '/docs/..%2fpackage.json', '/docs/%2e%2e%2fREADME.md', '/docs/../README.md', '/docs/../README.html',
    '/docs/..%2fREADME.html', '/docs/%2e%2e%2fpackage.html', '/docs/Semantics.html', '/docs/semantics.md/', '/docs/sub/semantics.md',
    '/docs/.semantics.md', '/docs/semantics.md%00.svg', '/docs/nope.html', '/docs/nope.md', '/docs/semantics.txt',
    '/web/../package.json', '/web/../../package.json', '/web/../scripts/serve.mjs', '/js/../../../../etc/passwd',
    '/web/%2e%2e/package.json', '/web/%2E%2E/package.json', '/web/.%2e/package.json', '/%2e%2e/%2e%2e/etc/passwd',
    '/web/%2e%2e%2fpackage.json', '/web/..%2fpackage.json', '/web/..%2f..%2fetc%2fpasswd', '/web/%2e%2e%2f%2e%2e%2fetc%2fpasswd',
    '/web/%252e%252e/package.json', '/web/%252e%252e%252fpackage.json', '/web/..%5cpackage.json', '/web/..\\package.json',
    '/web/%5c..%5c..%5cpackage.json', '/web/index.html%00.js', '/web/%00', '/web/%e0%a4%a', '/web/%',
    '/web/./../package.json', '/web/.../package.json', '/web;/../package.json', '/dist/../../package.json',
    '/web/index.html/..%2f..%2fpackage.json', '/js/%2e%2e/%2e%2e/package.json',
  ];
  const problems = [];
  for (const t of targets) {
    const r = await raw(server.port, t);
    if (r.status !== 404 && r.status !== 400) problems.push(`${t}: ${r.status}`);
    if (/"name": "maskattn"|root:x:0:0|\[core\]/.test(r.body)) problems.push(`${t}: served a private file`);
  }
  assert.deepEqual(problems, []);
  // Targets that are not a plain path: absolute-form (a proxy request), scheme-relative, asterisk.
  for (const t of ['http://127.0.0.1/web/index.html', `http://evil.example:${server.port}/web/`, '//etc/passwd', '//127.0.0.1/web/', '*'])
    assert.equal((await raw(server.port, t)).status, 400, t);
});

test('docs: every docs/*.md as Markdown and as a rendered page, links between them rewritten, /docs/ lists them', async () => {
  const { readdirSync } = await import('node:fs');
  const names = readdirSync(path.join(path.dirname(new URL(import.meta.url).pathname), '../../docs')).filter((f) => f.endsWith('.md')).map((f) => f.slice(0, -3));
  assert.ok(names.includes('semantics') && names.includes('javascript') && names.includes('performance'), names.join());
  const index = await raw(server.port, '/docs/index.html');
  assert.equal(index.headers['content-security-policy'], CSP);
  for (const n of names) {
    assert.match(index.body, new RegExp(`href="${n}\\.html"`), `the list links ${n}`);
    const md = await raw(server.port, `/docs/${n}.md`);
    assert.equal(md.status, 200, `${n}.md`);
    assert.match(md.headers['content-type'], /^text\/markdown/);
    const page = await raw(server.port, `/docs/${n}.html`);
    assert.equal(page.status, 200, `${n}.html`);
    assert.match(page.headers['content-type'], /^text\/html/);
    assert.equal(page.headers['content-security-policy'], CSP);
    assert.match(page.body, /<h1 id="[^"]+">/, `${n}.html has its title as a heading`);
    assert.doesNotMatch(page.body, /<script/i, `${n}.html runs no script`);
    assert.doesNotMatch(page.body, /href="[a-z0-9-]+\.md(#[^"]*)?"(?![^<]*this page as Markdown)/, `${n}.html links other docs' pages, not their Markdown`);
  }
  const js = await raw(server.port, '/docs/javascript.html');
  assert.match(js.body, /<table>/, 'tables are rendered');
  assert.match(js.body, /<pre><code class="language-js">/, 'code blocks are rendered');
  assert.match(js.body, /href="kv-cache\.html"/);
  for (const n of names) {
    const page = await raw(server.port, `/docs/${n}.html`);
    const named = [...page.body.matchAll(/<a href="[a-z0-9-]+\.html[^"]*">(?:<code>)?((?:docs\/)?[a-z0-9-]+\.md)(?:<\/code>)?<\/a>/g)].map((m) => m[1]);
    assert.deepEqual(named, [], `${n}.html: a link to a page reads as that page, not as a .md file`);
  }
  assert.match(js.body, /<a href="kv-cache\.html">The KV cache<\/a>/);
  const r = await raw(server.port, '/docs/');
  assert.equal(r.status, 302);
  assert.equal(r.headers.location, '/docs/index.html');
  assert.equal((await raw(server.port, '/docs/index.html', { method: 'HEAD' })).status, 200);
});

test('symbolic links are not followed out of the served folders', async () => {
  const port = sandbox.port;
  assert.equal((await raw(port, '/web/index.html')).status, 200);
  assert.equal((await raw(port, '/web/home.html')).status, 200, 'a link that stays inside web/ is fine');
  assert.equal((await raw(port, '/js/a.js')).status, 200);
  for (const t of ['/web/secret.txt', '/web/private/key.txt', '/web/up/secret.txt', '/web/up/root/package.json',
    '/web/up/root/private/key.txt', '/dist/etc/passwd', '/dist/etc/hostname', '/web/also-a.js', '/docs/semantics.md',
    '/docs/semantics.html', '/docs/leak.md', '/docs/leak.html']) {
    const r = await raw(port, t);
    assert.equal(r.status, 404, t);
    assert.doesNotMatch(r.body, /secret|private|root:/, t);
  }
});

test('the Host header must name this server (DNS rebinding): 421 otherwise', async () => {
  const port = server.port;
  for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, 'localhost', '127.0.0.1', `LOCALHOST:${port}`])
    assert.equal((await raw(port, '/web/', { host })).status, 200, host);
  for (const host of ['evil.example', `evil.example:${port}`, `127.0.0.1.nip.io:${port}`, `localhost.evil.example:${port}`,
    `127.0.0.1:${port + 1}`, `localhost:${port}0`, '[::1]', `0.0.0.0:${port}`, '', `127.0.0.1:${port}@evil.example`, `127.0.0.1 :${port}`]) {
    const r = await raw(port, '/web/', { host });
    assert.equal(r.status, r.status === 400 ? 400 : 421, `${host}: ${r.status}`);  // Node itself refuses some (400)
    assert.doesNotMatch(r.body, /<!doctype/i, host);
  }
  // No Host at all (HTTP/1.1 requires one: Node answers 400 itself).
  assert.ok([400, 421].includes((await raw(port, '/web/', { host: null })).status));
  // Methods other than GET and HEAD: 405, after the Host check.
  assert.equal((await raw(port, '/web/', { method: 'POST', extra: 'Content-Length: 0\r\n' })).status, 405);
  assert.equal((await raw(port, '/web/', { method: 'POST', host: 'evil.example', extra: 'Content-Length: 0\r\n' })).status, 421);
});

test('the packed package: /install.json names it and /NAME-VERSION.tgz serves it when the pack folder holds it; nothing else from there', async () => {
  const root = path.join(tmp, 'pkg-root');
  const packs = path.join(tmp, 'packs');
  mkdirSync(path.join(root, 'web'), { recursive: true });
  mkdirSync(packs, { recursive: true });
  writeFileSync(path.join(root, 'package.json'), JSON.stringify({ name: 'maskattn', version: '9.8.7' }));
  const bytes = Buffer.from([0x1f, 0x8b, 8, 0, 1, 2, 3, 4]);
  writeFileSync(path.join(packs, 'maskattn-9.8.7.tgz'), bytes);
  writeFileSync(path.join(packs, 'maskattn-1.0.0.tgz'), bytes);
  writeFileSync(path.join(packs, 'notes.txt'), 'not served\n');
  const s = await start({ port: 0, root, packDir: packs });
  try {
    const info = await raw(s.port, '/install.json');
    assert.equal(info.status, 200);
    assert.equal(info.headers['content-security-policy'], CSP);
    assert.deepEqual(JSON.parse(info.body), { version: '9.8.7', tarball: '/maskattn-9.8.7.tgz' });
    const tgz = await fetch(`http://127.0.0.1:${s.port}/maskattn-9.8.7.tgz`);
    assert.equal(tgz.status, 200);
    assert.equal(tgz.headers.get('content-type'), 'application/gzip');
    assert.deepEqual(Buffer.from(await tgz.arrayBuffer()), bytes);
    for (const target of ['/maskattn-1.0.0.tgz', '/notes.txt', '/packs/maskattn-9.8.7.tgz', '/build/pack/maskattn-9.8.7.tgz',
      '/maskattn-9.8.7.tgz/', '/web/../maskattn-1.0.0.tgz', '/%2e%2e/packs/notes.txt'])
      assert.ok([400, 404].includes((await raw(s.port, target)).status), target);
  } finally {
    await s.close();
  }
  // Nothing packed: the page is told so, and the name is not found.
  const bare = await start({ port: 0, root, packDir: path.join(tmp, 'no-packs') });
  try {
    assert.deepEqual(JSON.parse((await raw(bare.port, '/install.json')).body), { version: null, tarball: null });
    assert.equal((await raw(bare.port, '/maskattn-9.8.7.tgz')).status, 404);
  } finally {
    await bare.close();
  }
});
