// The option tables of js/plan.js against the published types: every option a call reads (OPTIONS)
// is declared in index.d.ts's AttentionOptions (with MaskOptions), and every field of a cache's
// configuration (CACHE_CONFIG) in KVCacheOptions, and nothing more: a new option is a row there and
// a line here, or this test names what is missing. Read with the TypeScript compiler's own checker.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { OPTIONS, CACHE_CONFIG, KNOWN_OPTIONS } from '../../js/plan.js';

const ts = createRequire(import.meta.url)('typescript');
const types = fileURLToPath(new URL('../../js/index.d.ts', import.meta.url));

// The property names of an exported interface of index.d.ts, inherited ones included.
function declared(name) {
  const program = ts.createProgram([types], { noEmit: true, strict: true });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(types);
  const node = source.statements.find((s) => ts.isInterfaceDeclaration(s) && s.name.text === name);
  assert.ok(node, `index.d.ts declares interface ${name}`);
  return checker.getPropertiesOfType(checker.getTypeAtLocation(node)).map((p) => p.getName()).sort();
}

test('the option table has exactly the options that index.d.ts declares (AttentionOptions)', () => {
  assert.deepEqual(Object.keys(OPTIONS).sort(), declared('AttentionOptions'));
  assert.deepEqual([...KNOWN_OPTIONS].sort(), Object.keys(OPTIONS).sort());
});

test('the cache configuration table has exactly the fields of KVCacheOptions', () => {
  assert.deepEqual(Object.keys(CACHE_CONFIG).sort(), declared('KVCacheOptions'));
});

test('every row reads; rows that reach the call name their fields and blocks consistently', () => {
  for (const [name, row] of Object.entries(OPTIONS)) {
    assert.equal(typeof row.read, 'function', `${name}.read`);
    if (row.blocks) assert.equal(typeof row.wire, 'function', `${name}: blocks without call fields`);
  }
  for (const [name, row] of Object.entries(CACHE_CONFIG)) assert.equal(typeof row.read, 'function', `${name}.read`);
});
