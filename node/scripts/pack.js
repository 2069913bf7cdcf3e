'use strict';
// Packs the npm packages a release publishes, napi-rs's layout: the main package `turngate` (the
// JavaScript, its declarations, no install script) with one optional dependency per prebuilt platform,
// and one package per platform holding its addon, with `os`, `cpu` and (on Linux) `libc` set so that
// npm installs only the one matching the machine (`loader.js` finds it).
//
//   node scripts/pack.js main --out DIR
//   node scripts/pack.js platform linux-x64-gnu|darwin-arm64|... --addon FILE --out DIR
//
// Each writes its tarball (`npm pack`) into DIR and prints its file name.

const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { PREBUILT, MIN_NODE_MAJOR } = require('../loader');

const packageDir = path.join(__dirname, '..');
const source = JSON.parse(fs.readFileSync(path.join(packageDir, 'package.json'), 'utf8'));

/**
 * `os`, `cpu` and `libc` of a prebuilt platform (`linux-x64-gnu`), in npm's words; macOS's names
 * (`darwin-arm64`) have no C library to choose, so their packages set none.
 */
function npmPlatform(platform) {
  const [os, cpu, libc] = platform.split('-');
  if (!libc) return { os: [os], cpu: [cpu] };
  return { os: [os], cpu: [cpu], libc: [libc === 'gnu' ? 'glibc' : libc] };
}

function usage(detail) {
  throw new Error(
    `usage: node scripts/pack.js main --out DIR | platform NAME --addon FILE --out DIR (${detail})`,
  );
}

function parseArgs(argv) {
  const args = { kind: argv[0], platform: undefined, addon: undefined, out: undefined };
  let i = 1;
  if (args.kind === 'platform') args.platform = argv[i++];
  else if (args.kind !== 'main') usage(`not ${args.kind}`);
  for (; i < argv.length; i++) {
    if (argv[i] === '--out' && i + 1 < argv.length) args.out = path.resolve(argv[++i]);
    else if (argv[i] === '--addon' && i + 1 < argv.length) args.addon = path.resolve(argv[++i]);
    else usage(`not ${argv[i]}`);
  }
  if (!args.out) usage('--out is required');
  if (args.kind === 'platform') {
    if (!PREBUILT[args.platform]) usage(`no platform ${args.platform}`);
    if (!args.addon) usage('--addon is required');
  }
  return args;
}

/** The fields every package shares with the source package.json. */
function common() {
  return {
    version: source.version,
    license: source.license,
    engines: { node: `>=${MIN_NODE_MAJOR}` },
  };
}

/** Writes the main package into `stage`. */
function stageMain(stage) {
  const files = ['index.js', 'loader.js', 'index.d.ts', 'native.d.ts'];
  for (const file of files) fs.copyFileSync(path.join(packageDir, file), path.join(stage, file));
  fs.copyFileSync(path.join(packageDir, '..', 'docs', 'node.md'), path.join(stage, 'README.md'));
  const manifest = {
    name: source.name,
    ...common(),
    description: source.description,
    main: source.main,
    types: source.types,
    exports: source.exports,
    files,
    optionalDependencies: Object.fromEntries(Object.values(PREBUILT).map((name) => [name, source.version])),
  };
  fs.writeFileSync(path.join(stage, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
}

/** Writes the package of `platform`, holding `addon`, into `stage`. */
function stagePlatform(stage, platform, addon) {
  fs.copyFileSync(addon, path.join(stage, 'turngate.node'));
  const manifest = {
    name: PREBUILT[platform],
    ...common(),
    description: `The ${platform} addon of turngate (installed by the package turngate)`,
    main: 'turngate.node',
    files: ['turngate.node'],
    ...npmPlatform(platform),
  };
  fs.writeFileSync(path.join(stage, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const stage = fs.mkdtempSync(path.join(os.tmpdir(), 'turngate-pack-'));
  try {
    if (args.kind === 'main') stageMain(stage);
    else stagePlatform(stage, args.platform, args.addon);
    fs.mkdirSync(args.out, { recursive: true });
    const packed = execFileSync('npm', ['pack', '--silent', '--pack-destination', args.out], {
      cwd: stage,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    process.stdout.write(packed);
  } finally {
    fs.rmSync(stage, { recursive: true, force: true });
  }
}

try {
  main();
} catch (error) {
  console.error(error.message);
  process.exitCode = 1;
}
