'use strict';
// The seed cases from Node: a complete write writes once and answers the call ID; a cut, truncated,
// refused, invalid-JSON or out-of-root turn writes nothing. The bodies go in every form the package
// takes: whole bytes, a ReadableStream, an async iterable of small chunks.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const { fixture, freshRoot, openToolbox } = require('./helpers');

const PROVIDERS = ['anthropic', 'openai-chat', 'openai-responses', 'gemini'];

const forms = {
  bytes: (bytes) => new Uint8Array(bytes),
  stream: (bytes) =>
    new ReadableStream({
      start(controller) {
        for (let at = 0; at < bytes.length; at += 64) controller.enqueue(bytes.subarray(at, at + 64));
        controller.close();
      },
    }),
  asyncIterable: (bytes) =>
    (async function* () {
      for (let at = 0; at < bytes.length; at += 7) yield bytes.subarray(at, at + 7);
    })(),
};

for (const provider of PROVIDERS) {
  for (const [form, body] of Object.entries(forms)) {
    test(`${provider}, ${form}: a complete write writes once and answers the call ID`, async () => {
      const root = freshRoot();
      const toolbox = await openToolbox(root);
      const report = await toolbox.runTurn(provider, body(fixture(`seed/${provider}_complete.sse`)));
      assert.equal(report.turn.status, 'completed');
      assert.equal(report.calls.length, 1);
      assert.equal(report.calls[0].id, 'u1');
      assert.equal(report.calls[0].status, 'ok', JSON.stringify(report.calls[0]));
      assert.equal(fs.readFileSync(path.join(root, 'notes.txt'), 'utf8'), 'Final notes\n');
      assert.match(JSON.stringify(report.history), /u1/);
      const journal = await toolbox.journal();
      assert.equal(journal.length, 1, 'written once');
    });
  }

  for (const [kase, status] of [
    ['cutoff', 'incomplete'],
    ['truncated', 'truncated'],
    ['refusal', provider === 'gemini' ? 'filtered' : 'refused'],
    ['invalid', 'completed'],
    ['outside', 'completed'],
  ]) {
    test(`${provider} ${kase}: writes nothing`, async () => {
      const root = freshRoot();
      const toolbox = await openToolbox(root);
      const report = await toolbox.runTurn(provider, forms.stream(fixture(`seed/${provider}_${kase}.sse`)));
      assert.equal(report.turn.status, status);
      assert.equal(report.calls.length, 1);
      assert.notEqual(report.calls[0].status, 'ok');
      assert.equal(fs.readFileSync(path.join(root, 'notes.txt'), 'utf8'), 'Original notes\n');
      assert.ok(!fs.existsSync(path.join(root, '..', 'outside.txt')));
      assert.deepEqual(await toolbox.journal(), []);
    });
  }
}
