'use strict';
// Control from Node: an approver that denies applies nothing (and one that approves applies); an
// aborted call applies nothing; the event loop answers a timer while a 500-call turn runs; the journal
// and undo.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const { turngate, fixture, freshRoot, toolsWith, openToolbox } = require('./helpers');

const WRITE = { path: 'notes.txt', content: 'Changed\n' };

function notes(root) {
  return fs.readFileSync(path.join(root, 'notes.txt'), 'utf8');
}

for (const answer of [false, true]) {
  test(`an approver answering ${answer} ${answer ? 'lets the call apply' : 'applies nothing'}`, async () => {
    const root = freshRoot();
    const toolbox = await openToolbox(root, { policy: { tools: { write_file: { paths: ['**'], approval: 'ask' } } } });
    const asked = [];
    const outcome = await toolbox.call('write_file', WRITE, {
      approver: async (request) => {
        asked.push(request);
        await new Promise((resolve) => setTimeout(resolve, 10));
        return answer;
      },
    });
    assert.equal(asked.length, 1);
    assert.equal(asked[0].tool, 'write_file');
    assert.match(asked[0].diff, /\+Changed/);
    assert.equal(asked[0].changes[0].path, 'notes.txt');
    assert.equal(outcome.status === 'ok', answer, JSON.stringify(outcome));
    assert.equal(notes(root), answer ? 'Changed\n' : 'Original notes\n');
  });
}

test('a turn with an approver that denies applies nothing', async () => {
  const root = freshRoot();
  const toolbox = await openToolbox(root);
  const report = await toolbox.runTurn('anthropic', fixture('seed/anthropic_complete.sse'), {
    review: true,
    approver: () => false,
  });
  assert.notEqual(report.calls[0].status, 'ok');
  assert.equal(notes(root), 'Original notes\n');
  assert.deepEqual(await toolbox.journal(), []);
});

/** Whether a call has staged a write beneath `root`: it is running, past its first write. */
function staged(root) {
  const staging = path.join(root, '.turngate', 'staging');
  return fs.existsSync(staging) && fs.readdirSync(staging).length > 0;
}

// Of a tool built for WASI 0.2 and of its twin built for 0.3: the same surface serves both.
for (const tool of ['hostile_rw', 'hostile_rw_p3']) test(`an aborted call applies nothing and stops at once (${tool})`, async () => {
  const root = freshRoot();
  const toolbox = await openToolbox(root, { toolsDir: toolsWith(tool), timeoutMs: 600_000 });
  const spin = { attack: 'write_all_then_spin', arg: 'a.txt,b.txt' };
  const controller = new AbortController();
  const call = toolbox.call(tool, spin, { signal: controller.signal });
  while (!staged(root)) await new Promise((resolve) => setTimeout(resolve, 10));
  const started = Date.now();
  controller.abort();
  const outcome = await call;
  // Not a speed check: unaborted, the call would spin to its 600 s wall-time limit.
  assert.ok(Date.now() - started < 300_000, 'the call ran on after the abort');
  assert.equal(outcome.error.kind, 'cancelled', JSON.stringify(outcome));
  assert.ok(!fs.existsSync(path.join(root, 'a.txt')));
  assert.ok(!fs.existsSync(path.join(root, 'b.txt')));
  assert.deepEqual(await toolbox.journal(), []);
  // The same call without the spin applies: only the abort kept it out.
  const done = await toolbox.call(tool, { ...spin, attack: 'write_all' });
  assert.equal(done.status, 'ok', JSON.stringify(done));
  assert.ok(fs.existsSync(path.join(root, 'a.txt')));
});

test('calls answer alike whether they finish while the JavaScript thread looks for them or after', async () => {
  // read_file answers within the moment the addon looks for a quick tool's answer; write_file, which
  // flushes what it wrote, does not: its calls become promises the addon's thread settles.
  const root = freshRoot();
  const toolbox = await openToolbox(root);
  for (let i = 0; i < 100; i++) {
    const written = await toolbox.call('write_file', { path: `f${i % 7}.txt`, content: `${i}\n` });
    assert.equal(written.status, 'ok', JSON.stringify(written));
    const read = await toolbox.call('read_file', { path: `f${i % 7}.txt` });
    assert.equal(read.status, 'ok', JSON.stringify(read));
    assert.match(read.output, new RegExp(`^${i}\n`));
  }
  const many = await Promise.all(
    Array.from({ length: 60 }, (_, i) =>
      i % 2 ? toolbox.call('read_file', { path: 'notes.txt' }) : toolbox.call('write_file', { path: `g${i}.txt`, content: 'g\n' }),
    ),
  );
  assert.ok(many.every((o) => o.status === 'ok'), JSON.stringify(many.filter((o) => o.status !== 'ok')));
  assert.ok(many.filter((_, i) => i % 2).every((o) => o.output.startsWith('Original notes')));
});

/** An Anthropic turn of `n` complete write_file calls, each to its own file. */
function manyWrites(n) {
  const event = (name, data) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
  let body = event('message_start', { type: 'message_start', message: { id: 'msg_many', type: 'message', role: 'assistant', model: 'claude-seed', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 } } });
  for (let i = 0; i < n; i++) {
    body += event('content_block_start', { type: 'content_block_start', index: i, content_block: { type: 'tool_use', id: `w${i}`, name: 'write_file', input: {} } });
    body += event('content_block_delta', { type: 'content_block_delta', index: i, delta: { type: 'input_json_delta', partial_json: JSON.stringify({ path: `f${i}.txt`, content: `file ${i}\n` }) } });
    body += event('content_block_stop', { type: 'content_block_stop', index: i });
  }
  body += event('message_delta', { type: 'message_delta', delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: 5000 } });
  body += event('message_stop', { type: 'message_stop' });
  return Buffer.from(body);
}

test('the event loop answers a timer while a 500-call turn runs', async () => {
  const root = freshRoot();
  const toolbox = await openToolbox(root);
  const turn = await turngate.decodeTurn('anthropic', manyWrites(500));
  let ticks = 0;
  let doneAt;
  const timer = setInterval(() => ticks++, 1);
  const started = Date.now();
  const report = await toolbox.processTurn(turn).finally(() => {
    doneAt = Date.now();
    clearInterval(timer);
  });
  assert.equal(report.calls.length, 500);
  assert.ok(report.calls.every((c) => c.status === 'ok'));
  assert.equal(fs.readFileSync(path.join(root, 'f499.txt'), 'utf8'), 'file 499\n');
  // The turn took a while, and the timer kept firing through it.
  assert.ok(doneAt - started > 20, `the turn took only ${doneAt - started} ms`);
  assert.ok(ticks >= 5, `the timer fired ${ticks} times in ${doneAt - started} ms`);
});

test('an abort while the approver decides wins over its yes, in a call and at the 50th call of a 500-call turn', async () => {
  const root = freshRoot();
  const toolbox = await openToolbox(root);
  const one = new AbortController();
  const outcome = await toolbox.call('write_file', WRITE, {
    review: true,
    signal: one.signal,
    approver: async () => {
      one.abort();
      return true;
    },
  });
  assert.deepEqual([outcome.error?.stage, outcome.error?.kind], ['approval', 'cancelled'], JSON.stringify(outcome));
  assert.equal(notes(root), 'Original notes\n');

  const turn = new AbortController();
  let asked = 0;
  const report = await toolbox.runTurn('anthropic', manyWrites(500), {
    review: true,
    signal: turn.signal,
    approver: async () => {
      asked += 1;
      if (asked === 50) turn.abort();
      return true;
    },
  });
  assert.equal(asked, 50);
  assert.deepEqual(report.calls.slice(0, 49).map((c) => c.status), Array(49).fill('ok'));
  assert.deepEqual(report.calls.slice(49).map((c) => c.step), Array(451).fill('cancelled'));
  assert.ok(fs.existsSync(path.join(root, 'f48.txt')));
  assert.ok(!fs.existsSync(path.join(root, 'f49.txt')), 'the call the user said yes to after the abort applied');
  assert.equal((await toolbox.journal()).length, 49);
});

test('a report gives each call its output and step, as the Python package does', async () => {
  const root = freshRoot();
  const toolbox = await openToolbox(root, { policy: { default: 'read-only' } });
  const report = await toolbox.runTurn('anthropic', fixture('seed/anthropic_complete.sse'));
  const [call] = report.calls;
  assert.deepEqual([call.status, call.step], ['error', 'policy'], JSON.stringify(call));
  assert.equal(call.output, null);
  const allowed = await (await openToolbox(freshRoot())).runTurn('anthropic', fixture('seed/anthropic_complete.sse'));
  assert.deepEqual([allowed.calls[0].status, allowed.calls[0].step], ['ok', null]);
  assert.equal(typeof allowed.calls[0].output, 'string');
  assert.ok(allowed.calls[0].output.length > 0);
});

test('the journal lists applied calls and undo restores them (last, by call, by turn, by seq)', async () => {
  const root = freshRoot();
  const toolbox = await openToolbox(root);
  const write = (content, callId, turnId) =>
    toolbox.call('write_file', { path: 'notes.txt', content }, { callId, turnId });
  await write('one\n', 'c1', 't1');
  await write('two\n', 'c2', 't2');
  await write('three\n', 'c3', 't2');
  await write('four\n', 'c4', 't3');
  const journal = await toolbox.journal();
  assert.deepEqual(journal.map((e) => e.call_id), ['c1', 'c2', 'c3', 'c4']);
  await toolbox.undo({ last: true });
  assert.equal(notes(root), 'three\n');
  const byTurn = await toolbox.undo({ turn: 't2' });
  assert.equal(byTurn.length, 2);
  assert.equal(notes(root), 'one\n');
  await toolbox.undo({ seq: journal[0].seq });
  assert.equal(notes(root), 'Original notes\n');
  await write('five\n', 'c5');
  await toolbox.undo({ call: 'c5' });
  assert.equal(notes(root), 'Original notes\n');
  await assert.rejects(toolbox.undo({ call: 'c5' }), turngate.UndoError);
  await assert.rejects(toolbox.undo({ last: true, call: 'c1' }), turngate.UsageError);
});

test("approver 'console' waits for the answer recorded in the root", async () => {
  const root = freshRoot();
  const toolbox = await openToolbox(root, { policy: { tools: { write_file: { paths: ['**'], approval: 'ask' } } } });
  const calling = toolbox.call('write_file', WRITE, { approver: 'console' });
  let waiting = [];
  const deadline = Date.now() + 60_000;
  while ((waiting = toolbox.waitingApprovals()).length === 0) {
    assert.ok(Date.now() < deadline, 'no question was recorded');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const [question] = waiting;
  assert.equal(question.request.tool, 'write_file');
  assert.match(question.digest, /^sha256:[0-9a-f]{64}$/);
  assert.notEqual(notes(root), WRITE.content, 'nothing before the answer');
  assert.equal(toolbox.answerApproval(question.digest, true).approved, true);
  const outcome = await calling;
  assert.equal(outcome.status, 'ok');
  assert.equal(notes(root), WRITE.content);
  assert.deepEqual(toolbox.waitingApprovals(), []);
  assert.throws(() => toolbox.answerApproval(question.digest, false), turngate.UsageError);
  await assert.rejects(toolbox.call('write_file', WRITE, { approver: 'terminal' }), turngate.UsageError);
});
