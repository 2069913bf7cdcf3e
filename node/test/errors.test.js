'use strict';
// Errors are typed `Error` subclasses, and no input crashes the Node process: bad options, a bad policy,
// bad bytes, a panic inside the addon (on the JavaScript thread, on the runtime, on libuv's pool).

const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const { turngate, freshRoot, openToolbox } = require('./helpers');

test('a bad policy is a PolicyError, from text, an object or a file', async () => {
  const root = freshRoot();
  await assert.rejects(openToolbox(root, { policy: 'deny = 3' }), turngate.PolicyError);
  await assert.rejects(openToolbox(root, { policy: { tools: { write_file: { approval: 'maybe' } } } }), turngate.PolicyError);
  const file = path.join(root, '..', 'policy.toml');
  fs.writeFileSync(file, '[tools.write_file]\npaths = ["docs/**"]\n');
  const toolbox = await openToolbox(root, { policyFile: file });
  const outcome = await toolbox.call('write_file', { path: 'notes.txt', content: 'x' });
  assert.notEqual(outcome.status, 'ok', 'the policy file was applied');
  assert.equal(fs.readFileSync(path.join(root, 'notes.txt'), 'utf8'), 'Original notes\n');
  await assert.rejects(openToolbox(root, { policyFile: path.join(root, 'missing.toml') }), turngate.PolicyError);
  assert.ok(new turngate.PolicyError('x') instanceof turngate.UsageError);
  assert.ok(new turngate.PolicyError('x') instanceof turngate.TurngateError);
});

test('bad options, a bad root, a bad provider are UsageErrors', async () => {
  const root = freshRoot();
  await assert.rejects(openToolbox(path.join(root, 'nope')), turngate.UsageError);
  await assert.rejects(openToolbox(root, { timeoutMz: 3 }), turngate.UsageError);
  await assert.rejects(openToolbox(root, { locked: true }), turngate.UsageError);
  await assert.rejects(turngate.decodeTurn('anthropics', new Uint8Array()), turngate.UsageError);
  await assert.rejects(turngate.decodeTurn('anthropic', [42]), turngate.UsageError);
  const toolbox = await openToolbox(root);
  assert.throws(() => toolbox.toolDefinitions('nope'), turngate.UsageError);
});

test('a malformed turn is a StreamParseError with its report, and nothing ran', async () => {
  const root = freshRoot();
  const toolbox = await openToolbox(root);
  const body = 'event: message_start\ndata: {not json}\n\n';
  const error = await toolbox.runTurn('anthropic', body).catch((e) => e);
  assert.ok(error instanceof turngate.StreamParseError, String(error));
  assert.equal(error.report.turn.status, 'malformed');
  assert.deepEqual(error.report.history, []);
});

test('random bytes for every provider never crash the process', async () => {
  const root = freshRoot();
  const toolbox = await openToolbox(root);
  for (const provider of ['anthropic', 'openai-chat', 'openai-responses', 'gemini']) {
    for (let i = 0; i < 25; i++) {
      const turn = await turngate.decodeTurn(provider, crypto.randomBytes(1 + i * 37));
      assert.notEqual(turn.status, 'completed');
      await toolbox.processTurn(turn).catch((e) => assert.ok(e instanceof turngate.StreamParseError));
    }
  }
  assert.deepEqual(await toolbox.journal(), []);
});

test('a panic in the addon is an InternalError, on the JavaScript thread, in a task and on the pool', async () => {
  await assert.rejects(turngate._testing.panic(false), turngate.InternalError);
  await assert.rejects(turngate._testing.panic(true), turngate.InternalError);
  await assert.rejects(turngate._testing.panicOnPool(), turngate.InternalError);
});
