'use strict';
// `loader.js` picks the addon for the machine and says in words what is missing: the platform found,
// the platforms prebuilt, the Node needed. (tests/install.rs installs the real tarballs.)

const test = require('node:test');
const assert = require('node:assert/strict');
const os = require('node:os');
const path = require('node:path');

const { addonFile, platformName, thisMachine, PREBUILT } = require('../loader');

const X64 = { platform: 'linux', arch: 'x64', libc: 'gnu', node: '20.20.2' };
const MAC = { platform: 'darwin', arch: 'arm64', libc: undefined, node: '20.20.2' };
const PREBUILT_NAMES = 'linux-x64-gnu, linux-arm64-gnu, darwin-arm64, darwin-x64';
/** Nowhere holds a `turngate.node` of a build from a clone; `installed` names what npm installed. */
function where(installed = [], env = {}) {
  return {
    env,
    beside: os.tmpdir(),
    resolve: (/** @type {string} */ request) => {
      const name = request.split('/')[0];
      if (!installed.includes(name)) throw new Error(`Cannot find module '${request}'`);
      return path.join('/installed', request);
    },
  };
}

test('the platform names are napi-rs names, with the C library on Linux', () => {
  assert.equal(platformName(X64), 'linux-x64-gnu');
  assert.equal(platformName({ ...X64, arch: 'arm64', libc: 'musl' }), 'linux-arm64-musl');
  assert.equal(platformName({ ...X64, platform: 'darwin', libc: undefined }), 'darwin-x64');
});

test("this process's C library is read from what it has mapped, on Linux only", () => {
  // The tests run on glibc (Debian); musl's loader would be mapped instead on Alpine. macOS has one C
  // library, which its platform name leaves out.
  const expected =
    process.platform === 'linux' ? `linux-${process.arch}-gnu` : `${process.platform}-${process.arch}`;
  assert.equal(platformName(thisMachine()), expected);
});

test('the installed platform package holds the addon', () => {
  assert.equal(addonFile(X64, where(['turngate-linux-x64-gnu'])), '/installed/turngate-linux-x64-gnu/turngate.node');
  assert.equal(
    addonFile({ ...X64, arch: 'arm64' }, where(['turngate-linux-arm64-gnu'])),
    '/installed/turngate-linux-arm64-gnu/turngate.node',
  );
});

test("on macOS the installed package of Apple silicon's or Intel's holds the addon", () => {
  assert.equal(addonFile(MAC, where(['turngate-darwin-arm64'])), '/installed/turngate-darwin-arm64/turngate.node');
  assert.equal(
    addonFile({ ...MAC, arch: 'x64' }, where(['turngate-darwin-x64'])),
    '/installed/turngate-darwin-x64/turngate.node',
  );
});

test('TURNGATE_NODE_ADDON names the addon (the tests build)', () => {
  assert.equal(addonFile(X64, where([], { TURNGATE_NODE_ADDON: '/built/turngate.node' })), '/built/turngate.node');
});

test('a platform with no prebuilt addon is named, with those there are and the way from source', () => {
  for (const [machine, name] of [
    [{ ...X64, libc: 'musl' }, 'linux-x64-musl'],
    [{ ...X64, libc: undefined }, 'linux-x64-unknown'],
    [{ ...X64, arch: 'ppc64' }, 'linux-ppc64-gnu'],
    [{ ...MAC, arch: 'ia32' }, 'darwin-ia32'],
    [{ ...X64, platform: 'win32', libc: undefined }, 'win32-x64'],
    [{ ...MAC, platform: 'win32', arch: 'arm64' }, 'win32-arm64'],
  ]) {
    assert.throws(
      () => addonFile(machine, where(Object.values(PREBUILT))),
      {
        message:
          `turngate has no prebuilt addon for ${name} (prebuilt: ${PREBUILT_NAMES}); ` +
          'or build it from a clone on a machine with Rust: npm install /path/to/turngate/node',
      },
      name,
    );
  }
});

test('a platform package left out by npm is named, with the command that installs it', () => {
  assert.throws(() => addonFile(X64, where([])), {
    message: /^turngate's addon for linux-x64-gnu is the package turngate-linux-x64-gnu, which is not installed .*npm install turngate-linux-x64-gnu@0\.1\.0/,
  });
  // Another Mac's package (Intel's on Apple silicon) is not this one.
  assert.throws(() => addonFile(MAC, where(['turngate-darwin-x64'])), {
    message: /^turngate's addon for darwin-arm64 is the package turngate-darwin-arm64, which is not installed .*npm install turngate-darwin-arm64@0\.1\.0/,
  });
});

test('a Node older than 20 is refused before anything loads', () => {
  for (const node of ['18.20.4', '16.0.0', '19.9.0']) {
    assert.throws(() => addonFile({ ...X64, node }, where(['turngate-linux-x64-gnu'])), {
      message: `turngate needs Node 20 or later; this is Node ${node}`,
    });
  }
});
