#!/usr/bin/env node
// Instruction counts of the prefill micro-tiles' inner loops, read from a probe's object code
// (bench/microkernel/<arch>.cpp.o): the innermost loops of microtiles_only, each with its
// multiply-adds, loads and stores. On a CPU that issues two vector FMAs per cycle, a loop of F FMAs
// among N instructions reaches the FMA peak only when the front end and load ports keep up.
//
//   node bench/microkernel/count-instructions.mjs OBJECT [--objdump aarch64-linux-gnu-objdump]
//
// x86 (AT&T syntax): fma = vfmadd*, or mulps + addps pairs (SSE2: no FMA); a load is any source
// operand in memory (folded into an fma, or a loop counter kept on the stack), a store a memory
// destination.
// AArch64: fma = fmla; loads ldr/ldp/ld1*, stores str/stp/st1*.
import { execFileSync } from 'node:child_process';

const args = process.argv.slice(2);
const object = args.find((a, i) => !a.startsWith('--') && args[i - 1] !== '--objdump');
const tool = args.includes('--objdump') ? args[args.indexOf('--objdump') + 1] : 'objdump';
if (!object) {
  console.error('usage: count-instructions.mjs OBJECT [--objdump OBJDUMP]');
  process.exit(2);
}
const text = execFileSync(tool, ['-d', '-C', '--no-show-raw-insn', object], { encoding: 'utf8', maxBuffer: 1 << 28 });

// Functions: "0000000000000000 <name>:" then "   addr:\tmnemonic operands".
const functions = [];
for (const line of text.split('\n')) {
  const head = line.match(/^([0-9a-f]+) <(.*)>:$/);
  if (head) { functions.push({ name: head[2], insns: [] }); continue; }
  const insn = line.match(/^\s+([0-9a-f]+):\s+(\S+)\s*(.*)$/);
  if (insn && functions.length) functions.at(-1).insns.push({ addr: parseInt(insn[1], 16), op: insn[2], args: insn[3] });
}
const targets = functions.filter((f) => f.name.includes('microtiles_only'));
if (!targets.length) {
  console.error(`count-instructions: no microtiles_only in ${object}`);
  process.exit(1);
}

const isBranch = (i) => /^(j[a-z]+|b(\.[a-z]+)?|cbn?z|tbn?z)$/.test(i.op);
const branchTarget = (i) => { const m = i.args.match(/^([0-9a-f]+)\b/); return m ? parseInt(m[1], 16) : NaN; };
const isFma = (i) => /^(v?fn?m(add|sub)[0-9]*[ps]s|fmla)$/.test(i.op);
const isMul = (i) => /^(v?mulps|fmul)$/.test(i.op);
const isAdd = (i) => /^(v?addps|fadd)$/.test(i.op);
const x86 = !targets[0].insns.some((i) => /^(fmla|ldr|ldp|str|stp)$/.test(i.op));
function memory(i) {
  if (x86) {
    const ops = i.args.split(/,(?![^(]*\))/);
    const mem = ops.map((o) => o.includes('('));
    const store = mem.at(-1) && !/^(cmp|test|prefetch)/.test(i.op) && !i.op.startsWith('j');
    return { load: mem.slice(0, -1).some(Boolean) || (mem.length === 1 && mem[0] && !store), store };
  }
  return { load: /^ld/.test(i.op), store: /^st/.test(i.op) };
}

for (const f of targets) {
  const loops = [];
  f.insns.forEach((insn, at) => {
    if (!isBranch(insn)) return;
    const to = branchTarget(insn);
    const start = f.insns.findIndex((x) => x.addr === to);
    if (start >= 0 && start <= at) loops.push({ start, end: at });
  });
  // Innermost: no other loop strictly inside.
  const inner = loops.filter((l) => !loops.some((o) => o !== l && o.start >= l.start && o.end <= l.end));
  console.log(`${object}: ${f.name.replace(/\(.*$/, '')}`);
  for (const l of inner) {
    const body = f.insns.slice(l.start, l.end + 1);
    const fma = body.filter(isFma).length, mul = body.filter(isMul).length, add = body.filter(isAdd).length;
    if (!fma && !mul) continue;  // not a multiply-add loop
    let loads = 0, stores = 0, other = 0;
    for (const i of body) {
      const m = memory(i), arith = isFma(i) || isMul(i) || isAdd(i);
      loads += m.load;
      stores += m.store;
      other += !arith && !m.load && !m.store;
    }
    const ma = fma + Math.min(mul, add);
    console.log(`  loop at 0x${body[0].addr.toString(16)}: ${body.length} instructions, ` +
      (fma ? `${fma} fma` : `${mul} mul + ${add} add`) + `, ${loads} loads, ${stores} stores, ${other} other; ` +
      `${(100 * ma / body.length).toFixed(0)}% of instructions are multiply-adds`);
  }
}
