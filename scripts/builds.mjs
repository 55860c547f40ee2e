// The table of WebAssembly builds (js/builds.js) for the shell scripts, one build per line, fields
// separated by tabs:
//   node scripts/builds.mjs            name, short name (no "maskattn-"), CMake flags (space-separated),
//                                      ctest (bench, threaded, yes or no), threads (yes or no), its files in dist/
//                                      (space-separated)
//   node scripts/builds.mjs files      every file of every build in dist/, one per line
import { BUILDS, buildFiles } from '../js/builds.js';

const mode = process.argv[2] ?? 'rows';
if (mode === 'rows') {
  for (const b of BUILDS) {
    const ctest = typeof b.ctest === 'string' ? b.ctest : b.ctest ? 'yes' : 'no';
    console.log([b.name, b.name.replace(/^maskattn-/, ''), b.cmake.join(' '), ctest, b.threads ? 'yes' : 'no', buildFiles(b).join(' ')].join('\t'));
  }
} else if (mode === 'files') {
  for (const b of BUILDS) for (const f of buildFiles(b)) console.log(f);
} else {
  console.error(`scripts/builds.mjs: unknown mode '${mode}' (rows or files)`);
  process.exit(2);
}
