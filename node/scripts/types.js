'use strict';
// Writes the package's generated type declarations, or with `--check` fails unless they are current:
// - `native.d.ts`, the addon's, by napi-rs's own generator (`@napi-rs/cli`) from the type definitions
//   napi-derive writes while the addon compiles with NAPI_TYPE_DEF_TMP_FOLDER set;
// - `index.d.ts`, the package's, by tsc from index.js's JSDoc (`--allowJs --declaration
//   --emitDeclarationOnly`, with `--checkJs --strict`, so index.js is also checked against
//   `native.d.ts`);
// then checks both and compiles `test/types/usage.ts`, which uses the whole public surface, against
// them (`--noEmit --strict`).
//
//   node scripts/types.js [--check] [--type-defs DIR]
//
// DIR is the folder the addon's build wrote its type definitions to (tests/node.rs passes the one its
// build used). Without it, the addon is built here (dev profile) with a fresh folder, so it compiles
// again and writes them.

const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const ts = require('typescript');

const packageDir = path.join(__dirname, '..');
const workspace = path.join(packageDir, '..');
/** The crate napi-derive names its type definition file after. */
const CRATE = 'turngate-node';

/** Node's CommonJS, strict. */
const COMMON = {
  strict: true,
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
};

function parseArgs(argv) {
  const args = { check: false, typeDefs: undefined };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--check') args.check = true;
    else if (argv[i] === '--type-defs' && i + 1 < argv.length) args.typeDefs = argv[++i];
    else throw new Error(`usage: node scripts/types.js [--check] [--type-defs DIR] (not ${argv[i]})`);
  }
  return args;
}

/** Builds the addon with a fresh type definition folder; answers the folder. */
function buildTypeDefs() {
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'turngate-node-type-defs-'));
  execFileSync('cargo', ['build', '-p', CRATE], {
    cwd: workspace,
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, NAPI_TYPE_DEF_TMP_FOLDER: folder },
  });
  return folder;
}

/** `native.d.ts` from the type definitions in `folder`. */
async function nativeDeclarations(folder) {
  if (!fs.existsSync(path.join(folder, CRATE))) {
    throw new Error(
      `${folder} holds no type definitions of ${CRATE}: the addon did not compile with NAPI_TYPE_DEF_TMP_FOLDER=${folder}`,
    );
  }
  const { generateTypeDef } = require('@napi-rs/cli');
  const { dts } = await generateTypeDef({ typeDefDir: folder, cwd: packageDir });
  return dts;
}

/** Fails with tsc's diagnostics, if any. */
function assertClean(program, what) {
  const diagnostics = ts.getPreEmitDiagnostics(program);
  if (diagnostics.length === 0) return;
  const host = {
    getCanonicalFileName: (f) => f,
    getCurrentDirectory: () => packageDir,
    getNewLine: () => '\n',
  };
  throw new Error(`${what}:\n${ts.formatDiagnostics(diagnostics, host)}`);
}

/**
 * `index.d.ts` from index.js's JSDoc; index.js is checked too, against its JSDoc and `native.d.ts`, with
 * Node's types (whose own declarations are not checked: `compileDeclarations` checks ours).
 */
function indexDeclarations() {
  const program = ts.createProgram([path.join(packageDir, 'index.js')], {
    ...COMMON,
    types: ['node'],
    skipLibCheck: true,
    allowJs: true,
    checkJs: true,
    declaration: true,
    emitDeclarationOnly: true,
    outDir: path.join(packageDir, 'declarations'),
  });
  assertClean(program, 'index.js does not check against its JSDoc and native.d.ts');
  let declarations;
  program.emit(undefined, (file, text) => {
    if (path.basename(file) === 'index.d.ts') declarations = text;
  });
  if (declarations === undefined) throw new Error('tsc wrote no index.d.ts');
  return declarations;
}

/**
 * Checks both declaration files and compiles the typed use of the whole public surface against them,
 * with the standard library's web types (`Response`, `ReadableStream`, `AbortSignal`) and no others.
 */
function compileDeclarations() {
  const roots = ['native.d.ts', 'index.d.ts', path.join('test', 'types', 'usage.ts')];
  const program = ts.createProgram(
    roots.map((file) => path.join(packageDir, file)),
    { ...COMMON, noEmit: true, types: [], lib: ['lib.es2022.d.ts', 'lib.dom.d.ts'], skipDefaultLibCheck: true },
  );
  assertClean(program, 'the declarations, or test/types/usage.ts against them, do not compile');
}

/** Writes `text` to `file`, or with `check` fails unless the file holds it already. */
function settle(file, text, check) {
  const at = path.join(packageDir, file);
  if (!check) {
    fs.writeFileSync(at, text);
    return;
  }
  const committed = fs.existsSync(at) ? fs.readFileSync(at, 'utf8') : undefined;
  if (committed !== text) {
    throw new Error(`node/${file} is not what the code generates: run \`node node/scripts/types.js\` and commit it`);
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const folder = args.typeDefs ?? buildTypeDefs();
  try {
    settle('native.d.ts', await nativeDeclarations(folder), args.check);
  } finally {
    if (args.typeDefs === undefined) fs.rmSync(folder, { recursive: true, force: true });
  }
  settle('index.d.ts', indexDeclarations(), args.check);
  compileDeclarations();
}

main().catch((error) => {
  console.error(error.message);
  process.exitCode = 1;
});
