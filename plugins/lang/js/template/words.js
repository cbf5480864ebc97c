// The tool of the __NAME__ plugin: its spec, argument checks and work.
// No WIT imports here, so `node --test` can load this module; plugin.js
// wires it to the component's exports.

/** A failure the model can act on: `kind` is a WIT `error-kind`. */
export class ToolError extends Error {
  constructor(kind, message) {
    super(message);
    this.name = 'ToolError';
    this.kind = kind;
  }
}

const SCHEMA = {
  type: 'object',
  properties: {
    text: { type: 'string', description: 'The text to count.' },
  },
  required: ['text'],
  additionalProperties: false,
};

/** The tool specs, as the WIT `tool-spec` record (camelCase fields). */
export function listTools() {
  return [
    {
      name: '__NAME___words',
      description: 'Count the lines, words, characters and UTF-8 bytes of a text.',
      inputSchema: JSON.stringify(SCHEMA),
    },
  ];
}

/** Runs tool `name` on `argumentsJson`; throws ToolError for a bad call. */
export function callTool(name, argumentsJson) {
  if (name !== '__NAME___words') throw new ToolError('not-found', `this plugin has no tool named "${name}"`);
  let args;
  try {
    args = JSON.parse(argumentsJson);
  } catch (e) {
    throw new ToolError('invalid-input', `arguments are not JSON: ${e.message}`);
  }
  // The host has checked the schema already; check what the code relies on.
  if (typeof args?.text !== 'string') {
    throw new ToolError('invalid-input', 'text: expected a string');
  }
  return JSON.stringify(count(args.text));
}

/** Lines, words (runs of non-space), characters (code points) and UTF-8 bytes. */
export function count(text) {
  const chars = [...text];
  return {
    lines: text === '' ? 0 : text.split('\n').length - (text.endsWith('\n') ? 1 : 0),
    words: (text.match(/\S+/g) ?? []).length,
    characters: chars.length,
    bytes: chars.reduce((n, c) => n + utf8Length(c.codePointAt(0)), 0),
  };
}

/** Bytes of one code point in UTF-8. */
function utf8Length(cp) {
  return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}
