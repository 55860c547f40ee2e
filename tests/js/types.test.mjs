// The published TypeScript types: tests/js/types/consumer.ts uses the whole API (and misuses it
// on `@ts-expect-error` lines); `tsc --noEmit` must accept it. 'maskattn' resolves through
// package.json "exports" -> "types" (a package may import itself by name), as in a user project.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));

test('tsc --noEmit accepts the typed consumer (and its @ts-expect-error misuses are errors)', () => {
  const tsc = `${root}node_modules/.bin/tsc`;
  assert.ok(existsSync(tsc), `typescript is not installed: ${tsc} missing (run npm install in ${root})`);
  const r = spawnSync(tsc, ['-p', 'tests/js/types', '--noEmit', '--pretty', 'false'], { cwd: root, encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.error, undefined, `could not run tsc: ${r.error}`);
  assert.equal(r.status, 0, `tsc failed (status ${r.status}):\n${r.stdout}${r.stderr}`);
});
