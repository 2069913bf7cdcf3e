'use strict';
// The official SDKs against a fake provider on 127.0.0.1: the SDK's raw response bytes go to turngate,
// and the history turngate answers goes back in the SDK's next request, whose shape the fake server
// checks (a bad shape is answered 400, which the SDK throws). Then the Vercel AI SDK with a custom
// `fetch` that hands turngate the same bytes it reads.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const { ANTHROPIC_DONE, checkAnthropic, fixture, freshRoot, fakeProvider, openToolbox, turngate } = require('./helpers');

/** An OpenAI Chat turn that ends the conversation. */
const CHAT_DONE = [
  { id: 'c2', object: 'chat.completion.chunk', created: 1, model: 'gpt-seed', choices: [{ index: 0, delta: { role: 'assistant', content: 'Done.' }, finish_reason: null }] },
  { id: 'c2', object: 'chat.completion.chunk', created: 1, model: 'gpt-seed', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] },
].map((chunk) => `data: ${JSON.stringify(chunk)}\n\n`).join('') + 'data: [DONE]\n\n';

function notes(root) {
  return fs.readFileSync(path.join(root, 'notes.txt'), 'utf8');
}

test('@anthropic-ai/sdk: the raw stream is gated and the history is accepted back', async () => {
  const { default: Anthropic } = await import('@anthropic-ai/sdk');
  const fake = await fakeProvider([fixture('seed/anthropic_complete.sse'), ANTHROPIC_DONE], checkAnthropic);
  try {
    const root = freshRoot();
    const toolbox = await openToolbox(root);
    const client = new Anthropic({ apiKey: 'test-key', baseURL: fake.url, maxRetries: 0 });
    const messages = [{ role: 'user', content: 'Update the notes.' }];
    const request = { model: 'claude-seed', max_tokens: 1024, tools: toolbox.toolDefinitions('anthropic'), stream: true };
    const response = await client.messages.create({ ...request, messages }).asResponse();
    const report = await toolbox.runTurn('anthropic', response);
    assert.equal(report.calls[0].status, 'ok');
    assert.equal(notes(root), 'Final notes\n');
    messages.push(...report.history);
    const stream = await client.messages.create({ ...request, messages });
    let text = '';
    for await (const event of stream) {
      if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') text += event.delta.text;
    }
    assert.equal(text, 'Done.');
    assert.equal(fake.requests.length, 2);
  } finally {
    await fake.close();
  }
});

test('openai (Chat Completions): the raw stream is gated and the history is accepted back', async () => {
  const { default: OpenAI } = await import('openai');
  const check = (body, index) => {
    if (index === 0) return;
    const [, assistant, result] = body.messages;
    assert.equal(assistant.role, 'assistant');
    assert.equal(assistant.tool_calls[0].id, 'u1');
    assert.equal(typeof assistant.tool_calls[0].function.arguments, 'string');
    assert.equal(result.role, 'tool');
    assert.equal(result.tool_call_id, 'u1');
  };
  const fake = await fakeProvider([fixture('seed/openai-chat_complete.sse'), CHAT_DONE], check);
  try {
    const root = freshRoot();
    const toolbox = await openToolbox(root);
    const client = new OpenAI({ apiKey: 'test-key', baseURL: fake.url, maxRetries: 0 });
    const messages = [{ role: 'user', content: 'Update the notes.' }];
    const request = { model: 'gpt-seed', tools: toolbox.toolDefinitions('openai-chat'), stream: true };
    const response = await client.chat.completions.create({ ...request, messages }).asResponse();
    const report = await toolbox.runTurn('openai-chat', response.body);
    assert.equal(report.calls[0].status, 'ok');
    assert.equal(notes(root), 'Final notes\n');
    messages.push(...report.history);
    const stream = await client.chat.completions.create({ ...request, messages });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    assert.equal(text, 'Done.');
  } finally {
    await fake.close();
  }
});

test('openai (Responses): the raw stream is gated and the history is accepted back', async () => {
  const { default: OpenAI } = await import('openai');
  const check = (body, index) => {
    if (index === 0) return;
    const call = body.input.find((item) => item.type === 'function_call');
    const output = body.input.find((item) => item.type === 'function_call_output');
    assert.equal(call.call_id, 'u1');
    assert.equal(typeof call.arguments, 'string');
    assert.equal(output.call_id, 'u1');
    assert.equal(typeof output.output, 'string');
  };
  const fake = await fakeProvider([fixture('seed/openai-responses_complete.sse')], check);
  try {
    const root = freshRoot();
    const toolbox = await openToolbox(root);
    const client = new OpenAI({ apiKey: 'test-key', baseURL: fake.url, maxRetries: 0 });
    const input = [{ role: 'user', content: 'Update the notes.' }];
    const request = { model: 'gpt-seed', tools: toolbox.toolDefinitions('openai-responses'), stream: true };
    const response = await client.responses.create({ ...request, input }).asResponse();
    const report = await toolbox.runTurn('openai-responses', response);
    assert.equal(report.calls[0].status, 'ok');
    assert.equal(notes(root), 'Final notes\n');
    input.push(...report.history);
    // The fake server answers 400 (which the SDK throws) unless the history has the call and its output.
    const next = await client.responses.create({ ...request, input }).asResponse();
    assert.equal(next.status, 200);
    assert.equal(fake.requests.length, 2);
  } finally {
    await fake.close();
  }
});

test('Vercel AI SDK: a custom fetch hands turngate the bytes the SDK reads, and its results go back', async () => {
  const { streamText, jsonSchema, tool } = await import('ai');
  const { createAnthropic } = await import('@ai-sdk/anthropic');
  const fake = await fakeProvider([fixture('seed/anthropic_complete.sse'), ANTHROPIC_DONE], checkAnthropic);
  try {
    const root = freshRoot();
    const toolbox = await openToolbox(root);
    const reports = [];
    const gatedFetch = async (url, init) => {
      const response = await fetch(url, init);
      const [forTurngate, forSdk] = response.body.tee();
      reports.push(toolbox.runTurn('anthropic', forTurngate));
      return new Response(forSdk, { status: response.status, headers: response.headers });
    };
    const anthropic = createAnthropic({ apiKey: 'test-key', baseURL: `${fake.url}/v1`, fetch: gatedFetch });
    const [definition] = toolbox.toolDefinitions('anthropic').filter((t) => t.name === 'write_file');
    // No `execute`: the SDK only reports the call; turngate runs it.
    const tools = { write_file: tool({ description: definition.description, inputSchema: jsonSchema(definition.input_schema) }) };
    /** @type {import('ai').ModelMessage[]} */
    const messages = [{ role: 'user', content: 'Update the notes.' }];
    const result = streamText({ model: anthropic('claude-seed'), maxOutputTokens: 1024, messages, tools });
    const calls = await result.toolCalls;
    assert.equal(calls[0].toolCallId, 'u1');
    assert.equal(reports.length, 1);
    const report = await reports[0];
    assert.equal(report.calls[0].id, 'u1');
    assert.equal(report.calls[0].status, 'ok');
    assert.equal(notes(root), 'Final notes\n');
    // The next request: the SDK's own assistant message, then turngate's results as tool-result parts.
    const toolMessages = turngate.aiSdkToolMessages(report);
    assert.deepEqual(toolMessages[0].content[0].output, { type: 'text', value: report.calls[0].output });
    messages.push(...(await result.response).messages, ...toolMessages);
    const next = streamText({ model: anthropic('claude-seed'), maxOutputTokens: 1024, messages, tools });
    assert.equal(await next.text, 'Done.');
    assert.equal(fake.requests.length, 2);
    const [answer] = fake.requests[1].messages[2].content;
    assert.equal(answer.type, 'tool_result');
    assert.equal(answer.tool_use_id, 'u1');
    assert.match(JSON.stringify(answer.content), /notes\.txt/);
  } finally {
    await fake.close();
  }
});
