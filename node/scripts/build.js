'use strict';
// `npm install` of this package builds the addon from the workspace around it with cargo and puts it
// beside index.js as `turngate.node`. TURNGATE_NODE_PROFILE picks the cargo profile (default release).

const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const profile = process.env.TURNGATE_NODE_PROFILE || 'release';
const workspace = path.join(__dirname, '..', '..');
const messages = execFileSync(
  'cargo',
  ['build', '--profile', profile, '-p', 'turngate-node', '--message-format=json-render-diagnostics'],
  { cwd: workspace, stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 256 << 20 },
).toString();
let addon;
for (const line of messages.split('\n')) {
  if (!line.startsWith('{')) continue;
  const message = JSON.parse(line);
  if (message.reason === 'compiler-artifact' && message.target.name === 'turngate_node') {
    addon = message.filenames.find((f) => /\.(so|dylib|dll)$/.test(f));
  }
}
if (!addon) throw new Error('cargo built no turngate_node library');
fs.copyFileSync(addon, path.join(__dirname, '..', 'turngate.node'));
