'use strict';
// A tool installed from a registry (an OCI image layout that `turngate tools publish` wrote and
// `turngate tools add` installed from) loads from the tools directory and its lock like any other: it
// runs only under a policy that lists it, with the grants the user accepted, and a `locked` load refuses
// it once what was kept of its origin has changed.

const test = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { turngate, freshRoot, openToolbox } = require('./helpers');

/** Runs the `turngate` binary `tests/node.rs` passes in; answers the JSON it printed. */
function cli(...args) {
  const binary = process.env.TURNGATE_TEST_BIN;
  if (!binary) throw new Error('TURNGATE_TEST_BIN is not set (run through cargo test)');
  return JSON.parse(execFileSync(binary, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }));
}

/** `hostile_rw` installed from a layout into a tools directory, its grants (writing under `out/`)
 * accepted into a policy file; answers both. */
function installed() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'turngate-node-registry-'));
  const [layout, tools, grants, policyFile] = ['layout', 'tools', 'grants.json', 'policy.toml'].map((n) => path.join(dir, n));
  fs.mkdirSync(tools);
  fs.writeFileSync(grants, JSON.stringify({ paths: { write: ['out/**'] } }));
  cli('tools', 'publish', process.env.TURNGATE_TEST_GUEST_HOSTILE_RW, `oci:${layout}:1.0`, '--grants', grants);
  fs.writeFileSync(policyFile, 'default = "read-only"\n');
  const added = cli('tools', 'add', `oci:${layout}:1.0`, '--tools', tools, '--allow-unsigned', '--policy', policyFile, '--accept-grants');
  assert.equal(added.name, 'hostile_rw');
  return { tools, policyFile };
}

test('an installed tool runs with its accepted grants, and only under a policy that lists it', async () => {
  const { tools, policyFile } = installed();
  const root = freshRoot();
  fs.mkdirSync(path.join(root, 'out'));
  const toolbox = await openToolbox(root, { toolsDir: tools, locked: true, policyFile });
  const written = await toolbox.call('hostile_rw', { attack: 'write', path: 'out/a.txt' });
  assert.equal(written.status, 'ok', JSON.stringify(written));
  assert.equal(fs.readFileSync(path.join(root, 'out', 'a.txt'), 'utf8'), 'PWNED');
  const outside = await toolbox.call('hostile_rw', { attack: 'write', path: 'notes.txt' });
  assert.equal(outside.error.kind, 'policy', JSON.stringify(outside));
  const unlisted = await openToolbox(root, { toolsDir: tools, locked: true });
  const refused = await unlisted.call('hostile_rw', { attack: 'noop' });
  assert.match(refused.error.message, /was installed from a registry/);
  assert.equal(fs.readFileSync(path.join(root, 'notes.txt'), 'utf8'), 'Original notes\n');
});

test('a locked load refuses a tool whose kept manifest changed', async () => {
  const { tools, policyFile } = installed();
  const [provenance] = fs.readdirSync(tools).filter((n) => n.endsWith('.provenance.json'));
  const file = path.join(tools, provenance);
  const kept = JSON.parse(fs.readFileSync(file, 'utf8'));
  kept.manifest = kept.manifest.replace('wasm', 'WASM');
  fs.writeFileSync(file, JSON.stringify(kept));
  await assert.rejects(openToolbox(freshRoot(), { toolsDir: tools, locked: true, policyFile }), (error) => {
    assert.ok(error instanceof turngate.ToolLoadError, String(error));
    assert.match(error.message, /its kept manifest has digest/);
    return true;
  });
});
