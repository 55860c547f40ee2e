// The cache's two tables across the boundary, on every build: the dtypes (the module's kvTypes(),
// from the C++ table maskattn/kv_types.inc) are the names the JavaScript API takes, reports and
// types (index.d.ts KVDtype, KVRawBitsDtype), and each row's facts are what a cache of it does;
// the configuration crosses as the binding's named field block (cacheConfigLayout()), every C++
// field written by JavaScript (js/plan.js CACHE_CONFIG) and every JavaScript field known to C++.
import { BUILDS } from './builds.mjs';  // first: turns on relaxed SIMD in Node 20
import { describe, test, before } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { init } from 'maskattn';
import { cacheDtypes, planCache } from '../../js/plan.js';
import { throwsArg } from './throws.mjs';

const ts = createRequire(import.meta.url)('typescript');
const types = fileURLToPath(new URL('../../js/index.d.ts', import.meta.url));

// The string literals of an exported type alias of index.d.ts (a union of them), in source order.
function unionOf(name) {
  const program = ts.createProgram([types], { noEmit: true, strict: true });
  const checker = program.getTypeChecker();
  const node = program.getSourceFile(types).statements.find((s) => ts.isTypeAliasDeclaration(s) && s.name.text === name);
  assert.ok(node, `index.d.ts declares type ${name}`);
  const type = checker.getTypeAtLocation(node);
  return (type.isUnion() ? type.types : [type]).map((t) => t.value);
}

// What the docs say of each dtype (docs/semantics.md, "Quantized caches"; docs/kv-cache.md): bytes
// of a row of 64 values, and whether append() takes its stored 16-bit values.
const DOCUMENTED = {
  float32: { rowBytes: 256, raw: false }, float16: { rowBytes: 128, raw: true }, bfloat16: { rowBytes: 128, raw: true },
  q8: { rowBytes: 2 * (32 + 4), raw: false }, q4: { rowBytes: 2 * (16 + 4), raw: false },
};

for (const b of BUILDS) {
  describe(`cache tables (${b.name})`, () => {
    let ma;
    before(async () => {
      ma = await init(b.options);
    });

    test('kvDtypes is the library\'s table, in its order, and index.d.ts declares the same names', () => {
      const table = cacheDtypes(ma._m);
      assert.deepEqual(ma.kvDtypes, table.names);
      assert.deepEqual(table.list.map((r) => r.code), table.list.map((_, i) => i), 'codes are the enum\'s order');
      assert.ok(Object.isFrozen(ma.kvDtypes));
      assert.equal(ma.kvDtypes[0], 'float32', 'the default first');
      assert.deepEqual([...unionOf('KVDtype')].sort(), [...ma.kvDtypes].sort());
      assert.deepEqual([...unionOf('KVRawBitsDtype')].sort(), table.list.filter((r) => r.rawBits).map((r) => r.name).sort());
    });

    test('every dtype makes a cache that reports its name and does what its row says', () => {
      for (const row of cacheDtypes(ma._m).list) {
        const doc = DOCUMENTED[row.name];
        assert.ok(doc, `${row.name}: a dtype the docs do not describe`);
        const cache = ma.createKVCache({ capacity: 2, headDim: 64, dtype: row.name });
        try {
          assert.equal(cache.config.dtype, row.name);
          assert.equal(cache.config.keyDtype, row.name);
          assert.equal(cache.byteLength, 2 * 2 * doc.rowBytes, row.name);
          assert.equal(row.rawBits, doc.raw, row.name);
          const t = { data: new Uint16Array(64).fill(0x3c00), shape: [1, 1, 1, 64] };
          if (row.rawBits) {
            cache.append(t, t);
            assert.deepEqual(Array.from(cache.lengths), [1]);
          } else {
            throwsArg(() => cache.append(t, t), TypeError, 'k.data', 'Uint16Array');
          }
        } finally {
          cache.dispose();
        }
      }
    });

    test('a name outside the table is refused, naming the argument and the names', () => {
      for (const [field, value] of [['dtype', 'f16'], ['keyDtype', 'int8'], ['valueDtype', 'toString'], ['dtype', 1]]) {
        throwsArg(() => ma.createKVCache({ capacity: 2, headDim: 4, [field]: value }), TypeError, field, ...ma.kvDtypes);
      }
    });

    test('the configuration crosses as the binding\'s named fields: each written, none unknown', () => {
      const layout = ma._m.cacheConfigLayout().split(',');
      assert.equal(new Set(layout).size, layout.length, 'no field twice');
      const configs = [
        { capacity: 4, headDim: 8 },
        { batch: 2, kvHeads: 2, capacity: 8, headDim: 8, valueDim: 4, dtype: 'q8', valueDtype: 'q4', keyRotation: 'hadamard', window: 4, sinkTokens: 2 },
        { capacity: 8, headDim: 8, pageSize: 4, rope: { theta: 500000, dims: 4, layout: 'interleaved', offset: 3, scaling: { type: 'linear', factor: 2 } } },
      ];
      for (const config of configs) {
        const { args } = planCache(config, cacheDtypes(ma._m));
        assert.deepEqual(Object.keys(args).sort(), [...layout].sort(), JSON.stringify(config));
        for (const [name, value] of Object.entries(args)) {
          if (name === 'ropeScaling') assert.ok(Array.isArray(value) && value.every((x) => typeof x === 'number'), name);
          else assert.equal(typeof value, 'number', `${name} = ${value}`);
        }
        const cache = ma.createKVCache(config);  // and the library takes them as meant
        assert.equal(cache.config.batch, config.batch ?? 1);
        cache.dispose();
      }
    });

    test('the fields reach the library by name: each field\'s error names its JavaScript argument', () => {
      const base = { capacity: 4, headDim: 8 };
      // Each value is one the JavaScript side lets through and the library refuses: a field that
      // reached C++ under another field's name would be named as that one.
      const cases = [
        ['batch', { batch: 0 }], ['kvHeads', { kvHeads: 0 }], ['capacity', { capacity: 0 }], ['headDim', { headDim: 0 }],
        ['valueDim', { valueDim: 0 }], ['capacity', { window: 8 }], ['keyRotation', { keyRotation: 'hadamard' }],
        ['sinkTokens', { sinkTokens: 1 }], ['pageSize', { pageSize: 2 ** 40 }], ['rope.theta', { rope: { theta: -1 } }],
        ['rope.offset', { rope: { offset: -1 } }],
      ];
      for (const [arg, fields] of cases) {
        assert.throws(() => ma.createKVCache({ ...base, ...fields }), (e) => e.argument === arg, `${arg}: ${JSON.stringify(fields)}`);
      }
    });
  });
}
