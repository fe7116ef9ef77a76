#!/usr/bin/env node
// Summarises a V8 .cpuprofile (node --cpu-prof): self time per function and per file, so where
// an idle or busy process spends its CPU can be written down before anything is tuned.
//
//   node scripts/cpu-profile-summary.mjs <file.cpuprofile> [top=25] [skipStartS=0] [skipEndS=0]
//
// skipStartS / skipEndS leave out the first and last seconds (start-up, module loading and
// shutdown), so a profile of an idle service shows its steady state only.
import { readFileSync } from 'node:fs';

const [file, topArg, skipStartArg, skipEndArg] = process.argv.slice(2);
if (!file) {
  console.error('usage: cpu-profile-summary.mjs <file.cpuprofile> [top=25] [skipStartS=0] [skipEndS=0]');
  process.exit(2);
}
const top = Number(topArg ?? 25);
const fromUs = Number(skipStartArg ?? 0) * 1e6;
const toUs = Number(skipEndArg ?? 0) * 1e6;
const profile = JSON.parse(readFileSync(file, 'utf8'));
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const selfUs = new Map();
// timeDeltas[i] is the time before samples[i]; it is charged to that sample's node.
let at = profile.startTime;
const windowEnd = profile.endTime - toUs;
profile.samples.forEach((id, i) => {
  const delta = profile.timeDeltas[i] ?? 0;
  at += delta;
  if (at < profile.startTime + fromUs || at > windowEnd) return;
  selfUs.set(id, (selfUs.get(id) ?? 0) + delta);
});
const totalUs = profile.endTime - profile.startTime - fromUs - toUs;
const fnSelf = new Map();
const fileSelf = new Map();
// Inclusive time per function: a node's self time counts for it and each distinct ancestor frame.
const parent = new Map();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const fnTotal = new Map();
const short = (url) =>
  url
    .replace(/^file:\/\//, '')
    .replace(/^.*\/node_modules\//, 'nm:')
    .replace(/^.*\/(services|libs|agent)\//, '$1/');
const label = (n) =>
  `${n.callFrame.functionName || '(anon)'} ${short(n.callFrame.url)}:${n.callFrame.lineNumber + 1}`;
for (const [id, us] of selfUs) {
  const n = byId.get(id);
  const name = label(n);
  fnSelf.set(name, (fnSelf.get(name) ?? 0) + us);
  const f = n.callFrame.url ? short(n.callFrame.url) : n.callFrame.functionName;
  fileSelf.set(f, (fileSelf.get(f) ?? 0) + us);
  const seen = new Set();
  for (let cur = id; cur !== undefined; cur = parent.get(cur)) {
    const l = label(byId.get(cur));
    if (seen.has(l)) continue;
    seen.add(l);
    fnTotal.set(l, (fnTotal.get(l) ?? 0) + us);
  }
}
const idle = fnSelf.get('(idle) :0') ?? 0;
const busy = [...selfUs.values()].reduce((a, b) => a + b, 0) - idle;
const ms = (us) => (us / 1000).toFixed(1).padStart(8);
const perS = (busy / 1000 / (totalUs / 1e6)).toFixed(2);
console.log(
  `${file}: ${(totalUs / 1e6).toFixed(1)} s summarised, ${ms(busy)} ms on the main thread (${perS} ms/s)`,
);
const print = (title, map) => {
  console.log(`\n${title}`);
  [...map]
    .filter(([k]) => k !== '(idle) :0' && k !== '(idle)')
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .forEach(([k, us]) => {
      console.log(`${ms(us)} ms ${((100 * us) / busy).toFixed(1).padStart(5)}%  ${k}`);
    });
};
print('self time by file', fileSelf);
print('self time by function', fnSelf);
print('inclusive time by function', fnTotal);
