// `url_info`: fetches a URL and answers its status, its content type and the size of its body.
//
// An example turngate network tool written in JavaScript and built into a WASI 0.2 component with
// componentize-js (see `../../../build.sh`). `call` is an `async function` that awaits `fetch`:
// componentize-js runs the JavaScript event loop until the promise settles, and `fetch` goes out
// through `wasi:http/outgoing-handler`, where the host checks every request (method, origin, path, the
// address the name resolves to) before anything is sent. The tool also exports `urlFields`, naming
// `/url`, so the host checks the URL against the tool's network grant before the call starts.
//
// The module's top level runs once at build time (Wizer snapshots it), so it must not reach the
// network; everything happens in `call`.

const NAME = 'url_info';
/** The most body bytes counted; the rest is not read. */
const MAX_BODY_BYTES = 1024 * 1024;

const SCHEMA = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  properties: {
    url: {
      type: 'string',
      minLength: 1,
      description: 'Absolute http or https URL, e.g. `https://example.org/`.',
    },
  },
  required: ['url'],
  additionalProperties: false,
};

/** A failed call; `payload` is the `tool-error` variant componentize-js returns to the host. */
class ToolFailure extends Error {
  constructor(tag, message) {
    super(message);
    this.payload = { tag, val: message };
  }
}

export function describe() {
  return {
    name: NAME,
    description:
      'Fetch a URL (GET) and report its HTTP status, content type and body size (up to 1 MiB is read). ' +
      'Follows no redirect: a redirect is reported with its `location`.',
    inputSchema: JSON.stringify(SCHEMA),
    paths: [],
  };
}

export function urlFields() {
  return ['/url'];
}

/** The input's URL, checked. */
function parseInput(input) {
  let value;
  try {
    value = JSON.parse(input);
  } catch (err) {
    throw new ToolFailure('invalid-input', `bad input: ${err.message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ToolFailure('invalid-input', 'bad input: expected an object');
  }
  for (const key of Object.keys(value)) {
    if (key !== 'url') throw new ToolFailure('invalid-input', `bad input: unknown field \`${key}\``);
  }
  if (typeof value.url !== 'string' || !/^https?:\/\//.test(value.url)) {
    throw new ToolFailure('invalid-input', 'bad input: `url` must be an absolute http or https URL');
  }
  return value.url;
}

/** Counts the body's bytes, reading at most `MAX_BODY_BYTES`. */
async function bodySize(response) {
  const reader = response.body?.getReader();
  if (!reader) return { bytes: 0, truncated: false };
  let bytes = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return { bytes, truncated: false };
    bytes += value.length;
    if (bytes > MAX_BODY_BYTES) {
      await reader.cancel();
      return { bytes: MAX_BODY_BYTES, truncated: true };
    }
  }
}

export async function call(input) {
  try {
    const url = parseInput(input);
    let response;
    try {
      response = await fetch(url, { redirect: 'manual' });
    } catch (err) {
      // The host's refusal (HTTP-request-denied) or a network failure.
      throw new ToolFailure('failed', `GET ${url}: ${err.message ?? err}`);
    }
    const { bytes, truncated } = await bodySize(response);
    const answer = {
      status: response.status,
      content_type: response.headers.get('content-type'),
      bytes,
      truncated,
    };
    const location = response.headers.get('location');
    if (location !== null) answer.location = location;
    return JSON.stringify(answer);
  } catch (err) {
    if (err instanceof ToolFailure) throw err;
    // A bug or an engine limit: report it rather than trap.
    throw new ToolFailure('failed', `${NAME}: internal error: ${err?.message ?? String(err)}`);
  }
}
