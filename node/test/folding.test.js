'use strict';
// A name means one file, from Node: on a root whose file system folds case and Unicode forms (the test
// file system tests/node.rs mounts and names in TURNGATE_TEST_FOLDING_DIR), every spelling of a denied
// name and of turngate's state directory is that name, for the bundled tools and a hostile guest of
// each WASI generation.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const { toolsWith, openToolbox } = require('./helpers');

const POLICY = { default: 'workspace-write', deny: ['.env', '**/.env', 'secrets/**'] };
const SECRET = 'TOKEN=do-not-leak\n';

function foldingRoot() {
  const parent = process.env.TURNGATE_TEST_FOLDING_DIR;
  if (!parent) throw new Error('TURNGATE_TEST_FOLDING_DIR is not set (run through cargo test)');
  const root = path.join(fs.mkdtempSync(path.join(parent, 'node-')), 'root');
  fs.mkdirSync(path.join(root, 'secrets'), { recursive: true });
  fs.writeFileSync(path.join(root, '.env'), SECRET);
  fs.writeFileSync(path.join(root, 'secrets', 'key.txt'), SECRET);
  fs.writeFileSync(path.join(root, 'notes.txt'), 'notes\n');
  return root;
}

const leaks = (text) => ['.env', 'secrets', '.turngate', 'do-not-leak'].some((name) => text.toLowerCase().includes(name));

test('every spelling of a denied name or of the state directory is refused', async () => {
  const root = foldingRoot();
  const toolbox = await openToolbox(root, { policy: POLICY });
  assert.equal((await toolbox.call('write_file', { path: 'a.txt', content: 'a\n' })).status, 'ok');
  for (const [tool, input] of [
    ['read_file', { path: '.ENV' }],
    ['read_file', { path: 'Secrets/Key.txt' }],
    ['write_file', { path: '.Env', content: 'PWNED' }],
    ['delete_file', { path: '.eNV' }],
    ['list_dir', { path: '.TurnGate' }],
    ['make_dir', { path: '.TURNGATE/evil' }],
  ]) {
    const outcome = await toolbox.call(tool, input);
    assert.equal(outcome.status, 'error', `${tool} ${JSON.stringify(input)}: ${JSON.stringify(outcome)}`);
  }
  const listing = await toolbox.call('list_dir', { path: '.' });
  assert.equal(listing.status, 'ok');
  assert.ok(!leaks(listing.output), listing.output);
  assert.equal(fs.readFileSync(path.join(root, '.env'), 'utf8'), SECRET);
  assert.ok(!fs.existsSync(path.join(root, '.turngate', 'evil')));
});

for (const tool of ['hostile_rw', 'hostile_rw_p3']) {
  test(`${tool} meets every spelling as the name it is`, async () => {
    const root = foldingRoot();
    const toolbox = await openToolbox(root, { policy: POLICY, toolsDir: toolsWith(tool) });
    for (const [attack, arg] of [['read', '.ENV'], ['read', 'SECRETS/KEY.TXT'], ['write', '.Env'], ['mkdir', '.TurnGate/evil']]) {
      const outcome = await toolbox.call(tool, { attack, arg, path: '.' });
      assert.ok(outcome.status === 'error' || !outcome.output.startsWith('ESCAPED'), JSON.stringify(outcome));
      assert.ok(!JSON.stringify(outcome).includes('do-not-leak'), JSON.stringify(outcome));
    }
    const walked = await toolbox.call(tool, { attack: 'walk', arg: '.', path: '.' });
    assert.equal(walked.status, 'ok');
    assert.ok(!leaks(walked.output), walked.output);
    assert.equal(fs.readFileSync(path.join(root, '.env'), 'utf8'), SECRET);
  });
}
