// The tools of the html_text plugin: their specs, argument checks and
// dispatch. No WIT imports here, so `node --test` can load this module;
// plugin.js wires it to the component's exports.

import { htmlToText } from './html.js';
import { markdownToText } from './markdown.js';
import { truncate } from './text.js';

export const DEFAULT_MAX_CHARS = 100_000;
export const LIMIT_MAX_CHARS = 1_000_000;

/** A failure the model can act on: `kind` is a WIT `error-kind`. */
export class ToolError extends Error {
  constructor(kind, message) {
    super(message);
    this.name = 'ToolError';
    this.kind = kind;
  }
}

const maxCharsSchema = {
  type: 'integer',
  minimum: 1,
  maximum: LIMIT_MAX_CHARS,
  description: `Longest result in characters (default ${DEFAULT_MAX_CHARS}); a longer text is cut and ends with a line saying so.`,
};
const linksSchema = {
  type: 'boolean',
  description: 'Write each link as "text (url)" (default true); false keeps only the text.',
};

const TOOLS = {
  html_to_text: {
    description:
      'Turn HTML (a web page or a fragment) into readable plain text: drops scripts, styles and the <head>, ' +
      'puts blocks on their own lines, lists as "- " items, table rows as "a | b", links as "text (url)", ' +
      'decodes entities and collapses whitespace.',
    schema: {
      type: 'object',
      properties: {
        html: { type: 'string', description: 'The HTML source.' },
        links: linksSchema,
        base_url: {
          type: 'string',
          description: 'The page\'s own address (http or https), to make relative links absolute, e.g. "https://example.com/docs/".',
        },
        max_chars: maxCharsSchema,
      },
      required: ['html'],
      additionalProperties: false,
    },
    run: (args) => htmlToText(args.html, { links: args.links, baseUrl: args.base_url }),
  },
  markdown_to_text: {
    description:
      'Strip Markdown syntax and keep the text: headings without "#", no emphasis marks, links as "text (url)", ' +
      'list items as "- " or "1. ", code blocks as text indented by four spaces, tables as "a | b" rows.',
    schema: {
      type: 'object',
      properties: {
        markdown: { type: 'string', description: 'The Markdown source.' },
        links: linksSchema,
        max_chars: maxCharsSchema,
      },
      required: ['markdown'],
      additionalProperties: false,
    },
    run: (args) => markdownToText(args.markdown, { links: args.links }),
  },
};

/** The tool specs, as the WIT `tool-spec` record (camelCase fields). */
export function listTools() {
  return Object.entries(TOOLS).map(([name, tool]) => ({
    name,
    description: tool.description,
    inputSchema: JSON.stringify(tool.schema),
  }));
}

/** Runs tool `name` on `argumentsJson`; throws ToolError for a bad call. */
export function callTool(name, argumentsJson) {
  const tool = Object.hasOwn(TOOLS, name) ? TOOLS[name] : undefined;
  if (!tool) throw new ToolError('not-found', `this plugin has no tool named "${name}"`);
  const args = checkArguments(tool.schema, parseArguments(argumentsJson));
  return truncate(tool.run(args), args.max_chars);
}

function parseArguments(json) {
  let args;
  try {
    args = JSON.parse(json);
  } catch (e) {
    throw new ToolError('invalid-input', `arguments are not JSON: ${e.message}`);
  }
  if (args === null || typeof args !== 'object' || Array.isArray(args)) {
    throw new ToolError('invalid-input', 'arguments must be a JSON object');
  }
  return args;
}

// The host has already checked the arguments against the schema; these
// checks repeat the part the code relies on (so a call from elsewhere gets a
// clear message too) and add what a schema cannot say.
function checkArguments(schema, args) {
  for (const key of Object.keys(args)) {
    if (!Object.hasOwn(schema.properties, key)) {
      throw new ToolError('invalid-input', `${key}: unknown argument; expected one of ${Object.keys(schema.properties).join(', ')}`);
    }
  }
  for (const key of schema.required) {
    if (typeof args[key] !== 'string') {
      throw new ToolError('invalid-input', `${key}: expected a string, got ${describe(args[key])}`);
    }
  }
  const links = args.links ?? true;
  if (typeof links !== 'boolean') {
    throw new ToolError('invalid-input', `links: expected true or false, got ${describe(args.links)}`);
  }
  const maxChars = args.max_chars ?? DEFAULT_MAX_CHARS;
  if (!Number.isInteger(maxChars) || maxChars < 1 || maxChars > LIMIT_MAX_CHARS) {
    throw new ToolError('invalid-input', `max_chars: expected a whole number from 1 to ${LIMIT_MAX_CHARS}, got ${describe(args.max_chars)}`);
  }
  let baseUrl = args.base_url;
  if (baseUrl !== undefined) {
    if (typeof baseUrl !== 'string' || !isHttpUrl(baseUrl)) {
      throw new ToolError(
        'invalid-input',
        `base_url: expected an absolute http or https address such as "https://example.com/docs/", got ${describe(baseUrl)}`,
      );
    }
  }
  return { ...args, links, max_chars: maxChars, base_url: baseUrl };
}

function isHttpUrl(text) {
  try {
    const url = new URL(text);
    return url.protocol === 'http:' || url.protocol === 'https:';
  } catch {
    return false;
  }
}

function describe(value) {
  if (value === undefined) return 'nothing';
  const json = JSON.stringify(value);
  return json.length > 60 ? `${json.slice(0, 57)}...` : json;
}
