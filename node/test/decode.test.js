'use strict';
// Decoding a body from Node: off the JavaScript thread (the event loop runs while a large body decodes),
// one chunk at a time, the visible text reaching `onText` in order, a whole JSON body's included.

const test = require('node:test');
const assert = require('node:assert/strict');

const { turngate, fixture } = require('./helpers');

/** An Anthropic text turn of about `bytes` bytes, its text in deltas of 1000 characters; answers the body and the text. */
function largeTextTurn(bytes) {
  const event = (name, data) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
  const parts = [event('message_start', { type: 'message_start', message: { id: 'msg_large', type: 'message', role: 'assistant', model: 'claude-seed', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 } } })];
  parts.push(event('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }));
  let text = '';
  for (let i = 0; text.length < bytes; i++) {
    const delta = `${i} `.padEnd(1000, 'x');
    text += delta;
    parts.push(event('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: delta } }));
  }
  parts.push(event('content_block_stop', { type: 'content_block_stop', index: 0 }));
  parts.push(event('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 9 } }));
  parts.push(event('message_stop', { type: 'message_stop' }));
  return { body: new Uint8Array(Buffer.from(parts.join(''))), text };
}

test('a large body decodes off the JavaScript thread: the event loop runs before its decode settles', async () => {
  const { body, text } = largeTextTurn(8 << 20);
  // Were the decoder fed on this thread, the whole decode (one chunk) would settle in microtasks, before
  // any callback of the event loop.
  let settled = false;
  let immediates = 0;
  const tick = () => {
    if (settled) return;
    immediates++;
    setImmediate(tick);
  };
  setImmediate(tick);
  const seen = [];
  const turn = await turngate
    .decodeTurn('anthropic', body, { onText: (delta) => seen.push(delta) })
    .finally(() => (settled = true));
  assert.ok(immediates >= 1, 'no setImmediate callback ran before the decode settled');
  assert.equal(turn.status, 'completed');
  assert.equal(turn.text, text);
  assert.equal(seen.join(''), text, 'the text reached onText whole and in order');
});

test('a chunk fed before the previous one\'s promise settled is refused: chunks go in one at a time', async () => {
  const decoder = new turngate._testing.native.NativeDecoder('anthropic', false, null);
  const first = decoder.feed(new Uint8Array(16));
  assert.throws(() => decoder.feed(new Uint8Array(16)), /await each feed/);
  await first;
  await decoder.feed(new Uint8Array(16));
});

for (const [provider, file, text] of [
  ['anthropic', 'anthropic_whole_tool_use.json', 'Writing the file.'],
  ['openai-chat', 'openai_chat_whole_tool_calls.json', 'Saving the notes.'],
  ['openai-responses', 'openai_responses_whole_function_call.json', 'Saving now.'],
  ['gemini', 'gemini_whole_generate_content.json', 'Writing the file.'],
]) {
  test(`${provider}: a whole JSON body's text reaches onText, once, at its end`, async () => {
    const seen = [];
    const turn = await turngate.decodeTurn(provider, fixture(`streams/constructed/${file}`), {
      onText: (delta) => seen.push(delta),
    });
    assert.equal(turn.status, 'completed');
    assert.equal(turn.text, text);
    assert.deepEqual(seen, [text]);
  });
}

test('a stream\'s text reaches onText as it arrives, and none of it again at the end', async () => {
  const seen = [];
  await turngate.decodeTurn('anthropic', fixture('seed/anthropic_complete.sse'), {
    onText: (delta) => seen.push(delta),
  });
  assert.deepEqual(seen, ["I'll update the notes."]);
});
