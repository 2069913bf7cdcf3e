'use strict';
// What the tests share: the package, a fresh root, the repository's fixtures, a tools directory with a
// test guest, and a fake provider on 127.0.0.1.

const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const assert = require('node:assert/strict');

const turngate = require('..');

const repo = path.join(__dirname, '..', '..');

function fixture(relative) {
  return fs.readFileSync(path.join(repo, 'tests', 'fixtures', relative));
}

/** A fresh directory holding `root/notes.txt`; answers the root. */
function freshRoot(notes = 'Original notes\n') {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'turngate-node-'));
  const root = path.join(dir, 'root');
  fs.mkdirSync(root);
  fs.writeFileSync(path.join(root, 'notes.txt'), notes);
  return root;
}

/** A tools directory holding the test guest `name` (its path from TURNGATE_TEST_GUEST_<NAME>). */
function toolsWith(name) {
  const guest = process.env[`TURNGATE_TEST_GUEST_${name.toUpperCase()}`];
  if (!guest) throw new Error(`TURNGATE_TEST_GUEST_${name.toUpperCase()} is not set (run through cargo test)`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'turngate-node-tools-'));
  fs.copyFileSync(guest, path.join(dir, `${name}.wasm`));
  return dir;
}

/**
 * A fake provider on 127.0.0.1: each request is checked by `check(body, index)` (which throws on a bad
 * shape, answered 400) and answered with `turns[index]` as an SSE stream. Answers `{url, requests,
 * close}`.
 */
async function fakeProvider(turns, check = () => {}) {
  const requests = [];
  const server = http.createServer((req, res) => {
    let text = '';
    req.on('data', (chunk) => (text += chunk));
    req.on('end', () => {
      const index = requests.length;
      let body;
      try {
        body = JSON.parse(text);
        requests.push(body);
        check(body, index);
      } catch (error) {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message: String(error) } }));
        return;
      }
      const turn = turns[Math.min(index, turns.length - 1)];
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      // In pieces, as a provider streams.
      const bytes = Buffer.from(turn);
      for (let at = 0; at < bytes.length; at += 97) res.write(bytes.subarray(at, at + 97));
      res.end();
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/** An Anthropic turn that ends the conversation: text only, `end_turn`. */
const ANTHROPIC_DONE = [
  ['message_start', { type: 'message_start', message: { id: 'msg_2', type: 'message', role: 'assistant', model: 'claude-seed', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 30, output_tokens: 1 } } }],
  ['content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }],
  ['content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Done.' } }],
  ['content_block_stop', { type: 'content_block_stop', index: 0 }],
  ['message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 3 } }],
  ['message_stop', { type: 'message_stop' }],
].map(([event, data]) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`).join('');

/** The second Anthropic request must carry the assistant's tool_use u1 and the user's tool_result for it. */
function checkAnthropic(body, index) {
  if (index === 0) return;
  const [, assistant, results] = body.messages;
  assert.equal(assistant.role, 'assistant');
  assert.ok(assistant.content.some((b) => b.type === 'tool_use' && b.id === 'u1' && typeof b.input === 'object'));
  assert.equal(results.role, 'user');
  assert.ok(results.content.every((b) => b.type === 'tool_result'));
  assert.ok(results.content.some((b) => b.tool_use_id === 'u1'));
}

/** A toolbox on `root` with a cache under the tests' cache directory. */
function openToolbox(root, options = {}) {
  const cacheDir = process.env.TURNGATE_CACHE_DIR;
  return turngate.Toolbox.open({ root, ...(cacheDir ? { cacheDir } : {}), ...options });
}

module.exports = { ANTHROPIC_DONE, checkAnthropic, turngate, repo, fixture, freshRoot, toolsWith, fakeProvider, openToolbox };
