'use strict';
// An agent loop with @anthropic-ai/sdk: each streamed turn's raw bytes go through turngate, which runs
// the calls it approves inside ROOT and answers the history to send back. Stops when the model ends
// without tool calls, or after 10 turns.
//
//   ANTHROPIC_API_KEY=... node examples/anthropic-agent.js ROOT "Write a haiku to haiku.txt"
// (ANTHROPIC_BASE_URL points the SDK at another endpoint; the tests use a fake provider.)

const Anthropic = require('@anthropic-ai/sdk').default;
const { Toolbox } = require('turngate');

async function main(root, prompt) {
  const client = new Anthropic();
  const toolbox = await Toolbox.open({ root });
  const messages = [{ role: 'user', content: prompt }];
  for (let turn = 0; turn < 10; turn++) {
    const response = await client.messages
      .create({
        model: 'claude-sonnet-4-5',
        max_tokens: 4096,
        tools: toolbox.toolDefinitions('anthropic'),
        messages,
        stream: true,
      })
      .asResponse();
    const report = await toolbox.runTurn('anthropic', response, {
      maxOutputTokens: 4096,
      onText: (text) => process.stdout.write(text),
    });
    for (const call of report.calls) console.error(`\n[${call.name} ${call.id}: ${call.status}]`);
    if (report.turn.status !== 'completed') throw new Error(`turn ${report.turn.status}: ${report.turn.detail}`);
    if (report.calls.length === 0) return;
    messages.push(...report.history);
  }
  throw new Error('no answer after 10 turns');
}

main(process.argv[2], process.argv[3]).catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
