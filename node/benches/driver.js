'use strict';
// The Node side of `cargo bench --bench bindings` (host/benches/bindings.rs): answers requests on stdin,
// one per line, with the timings of what they name, as one line of JSON (nanoseconds):
//
// * `noop N`: N calls of the test guest `noop` with `{}`, each awaited, as an agent platform calls a tool;
// * `turn N`: N runs of the 500-write turn's raw body through `toolbox.runTurn`, each on a fresh root
//   with a fresh toolbox (opened outside the timing).
//
// Set up from the environment: TURNGATE_BENCH_TOOLS (a tools directory holding noop.wasm),
// TURNGATE_BENCH_CACHE (the compiled-component cache), TURNGATE_BENCH_TURN (the turn's body),
// TURNGATE_BENCH_WORK (where the roots go); TURNGATE_NODE_ADDON names the addon.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');
const turngate = require('..');

const tools = process.env.TURNGATE_BENCH_TOOLS;
const cacheDir = process.env.TURNGATE_BENCH_CACHE;
const body = fs.readFileSync(process.env.TURNGATE_BENCH_TURN);
const work = process.env.TURNGATE_BENCH_WORK;

const open = (root) => turngate.Toolbox.open({ root, toolsDir: tools, cacheDir });

async function noop(count, toolbox) {
  const timings = [];
  for (let i = 0; i < count; i++) {
    const start = process.hrtime.bigint();
    const outcome = await toolbox.call('noop', {});
    timings.push(Number(process.hrtime.bigint() - start));
    assert.equal(outcome.status, 'ok');
  }
  return timings;
}

let turnsRun = 0;

async function turn(count) {
  const timings = [];
  for (let i = 0; i < count; i++) {
    turnsRun += 1;
    const root = path.join(work, `node-turn-${turnsRun}`);
    fs.mkdirSync(root);
    const toolbox = await open(root);
    const start = process.hrtime.bigint();
    const report = await toolbox.runTurn('anthropic', body);
    timings.push(Number(process.hrtime.bigint() - start));
    assert.equal(report.calls.length, 500);
    assert.ok(report.calls.every((c) => c.status === 'ok'));
  }
  return timings;
}

async function main() {
  const noopRoot = path.join(work, 'node-noop');
  fs.mkdirSync(noopRoot);
  const noopToolbox = await open(noopRoot);
  await noop(50, noopToolbox); // warm-up
  process.stdout.write('ready\n');
  for await (const line of readline.createInterface({ input: process.stdin })) {
    const [kase, count] = line.split(' ');
    const timings = kase === 'noop' ? await noop(Number(count), noopToolbox) : await turn(Number(count));
    process.stdout.write(`${JSON.stringify(timings)}\n`);
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
