// One name per WebAssembly build: the name CMake derives from a row's flags (its npm module, its
// installed library and export file: cmake/maskattnWasmBuild.cmake, read in script mode through
// tests/js/build-names.cmake, no compiler needed) is the row's name in js/builds.js; and the
// package config a consumer's find_package reads picks builds by those names, accepts the earlier
// kernel-named flavours, and refuses an unknown one by listing the valid names.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BUILDS, findBuild } from '../../js/builds.js';

const script = fileURLToPath(new URL('./build-names.cmake', import.meta.url));
const short = (name) => name.replace(/^maskattn-/, '');
// CMake wraps long messages; the test reads them as one line.
const flat = (text) => text.replace(/\s+/g, ' ');

function cmake(args, cwd) {
  const r = spawnSync('cmake', args, { encoding: 'utf8', cwd });
  return { status: r.status, stdout: r.stdout.trim(), stderr: flat(r.stderr) };
}
const nameOf = (flags) => cmake([...flags, '-P', script]);
const flavor = (given) => cmake([`-DFLAVOR=${given}`, '-P', script]);

test('every build of js/builds.js: CMake derives the row\'s name from the row\'s flags', () => {
  assert.ok(BUILDS.length > 0);
  for (const b of BUILDS) {
    const r = nameOf(b.cmake);
    assert.equal(r.status, 0, `${b.name}: ${r.stderr}`);
    assert.equal(`maskattn-${r.stdout}`, b.name, `${b.cmake.join(' ')}`);
    // The name a consumer sets before find_package is the same spelling.
    assert.equal(flavor(short(b.name)).stdout, short(b.name));
  }
});

test('the earlier kernel-named flavours still name the build they meant', () => {
  // simd128 = the SIMD128 kernel, relaxed = SIMD128 with relaxed SIMD; "-threads" = pthreads.
  for (const [kernel, relaxed] of [['simd128', false], ['relaxed', true]]) {
    for (const threads of [false, true]) {
      const alias = kernel + (threads ? '-threads' : '');
      const r = flavor(alias);
      assert.equal(r.status, 0, `${alias}: ${r.stderr}`);
      assert.equal(`maskattn-${r.stdout}`, findBuild({ simd: true, relaxed, threads }).name, alias);
    }
  }
});

test('an unknown flavour is a configure error that lists every valid name', () => {
  for (const bad of ['avx2', 'simd128-relaxed', 'maskattn-simd', 'SIMD', 'simd-']) {
    const r = flavor(bad);
    assert.notEqual(r.status, 0, `${bad} was accepted as ${r.stdout}`);
    const listed = /valid names: ([^(]*)\(/.exec(r.stderr)?.[1].split(',').map((s) => s.trim());
    assert.ok(listed, `${bad}: ${r.stderr}`);
    assert.match(r.stderr, new RegExp(`MASKATTN_WASM_FLAVOR: '${bad}' is not a WebAssembly build`));
    for (const b of BUILDS) assert.ok(listed.includes(short(b.name)), `${bad}: the message lists ${short(b.name)}: ${r.stderr}`);
  }
});

test('the installed package config picks builds by their names, from flags or MASKATTN_WASM_FLAVOR', (t) => {
  const work = realpathSync(mkdtempSync(join(tmpdir(), 'maskattn-build-names-')));
  t.after(() => rmSync(work, { recursive: true, force: true }));
  const app = join(work, 'app');
  const consumer = 'cmake_minimum_required(VERSION 3.18)\nproject(app NONE)\nfind_package(maskattn CONFIG REQUIRED)\n'
    + 'message(STATUS "picked=${MASKATTN_WASM_FLAVOR_FOUND} included=${MASKATTN_TEST_INCLUDED}")\n';
  mkdirSync(app);
  writeFileSync(join(app, 'CMakeLists.txt'), consumer);
  let prefixes = 0;
  const install = (builds) => {
    const prefix = join(work, `prefix${++prefixes}`);
    // A targets file under a kernel name, as an earlier version installed it, is not a build.
    const r = cmake([`-DPREFIX=${prefix}`, `-DINSTALLED=${[...builds, 'simd128'].join(';')}`, '-P', script]);
    assert.equal(r.status, 0, r.stderr);
    return join(prefix, 'lib/cmake/maskattn');
  };
  let runs = 0;
  const configure = (dir, args) => {
    const r = cmake(['-S', app, '-B', join(work, `build${++runs}`), `-Dmaskattn_DIR=${dir}`, ...args]);
    return { ...r, picked: /picked=(\S*) included=(\S*)/.exec(r.stdout)?.slice(1) };
  };
  const every = install(BUILDS.map((b) => short(b.name)));
  const name = (features) => short(findBuild(features).name);
  const cases = [
    [[], name({ simd: true, relaxed: false, threads: false })],
    [['-DCMAKE_CXX_FLAGS=-mrelaxed-simd'], name({ simd: true, relaxed: true, threads: false })],
    [['-DCMAKE_CXX_FLAGS=-mrelaxed-simd -pthread'], name({ simd: true, relaxed: true, threads: true })],
    [['-DCMAKE_CXX_FLAGS=-pthread'], name({ simd: true, relaxed: false, threads: true })],
    [['-DMASKATTN_WASM_FLAVOR=relaxed'], name({ simd: true, relaxed: true, threads: false })],
    [['-DMASKATTN_WASM_FLAVOR=simd128-threads'], name({ simd: true, relaxed: false, threads: true })],
    ...BUILDS.map((b) => [[`-DMASKATTN_WASM_FLAVOR=${short(b.name)}`], short(b.name)]),
  ];
  for (const [args, expected] of cases) {
    const r = configure(every, args);
    assert.equal(r.status, 0, `${args}: ${r.stderr}`);
    assert.deepEqual(r.picked, [expected, expected], `${args.join(' ') || 'no flags'}: picked, and the targets file included`);
  }
  // Only the scalar build installed: a consumer without SIMD flags gets it.
  const scalar = name({ simd: false, relaxed: false, threads: false });
  assert.deepEqual(configure(install([scalar]), []).picked, [scalar, scalar]);

  const unknown = configure(every, ['-DMASKATTN_WASM_FLAVOR=neon64']);
  assert.notEqual(unknown.status, 0);
  assert.match(unknown.stderr, /MASKATTN_WASM_FLAVOR: 'neon64' is not a WebAssembly build of maskattn; valid names: /);
  const missing = configure(install([scalar]), ['-DMASKATTN_WASM_FLAVOR=relaxed']);
  assert.notEqual(missing.status, 0);
  assert.match(missing.stderr, new RegExp(`flavour '${name({ simd: true, relaxed: true, threads: false })}' is not installed in \\S+ \\(installed: ${scalar}\\)`));
});
