// The csv_to_json tool's input: its JSON Schema, strict parsing, the path guard and the tool errors.
// No I/O, so it is tested under Node (`node --test test/`).

export const SCHEMA = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  properties: {
    input_path: {
      type: 'string',
      minLength: 1,
      description: 'CSV file to read, relative to the root, e.g. `data/people.csv`. UTF-8, at most 4 MiB.',
    },
    output_path: {
      type: 'string',
      minLength: 1,
      description:
        'JSON file to create or replace, relative to the root, e.g. `data/people.json`. Its directory must exist.',
    },
    delimiter: {
      type: 'string',
      minLength: 1,
      maxLength: 1,
      default: ',',
      description: 'The field separator: one character, not a quote or a line break. Default `,`; `;` and a tab are common.',
    },
    header: {
      type: 'boolean',
      default: true,
      description:
        'Whether the first record names the columns. True (default): an array of objects keyed by those names. False: an array of arrays.',
    },
  },
  required: ['input_path', 'output_path'],
  additionalProperties: false,
};

/** A failed call; `payload` is the `tool-error` variant returned to the host. */
export class ToolFailure extends Error {
  constructor(tag, message) {
    super(message);
    this.payload = { tag, val: message };
  }
}

export const invalidInput = (message) => new ToolFailure('invalid-input', message);
export const failed = (message) => new ToolFailure('failed', message);

/** Checks a path field: relative to the root, no `..`, no NUL. The host checks it too. */
export function checkRelative(field, path) {
  if (typeof path !== 'string') throw invalidInput(`bad input: \`${field}\` must be a string`);
  if (path === '') throw invalidInput(`bad input: \`${field}\` must not be empty`);
  if (path.includes('\0')) throw invalidInput(`bad input: \`${field}\` must not contain a NUL character`);
  if (path.startsWith('/')) {
    throw invalidInput(`bad input: \`${field}\` must be relative to the root, got \`${path}\``);
  }
  if (path.split('/').includes('..')) {
    throw invalidInput(`bad input: \`${field}\` must not contain \`..\`, got \`${path}\``);
  }
  return path;
}

/**
 * Parses the `call` input strictly: a JSON object with only the schema's fields, of the right types.
 * (Duplicate keys are refused by the host, which parses every input strictly before the call.)
 */
export function parseInput(raw) {
  let value;
  try {
    value = JSON.parse(raw);
  } catch (err) {
    throw invalidInput(`bad input: not JSON: ${err.message}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw invalidInput('bad input: expected a JSON object');
  }
  for (const key of Object.keys(value)) {
    if (!Object.hasOwn(SCHEMA.properties, key)) {
      throw invalidInput(
        `bad input: unknown field \`${key}\`, expected one of \`input_path\`, \`output_path\`, \`delimiter\`, \`header\``,
      );
    }
  }
  for (const key of SCHEMA.required) {
    if (!Object.hasOwn(value, key)) throw invalidInput(`bad input: missing field \`${key}\``);
  }
  const inputPath = checkRelative('input_path', value.input_path);
  const outputPath = checkRelative('output_path', value.output_path);
  let delimiter = ',';
  if (Object.hasOwn(value, 'delimiter')) {
    delimiter = value.delimiter;
    if (typeof delimiter !== 'string' || [...delimiter].length !== 1) {
      throw invalidInput('bad input: `delimiter` must be a string of exactly one character');
    }
    if (delimiter === '"' || delimiter === '\r' || delimiter === '\n') {
      throw invalidInput('bad input: `delimiter` must not be a quote or a line break');
    }
  }
  let header = true;
  if (Object.hasOwn(value, 'header')) {
    header = value.header;
    if (typeof header !== 'boolean') throw invalidInput('bad input: `header` must be true or false');
  }
  return { inputPath, outputPath, delimiter, header };
}

/** The parent directory of a root-relative path (`.` for a top-level name) and the last name. */
export function splitPath(path) {
  const trimmed = path.replace(/\/+$/, '');
  const slash = trimmed.lastIndexOf('/');
  return slash === -1 ? ['.', trimmed] : [trimmed.slice(0, slash) || '.', trimmed.slice(slash + 1)];
}
