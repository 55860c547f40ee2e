// The documentation's commands as a user runs them. Every fenced block of README.md and docs/*.md
// must be run by a test or marked as not run with a reason (tests/docs/blocks.mjs says how blocks
// are marked and who runs each kind). This file runs the shell blocks: in a clean copy of the
// checkout (its tracked and unignored files: no build/, no node_modules/), with a fresh HOME and
// the environment a user's shell has (no npm_* variables, no node_modules/.bin in PATH, no
// NODE_PATH), each file's blocks in order in one bash, every command as written and checked for
// success. Then it checks what they built: the Emscripten package's consumers (examples/embedding)
// picked the flavour their flags ask for, carry that kernel, and print what the native program
// prints; and a library-only configure needs no GoogleTest.
//   node --test tests/docs/commands.test.mjs     (MASKATTN_DOCS_KEEP=1 keeps the folder)
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { after, test as nodeTest } from 'node:test';

import { allBlocks, docFiles, examples, ROOT } from './blocks.mjs';
import { findBuild } from '../../js/builds.js';

const { blocks, problems } = allBlocks();
const work = realpathSync(mkdtempSync(join(tmpdir(), 'maskattn-docs-')));
const checkout = join(work, 'maskattn'), home = join(work, 'home'), apps = join(work, 'apps');
const logs = join(work, 'logs');
let failed = false;  // a failure keeps the folder (its logs) for a look
after(() => {
  if (process.env.MASKATTN_DOCS_KEEP || failed) console.log(`kept ${work}`);
  else rmSync(work, { recursive: true, force: true });
});
const test = (name, fn) => nodeTest(name, async (t) => {
  try {
    await fn(t);
  } catch (e) {
    failed = true;
    throw e;
  }
});

// A user's shell: the variables npm run adds (node_modules/.bin first in PATH puts npm's binaryen
// before Debian's for emcc) and NODE_PATH (what the package must not need) removed.
function userEnv() {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^(npm_|NODE_PATH$|NODE_OPTIONS$|INIT_CWD$)/.test(k)) env[k] = v;
  env.PATH = (process.env.PATH ?? '').split(delimiter).filter((p) => p && !/node_modules[\\/]\.bin|node-gyp-bin/.test(p)).join(delimiter);
  // The test command's compile cache (scripts/test.sh), when it runs: paths relative to this copy,
  // so that a library the test builds already compiled with the same flags is not compiled again.
  if (env.CCACHE_BASEDIR) env.CCACHE_BASEDIR = checkout;
  return { ...env, HOME: home, TMPDIR: join(work, 'tmp') };
}

// The blocks' commands, one logical line at a time (backslash continuations joined).
function commands(code) {
  const out = [];
  let cur = '';
  for (const line of code.split('\n')) {
    cur += line;
    if (cur.endsWith('\\')) { cur += '\n'; continue; }
    if (cur.trim() && !cur.trim().startsWith('#')) out.push(cur);
    cur = '';
  }
  return out;
}
const quote = (s) => `'${s.replaceAll("'", "'\\''")}'`;

test('every fenced block of README.md and docs/*.md is run by a test or marked <!-- not run: reason -->', () => {
  assert.deepEqual(problems, []);
  const counts = {};
  for (const b of blocks) {
    const k = b.marker.kind ?? 'not run';
    counts[k] = (counts[k] ?? 0) + 1;
  }
  console.log(`blocks in ${docFiles().join(', ')}: ${JSON.stringify(counts)}`);
  // cmake blocks are CMakeLists.txt files: only the consumer's (cmake-app) is used by a runner.
  assert.deepEqual(Object.keys(examples('cmake')).filter((n) => n !== 'cmake-app'), [], 'cmake examples no runner uses');
  if (blocks.some((b) => b.marker.example === 'sh-app')) {
    assert.ok(examples('cmake')['cmake-app'] && examples('cpp').cpp, 'sh-app blocks run in a folder with the cmake-app and cpp examples');
  }
});

test('a clean copy of the checkout (tracked and unignored files only)', () => {
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' })
    .split('\0').filter((f) => f && existsSync(join(ROOT, f)));
  for (const d of [checkout, home, apps, logs, join(work, 'tmp')]) mkdirSync(d, { recursive: true });
  const tar = spawnSync('tar', ['--null', '-T', '-', '-cf', '-'], { cwd: ROOT, input: files.join('\0'), maxBuffer: 1 << 30 });
  assert.equal(tar.status, 0, String(tar.stderr));
  execFileSync('tar', ['-xf', '-', '-C', checkout], { input: tar.stdout });
  assert.ok(!existsSync(join(checkout, 'node_modules')) && !existsSync(join(checkout, 'build')));
  console.log(`${files.length} files in ${checkout}`);
});

const times = [];
const logOf = {};
for (const file of docFiles()) {
  const sh = blocks.filter((b) => b.file === file && b.marker?.kind === 'sh');
  if (!sh.length) continue;
  test(`${file}: its shell blocks run as written (${sh.map((b) => `${b.marker.example} at line ${b.line}`).join(', ')})`, () => {
    const script = ['set -o pipefail', `cd ${quote(checkout)}`];
    for (const b of sh) {
      let dir = checkout;
      if (b.marker.example === 'sh-app') {
        dir = join(apps, `${file.replace(/\W/g, '-')}-${b.line}`);
        mkdirSync(dir, { recursive: true });
        writeFileSync(join(dir, 'CMakeLists.txt'), examples('cmake')['cmake-app'].code);
        writeFileSync(join(dir, 'main.cpp'), examples('cpp').cpp.code);
      }
      script.push(`cd ${quote(dir)}`, `echo ${quote(`==== ${file}:${b.line} (${b.marker.example}), in ${dir}`)}`);
      for (const cmd of commands(b.code)) {
        script.push(`echo "[$SECONDS s]" ${quote(`$ ${cmd}`)}`, cmd,
          `__s=$?; if [ $__s -ne 0 ]; then echo "FAILED (exit $__s):" ${quote(`${file}, block at line ${b.line}: ${cmd}`)} >&2; exit 1; fi`);
      }
    }
    const log = join(logs, `${file.replace(/\W/g, '-')}.log`);
    writeFileSync(join(logs, `${file.replace(/\W/g, '-')}.sh`), script.join('\n') + '\n');
    const started = Date.now();
    const r = spawnSync('bash', ['--noprofile', '--norc', join(logs, `${file.replace(/\W/g, '-')}.sh`)],
      { cwd: checkout, env: userEnv(), encoding: 'utf8', maxBuffer: 1 << 28, timeout: 900_000 });
    const out = `${r.stdout}${r.stderr}`;
    writeFileSync(log, out);
    logOf[file] = out;
    times.push(`${file} ${((Date.now() - started) / 1000).toFixed(1)} s`);
    console.log(`${file}: ${((Date.now() - started) / 1000).toFixed(1)} s (log ${log})`);
    assert.equal(r.status, 0, `${file}'s commands failed (status ${r.status}, signal ${r.signal}); the end of the output:\n${out.split('\n').slice(-60).join('\n')}`);
  });
}

// The CMake flavour of the build with these features: its name in js/builds.js, "maskattn-" off.
const flavour = (features) => findBuild(features).name.replace(/^maskattn-/, '');

// The consumers of examples/embedding the docs built: each build folder whose source is it.
function embeddingBuilds() {
  const source = join(checkout, 'examples/embedding');
  const dirs = [];
  const look = (d, depth) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (!e.isDirectory()) continue;
      const dir = join(d, e.name);
      const cache = join(dir, 'CMakeCache.txt');
      if (existsSync(cache)) {
        const text = readFileSync(cache, 'utf8');
        if (text.includes(`CMAKE_HOME_DIRECTORY:INTERNAL=${source}\n`)) dirs.push({ dir, cache: text });
      } else if (depth > 0) look(dir, depth - 1);
    }
  };
  look(checkout, 1);
  return dirs;
}

// Same lines; numbers within the contract's bound (1e-5 on outputs; sums over ~1e5 outputs 1e-4 relative).
function compareOutputs(native, other, what) {
  const a = native.trim().split('\n'), b = other.trim().split('\n');
  assert.equal(b.length, a.length, `${what}: line count`);
  let worst = 0;
  a.forEach((la, i) => {
    const ta = la.split(' '), tb = b[i].split(' ');
    assert.equal(tb.length, ta.length, `${what}, line ${i + 1}: ${la} vs ${b[i]}`);
    ta.forEach((x, j) => {
      const y = tb[j], nx = Number(x), ny = Number(y);
      if (Number.isNaN(nx) || x === 'row') return assert.equal(y, x, `${what}, line ${i + 1}`);
      const tol = ta[1] === 'sum' || ta[1] === 'abs' ? 1e-4 * Math.abs(nx) + 1e-3 : 1e-5;
      worst = Math.max(worst, Math.abs(nx - ny));
      assert.ok(Math.abs(nx - ny) <= tol, `${what}, line ${i + 1}: ${x} vs ${y} (tolerance ${tol})`);
    });
  });
  return worst;
}

test('the embedding consumers the docs built: each picked its flavour, carries its kernel, prints the native results', () => {
  const builds = embeddingBuilds();
  const native = builds.find((b) => existsSync(join(b.dir, 'embedding_app')));
  assert.ok(native, 'docs build examples/embedding natively');
  const run = (args, what) => {
    const r = spawnSync(args[0], args.slice(1), { encoding: 'utf8', env: userEnv(), timeout: 120_000 });
    assert.equal(r.status, 0, `${what} failed: ${r.stderr.slice(-2000)}`);
    return r.stdout;
  };
  const reference = run([join(native.dir, 'embedding_app')], 'the native program');
  assert.match(reference, /^prefill sum /);
  assert.equal(run([join(native.dir, 'embedding_app'), '--builtin'], 'the native program, maskattn\'s pool'), reference,
    'the host executor and maskattn\'s own pool give the same results');
  const seen = new Set();
  for (const b of builds.filter((x) => existsSync(join(x.dir, 'embedding_app.js')))) {
    const flags = /^CMAKE_CXX_FLAGS:STRING=(.*)$/m.exec(b.cache)?.[1] ?? '';
    // The flavour is the build's name in js/builds.js (without "maskattn-"), picked by the flags.
    const relaxed = /-mrelaxed-simd/.test(flags);
    const expected = flavour({ simd: true, relaxed, threads: /(^| )-pthread( |$)/.test(flags) });
    const linked = /libmaskattn-([a-z0-9-]+)\.a/.exec(readFileSync(join(b.dir, 'build.ninja'), 'utf8'))?.[1];
    assert.equal(linked, expected, `${b.dir} (CMAKE_CXX_FLAGS '${flags}') links the ${expected} flavour`);
    const artifact = spawnSync('bash', [join(ROOT, 'tests/wasm/check_artifact.sh'), join(b.dir, 'embedding_app.wasm'), relaxed ? 'relaxed' : 'simd'], { encoding: 'utf8' });
    assert.equal(artifact.status, 0, `${b.dir}/embedding_app.wasm: ${artifact.stdout}${artifact.stderr}`);
    const out = run(['node', '--no-experimental-fetch', ...(relaxed ? ['--experimental-wasm-relaxed-simd'] : []), join(b.dir, 'embedding_app.js')], `${b.dir}/embedding_app.js`);
    const worst = compareOutputs(reference, out, `${expected} (${b.dir})`);
    console.log(`${expected}: ${out.trim().split('\n').length} lines match the native program (largest difference ${worst.toExponential(2)})`);
    seen.add(expected);
  }
  const built = [{ relaxed: false, threads: false }, { relaxed: true, threads: false }, { relaxed: false, threads: true }]
    .map((f) => flavour({ simd: true, ...f }));
  assert.deepEqual([...seen].sort(), built.sort(), `the docs build the ${built.join(', ')} consumers`);
});

test('the relaxed flavour configured without the npm packages: a warning, not an error', () => {
  const log = logOf['docs/embedding.md'] ?? '';
  assert.match(log, /MASKATTN_WASM_RELAXED=ON/, 'docs/embedding.md configures the relaxed flavour');
  assert.match(log, /need wasm-opt from the npm\s+package\s+binaryen/, 'the configure said what the npm modules would need');
});

test('a library-only configure needs neither GoogleTest nor the npm packages', () => {
  const dir = join(work, 'no-gtest');
  const r = spawnSync('cmake', ['-S', checkout, '-B', dir, '-G', 'Ninja', '-DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON'], { encoding: 'utf8', env: userEnv() });
  assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
  assert.match(r.stdout, /GoogleTest not found: the tests are not built/);
  assert.match(readFileSync(join(dir, 'CMakeCache.txt'), 'utf8'), /^MASKATTN_BUILD_TESTS:BOOL=OFF$/m);
  const on = spawnSync('cmake', ['-S', checkout, '-B', `${dir}-on`, '-G', 'Ninja', '-DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON', '-DMASKATTN_BUILD_TESTS=ON'], { encoding: 'utf8', env: userEnv() });
  assert.notEqual(on.status, 0, 'asking for the tests without GoogleTest fails');
  assert.match(on.stderr, /MASKATTN_BUILD_TESTS=ON needs GoogleTest \(apt-get install libgtest-dev\)/);
  console.log(`times: ${times.join(', ')}`);
});
