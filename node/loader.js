'use strict';
// Finds the N-API addon for this machine: the file TURNGATE_NODE_ADDON names (the tests' build), the
// `turngate.node` a build from a clone put beside index.js, or the prebuilt addon of the platform
// package npm installed beside this one (`turngate-linux-x64-gnu`, `turngate-darwin-arm64`, ...:
// optional dependencies of which npm installs only the one whose `os`, `cpu` and, on Linux, `libc`
// match). Whatever is missing is said in words: the platform found, the platforms prebuilt, how to build
// from source. Never a dynamic-linker error.

const fs = require('node:fs');
const path = require('node:path');

/** The oldest Node the package supports (package.json `engines`). */
const MIN_NODE_MAJOR = 20;

/**
 * The prebuilt addons, by the platform each serves (napi-rs's names: `<os>-<cpu>-<libc>` on Linux,
 * `<os>-<cpu>` on macOS, which has one C library).
 */
const PREBUILT = {
  'linux-x64-gnu': 'turngate-linux-x64-gnu',
  'linux-arm64-gnu': 'turngate-linux-arm64-gnu',
  'darwin-arm64': 'turngate-darwin-arm64',
  'darwin-x64': 'turngate-darwin-x64',
};

/** What the prebuilt addons need of the machine, said when one does not load. */
const PREBUILT_NEEDS =
  'Linux with glibc 2.28 or later, or macOS 11 or later on Apple silicon and 10.12 or later on Intel';

/** The file name of the addon inside its platform package. */
const ADDON_FILE = 'turngate.node';

/**
 * The machine as the loader sees it.
 * @typedef {object} Machine
 * @property {string} platform `process.platform`
 * @property {string} arch `process.arch`
 * @property {'gnu' | 'musl' | undefined} libc the C library this process runs on (Linux only)
 * @property {string} node `process.versions.node`
 */

/**
 * The C library this process has mapped: musl's dynamic loader or glibc's `libc.so.6`, read from
 * `/proc/self/maps` (a fraction of a millisecond, where `process.report.getReport()` takes several).
 * @returns {'gnu' | 'musl' | undefined}
 */
function mappedLibc() {
  let maps;
  try {
    maps = fs.readFileSync('/proc/self/maps', 'utf8');
  } catch {
    return undefined;
  }
  if (/\/ld-musl-[^/\n]*$/m.test(maps)) return 'musl';
  if (/\/libc\.so\.6$/m.test(maps)) return 'gnu';
  return undefined;
}

/** @returns {Machine} */
function thisMachine() {
  return {
    platform: process.platform,
    arch: process.arch,
    libc: process.platform === 'linux' ? mappedLibc() : undefined,
    node: process.versions.node,
  };
}

/**
 * The machine's platform in the prebuilt packages' names: `linux-x64-gnu`, `linux-arm64-musl`, `darwin-arm64`.
 * @param {Machine} machine
 */
function platformName(machine) {
  const libc = machine.platform === 'linux' ? `-${machine.libc ?? 'unknown'}` : '';
  return `${machine.platform}-${machine.arch}${libc}`;
}

const FROM_SOURCE = 'or build it from a clone on a machine with Rust: npm install /path/to/turngate/node';

/** This package's version: its platform package's must be the same. */
function packageVersion() {
  return JSON.parse(fs.readFileSync(path.join(__dirname, 'package.json'), 'utf8')).version;
}

/**
 * The addon file to load, or an Error saying why there is none for this machine.
 * @param {Machine} machine
 * @param {{ env: Record<string, string | undefined>, beside: string, resolve: (request: string) => string }} where
 * @returns {string}
 */
function addonFile(machine, where) {
  const major = Number(machine.node.split('.')[0]);
  if (!(major >= MIN_NODE_MAJOR)) {
    throw new Error(`turngate needs Node ${MIN_NODE_MAJOR} or later; this is Node ${machine.node}`);
  }
  if (where.env.TURNGATE_NODE_ADDON) return where.env.TURNGATE_NODE_ADDON;
  const local = path.join(where.beside, ADDON_FILE);
  if (fs.existsSync(local)) return local;
  const platform = platformName(machine);
  const supported = Object.keys(PREBUILT).join(', ');
  const name = PREBUILT[/** @type {keyof typeof PREBUILT} */ (platform)];
  if (!name) {
    throw new Error(`turngate has no prebuilt addon for ${platform} (prebuilt: ${supported}); ${FROM_SOURCE}`);
  }
  try {
    return where.resolve(`${name}/${ADDON_FILE}`);
  } catch {
    throw new Error(
      `turngate's addon for ${platform} is the package ${name}, which is not installed ` +
        `(npm leaves it out with --omit=optional, or when the lockfile was made on another platform): ` +
        `npm install ${name}@${packageVersion()}, ${FROM_SOURCE}`,
    );
  }
}

/**
 * Loads the addon for this machine.
 * @returns {unknown}
 */
function loadAddon() {
  const machine = thisMachine();
  const file = addonFile(machine, { env: process.env, beside: __dirname, resolve: require.resolve });
  const addon = { exports: {} };
  try {
    process.dlopen(addon, file);
  } catch (error) {
    throw new Error(
      `turngate's addon ${file} does not load on ${platformName(machine)} ` +
        `(the prebuilt addons need ${PREBUILT_NEEDS}): ${/** @type {Error} */ (error).message}`,
      { cause: error },
    );
  }
  return addon.exports;
}

module.exports = { loadAddon, addonFile, platformName, thisMachine, PREBUILT, MIN_NODE_MAJOR };
