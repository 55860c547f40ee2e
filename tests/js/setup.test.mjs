// scripts/setup.sh's two lists: `setup.sh start` (npm start) installs only what building the
// WebAssembly modules and serving the demo need; `setup.sh` (npm test) adds the rest; a second run
// with everything installed installs nothing. Run against stand-ins for dpkg-query and apt-get (the
// script runs as root or through sudo: `id -u` reports 0), in a copy of the script, so nothing is
// installed and the checkout's node_modules is untouched.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
let tmp;
before(() => {
  tmp = mkdtempSync(path.join(tmpdir(), 'maskattn-setup-'));
  mkdirSync(path.join(tmp, 'repo', 'scripts'), { recursive: true });
  copyFileSync(path.join(ROOT, 'scripts', 'setup.sh'), path.join(tmp, 'repo', 'scripts', 'setup.sh'));
  writeFileSync(path.join(tmp, 'repo', 'package.json'), '{ "name": "x" }\n');  // no devDependencies: no npm step
  const bin = path.join(tmp, 'bin');
  mkdirSync(bin);
  const stub = (name, body) => {
    writeFileSync(path.join(bin, name), `#!/bin/sh\n${body}\n`);
    chmodSync(path.join(bin, name), 0o755);
  };
  // dpkg-query: a package is installed when it is listed in $INSTALLED; apt-get records its calls.
  stub('dpkg-query', 'p=$(eval echo \\${$#}); for i in $INSTALLED; do [ "$i" = "$p" ] && { printf "install ok installed"; exit 0; }; done; exit 1');
  stub('apt-get', 'echo "$*" >> "$APT_LOG"');
  stub('id', 'echo 0');
});
after(() => tmp && rmSync(tmp, { recursive: true, force: true }));

/** The Debian packages setup.sh asks apt-get for, given what is installed already. */
function installs(args, installed = []) {
  const log = path.join(tmp, `apt-${Math.random().toString(36).slice(2)}.log`);
  writeFileSync(log, '');
  const r = spawnSync('bash', [path.join(tmp, 'repo', 'scripts', 'setup.sh'), ...args], {
    encoding: 'utf8',
    env: { ...process.env, PATH: `${path.join(tmp, 'bin')}:${process.env.PATH}`, INSTALLED: installed.join(' '), APT_LOG: log },
  });
  assert.equal(r.status, 0, r.stderr);
  const line = readFileSync(log, 'utf8').split('\n').find((l) => l.startsWith('install '));
  return line ? line.split(' ').filter((w) => !w.startsWith('-') && w !== 'install') : [];
}

const START = ['cmake', 'ninja-build', 'emscripten', 'libxsimd-dev', 'clang-19', 'lld-19', 'llvm-19'];

test('npm start installs only the WebAssembly build\'s packages', () => {
  assert.deepEqual(installs(['start']).sort(), [...START].sort());
});

test('npm test installs those and what the tests need', () => {
  const all = installs([]);
  for (const p of [...START, 'g++', 'chromium', 'qemu-user', 'g++-aarch64-linux-gnu', 'libdnnl-dev', 'libopenblas-dev', 'libeigen3-dev', 'libgtest-dev'])
    assert.ok(all.includes(p), `${p} in ${all}`);
  // What start leaves out is exactly what test adds.
  assert.deepEqual(installs(['start'], all.filter((p) => !START.includes(p))).sort(), [...START].sort());
});

test('each list installs nothing once it is installed, and a bad mode is refused', () => {
  assert.deepEqual(installs(['start'], START), []);
  assert.deepEqual(installs([], installs([])), []);
  assert.deepEqual(installs(['test'], START).includes('cmake'), false, 'only what is missing');
  const r = spawnSync('bash', [path.join(tmp, 'repo', 'scripts', 'setup.sh'), 'everything'], { encoding: 'utf8' });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /unknown mode 'everything'/);
});
