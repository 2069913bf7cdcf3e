'use strict';
// `examples/anthropic-agent.js` runs against the fake provider: it writes the file the first turn asks
// for, and its second request carries the history the fake server checks.

const test = require('node:test');
const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const { ANTHROPIC_DONE, fixture, freshRoot, fakeProvider, checkAnthropic } = require('./helpers');

test('the @anthropic-ai/sdk agent loop example runs a turn and sends the history back', async () => {
  const fake = await fakeProvider([fixture('seed/anthropic_complete.sse'), ANTHROPIC_DONE], checkAnthropic);
  try {
    const root = freshRoot();
    const example = path.join(__dirname, '..', 'examples', 'anthropic-agent.js');
    const { stdout } = await new Promise((resolve, reject) =>
      execFile(
        process.execPath,
        [example, root, 'Update the notes.'],
        {
          env: { ...process.env, ANTHROPIC_API_KEY: 'test-key', ANTHROPIC_BASE_URL: fake.url },
        },
        (error, stdout, stderr) => (error ? reject(new Error(`${error}\n${stderr}`)) : resolve({ stdout, stderr })),
      ),
    );
    assert.match(stdout, /Done\./);
    assert.equal(fs.readFileSync(path.join(root, 'notes.txt'), 'utf8'), 'Final notes\n');
    assert.equal(fake.requests.length, 2);
  } finally {
    await fake.close();
  }
});
