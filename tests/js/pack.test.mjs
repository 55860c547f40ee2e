// The npm package as users get it: `npm pack`, check what the tarball holds (dist/: exactly the
// files of the builds in js/builds.js), install it into an empty project, import 'maskattn' there
// and run a small attention (every build of the table), and type-check a TypeScript file against
// the installed types.
//
// `npm pack --ignore-scripts`: the package's `prepack` rebuilds the wasm (1-2 minutes); the test
// runner (scripts/test-js.sh) has just built dist/, so the test packs what is there.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { referenceAttention, mismatch } from './reference.mjs';
import { BUILDS, buildFiles } from '../../js/builds.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
// npm output without the noise of user-level config warnings.
const npmEnv = { ...process.env, npm_config_update_notifier: 'false', npm_config_fund: 'false', npm_config_audit: 'false' };

let work;
let packed;      // npm pack --json entry
let tarball;
const distFiles = BUILDS.flatMap((b) => buildFiles(b)).map((f) => `dist/${f}`);

before(() => {
  for (const f of distFiles)
    assert.ok(existsSync(path.join(root, f)), `${f} missing: build it first (bash scripts/build-wasm.sh)`);
  work = realpathSync(mkdtempSync(path.join(tmpdir(), 'maskattn-pack-')));
  const out = execFileSync(npm, ['pack', '--ignore-scripts', '--json', '--pack-destination', work], {
    cwd: root, env: npmEnv, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000,
  });
  [packed] = JSON.parse(out);
  tarball = path.join(work, packed.filename);
});

after(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

test('the tarball holds only the API, the wasm builds and the docs', () => {
  const files = packed.files.map((f) => f.path).sort();
  console.log(`tarball ${packed.filename}: ${packed.size} bytes packed, ${packed.unpackedSize} bytes unpacked, ${files.length} files`);
  for (const f of packed.files) console.log(`  ${f.path.padEnd(28)} ${String(f.size).padStart(8)} bytes`);

  const allowed = [/^js\/[^/]+\.(js|d\.ts)$/, /^dist\/[^/]+\.(mjs|wasm|worker\.js|node\.cjs|node\.worker\.cjs)$/, /^package\.json$/, /^README(\.md)?$/i,
    /^docs\/[a-z-]+\.(md|svg)$/, /^LICEN[CS]E(\.md|\.txt)?$/i];
  const unexpected = files.filter((f) => !allowed.some((re) => re.test(f)));
  assert.deepEqual(unexpected, [], 'files that should not ship');
  for (const banned of [/^src\//, /^tests?\//, /^build/, /node_modules/, /^bench/, /^bindings\//, /^examples\//, /^scripts\//, /\.tgz$/, /CMakeLists/])
    assert.ok(!files.some((f) => banned.test(f)), `nothing matching ${banned}`);
  const required = ['package.json', 'README.md', 'docs/semantics.md', 'docs/javascript.md', 'docs/kv-cache.md', 'docs/cpp.md', 'js/index.js', 'js/index.d.ts',
    'js/builds.js', ...pkg.files.filter((f) => !f.includes('*'))];
  // Every build of the table: ES-module glue + .wasm; threaded builds add the browser worker script
  // and the Node glue. Nothing else from dist/ (package.json names it by a pattern).
  assert.deepEqual(files.filter((f) => f.startsWith('dist/')), [...distFiles].sort(), 'dist/ holds exactly the builds of js/builds.js');
  assert.ok(distFiles.includes('dist/maskattn-simd-threads.node.worker.cjs'), 'a threaded build ships its Node worker script');
  for (const f of new Set(required)) assert.ok(files.includes(f), `${f} is in the tarball`);
  // Every file the package's own entry points name must ship.
  for (const target of [pkg.main, pkg.types, pkg.exports['.'].types, pkg.exports['.'].import, pkg.exports['.'].default])
    assert.ok(files.includes(path.posix.normalize(target)), `${target} (named in package.json) ships`);
  // Five builds of ~450 KB of wasm each (gzip takes them to about a third): ~0.9 MB in all.
  assert.ok(packed.size < 1_500_000, `tarball is reasonably small (${packed.size} bytes)`);
});

test('every relative link and image of the packed README and docs resolves inside the tarball', () => {
  const unpacked = path.join(work, 'unpacked');
  execFileSync('mkdir', ['-p', unpacked]);
  execFileSync('tar', ['-xzf', tarball, '-C', unpacked]);
  const top = path.join(unpacked, 'package');
  const docs = packed.files.map((f) => f.path).filter((f) => /^(README|docs\/[^/]+)\.md$/.test(f));
  assert.ok(docs.includes('README.md') && docs.length >= 6, docs.join());
  const broken = [];
  let seen = 0;
  for (const doc of docs) {
    // Links in prose only: code blocks hold code, not links.
    const text = readFileSync(path.join(top, doc), 'utf8').replace(/^```[^\n]*\n[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
    const targets = [...text.matchAll(/!?\[(?:[^\]]|\][^(])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)|<(?:img|a)\s[^>]*(?:src|href)="([^"]+)"/g)].map((m) => m[1] ?? m[2]);
    for (const target of targets) {
      if (/^[a-z][a-z0-9+.-]*:|^#|^\/\//i.test(target)) continue;  // absolute URLs and anchors in the same file
      seen += 1;
      const file = path.posix.normalize(path.posix.join(path.posix.dirname(doc), decodeURI(target.split('#')[0])));
      if (file.startsWith('..') || !existsSync(path.join(top, file))) broken.push(`${doc}: ${target}`);
    }
  }
  assert.ok(seen >= 20, `links found: ${seen}`);
  assert.deepEqual(broken, [], 'links and images that the package does not contain');
});

// init() options that pin each build of the table (threads: 2 even on a 1-core machine).
const consumerBuilds = BUILDS.map((b) => ({ name: b.name, options: { simd: b.simd, relaxed: b.relaxed, threads: b.threads ? 2 : 1 } }));

test('installed into an empty project: import "maskattn" and run attention (every build)', () => {
  const app = path.join(work, 'app');
  execFileSync('mkdir', ['-p', app]);
  writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true, type: 'module' }, null, 2));
  // The package has no dependencies, so a local tarball installs offline.
  const install = spawnSync(npm, ['install', tarball, '--offline', '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd: app, env: npmEnv, encoding: 'utf8', timeout: 120_000,
  });
  assert.equal(install.status, 0, `npm install failed:\n${install.stdout}${install.stderr}`);
  const installed = JSON.parse(readFileSync(path.join(app, 'node_modules/maskattn/package.json'), 'utf8'));
  assert.equal(installed.version, pkg.version);
  assert.deepEqual(Object.keys(installed.dependencies ?? {}), [], 'no runtime dependencies');

  writeFileSync(path.join(app, 'run.mjs'), `
    import { init, version } from 'maskattn';
    const q = { data: Float32Array.from([1, 0, 0, 1, 1, 1]), shape: [1, 1, 3, 2] };
    const k = { data: Float32Array.from([1, 0, 0, 1, -1, 0.5]), shape: [1, 1, 3, 2] };
    const v = { data: Float32Array.from([1, 2, 3, 4, 5, 6]), shape: [1, 1, 3, 2] };
    const out = { resolved: import.meta.resolve('maskattn'), version };
    const builds = ${JSON.stringify(Object.fromEntries(consumerBuilds.map((b) => [b.name, b.options])))};
    builds.auto = {};
    for (const [build, options] of Object.entries(builds)) {
      const ma = await init(options);
      const r = ma.attention(q, k, v, { causal: true, returnLse: true });
      out[build] = { backend: { ...ma.backend }, output: Array.from(r.output.data), lse: Array.from(r.lse.data) };
    }
    console.log(JSON.stringify(out));
  `);
  // Node 20 runs relaxed SIMD behind this flag (Node 22+ and Chromium need none).
  const run = spawnSync(process.execPath, ['--experimental-wasm-relaxed-simd', 'run.mjs'], { cwd: app, encoding: 'utf8', timeout: 60_000 });
  assert.equal(run.status, 0, `the consumer script failed:\n${run.stdout}${run.stderr}`);
  const out = JSON.parse(run.stdout);
  assert.ok(fileURLToPath(out.resolved).startsWith(path.join(app, 'node_modules', 'maskattn')), `resolved from the installed copy: ${out.resolved}`);
  assert.equal(out.version, pkg.version);

  // O = softmax(q k^T / sqrt(2), causal) v, computed by the reference.
  const t = (data) => ({ data: Float32Array.from(data), shape: [1, 1, 3, 2] });
  const ref = referenceAttention(t([1, 0, 0, 1, 1, 1]), t([1, 0, 0, 1, -1, 0.5]), t([1, 2, 3, 4, 5, 6]), { causal: true });
  // Row 0 sees only key 0: exactly v[0] = (1, 2).
  assert.deepEqual(Array.from(ref.output.data.slice(0, 2)), [1, 2]);
  const expected = { ...Object.fromEntries(consumerBuilds.map((b) => [b.name, b.name])), auto: 'maskattn-simd-relaxed-threads' };
  for (const [build, name] of Object.entries(expected)) {
    assert.equal(out[build].backend.build, name, build);
    const { simd } = BUILDS.find((b) => b.name === name);
    assert.equal(out[build].backend.simd, simd);
    assert.equal(out[build].backend.arch, simd ? 'simd128' : 'scalar');
    // 1e-5: fp32 kernel vs f64 reference on unit-scale inputs (the contract's bound).
    assert.equal(mismatch(out[build].output, ref.output.data, { atol: 1e-5 }), null, `${build} output`);
    assert.equal(mismatch(out[build].lse, ref.lse.data, { atol: 1e-5 }), null, `${build} lse`);
    assert.deepEqual(out[build].output.slice(0, 2), [1, 2]);
  }

  // The installed types work for a TypeScript user too.
  writeFileSync(path.join(app, 'check.ts'), `
    import { init, type AttentionResult } from 'maskattn';
    const ma = await init({ simd: 'auto' });
    const r: AttentionResult = ma.attention({ data: new Float32Array(4), shape: [1, 1, 2, 2] }, { data: new Float32Array(4), dims: [1, 1, 2, 2] }, { data: new Float32Array(4), shape: [1, 1, 2, 2] }, { causal: true });
    const first: number | undefined = r.output.data[0];
    // @ts-expect-error keyLengths are integers, not strings
    ma.attention({ data: new Float32Array(4), shape: [1, 1, 2, 2] }, { data: new Float32Array(4), shape: [1, 1, 2, 2] }, { data: new Float32Array(4), shape: [1, 1, 2, 2] }, { keyLengths: ['2'] });
    export { first };
  `);
  writeFileSync(path.join(app, 'tsconfig.json'), JSON.stringify({
    compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', lib: ['ES2022', 'DOM'], types: [], strict: true, noEmit: true },
    files: ['check.ts'],
  }));
  const tsc = spawnSync(path.join(root, 'node_modules/.bin/tsc'), ['-p', '.', '--pretty', 'false'], { cwd: app, encoding: 'utf8', timeout: 120_000 });
  assert.equal(tsc.status, 0, `tsc against the installed package failed:\n${tsc.stdout}${tsc.stderr}`);
});
