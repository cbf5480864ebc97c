// node --test: the tool layer, as the host calls it (JSON in, text out).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { callTool, listTools, ToolError } from './tools.js';

function fails(name, args, kind, message) {
  assert.throws(() => callTool(name, JSON.stringify(args)), (e) => {
    assert.ok(e instanceof ToolError);
    assert.equal(e.kind, kind);
    assert.equal(e.message, message);
    return true;
  });
}

test('specs: names, valid JSON schemas with required and no extra properties', () => {
  const tools = listTools();
  assert.deepEqual(tools.map((t) => t.name), ['html_to_text', 'markdown_to_text']);
  for (const t of tools) {
    const schema = JSON.parse(t.inputSchema);
    assert.equal(schema.type, 'object');
    assert.equal(schema.additionalProperties, false);
    assert.ok(schema.required.length > 0);
    for (const p of Object.values(schema.properties)) assert.ok(p.description);
  }
});

test('html_to_text: the integration vector', () => {
  const args = {
    html: '<h1>Title</h1><p>Hello <b>world</b> &amp; <a href="/docs">docs</a>.</p><ul><li>one</li><li>two</li></ul>',
    base_url: 'https://example.com/',
  };
  assert.equal(callTool('html_to_text', JSON.stringify(args)), 'Title\n\nHello world & docs (https://example.com/docs).\n\n- one\n- two');
});

test('markdown_to_text: the integration vector', () => {
  const args = { markdown: '# Title\n\nSome **bold** and [a link](https://example.com).\n\n```\ncode\n```\n' };
  assert.equal(callTool('markdown_to_text', JSON.stringify(args)), 'Title\n\nSome bold and a link (https://example.com).\n\n    code');
});

test('max_chars cuts at a word and says so', () => {
  const out = callTool('markdown_to_text', JSON.stringify({ markdown: 'alpha beta gamma delta', max_chars: 13 }));
  assert.equal(out, 'alpha beta\n[truncated: 10 of 22 characters shown; raise max_chars to see more]');
  assert.equal(callTool('markdown_to_text', JSON.stringify({ markdown: 'short', max_chars: 5 })), 'short');
});

test('bad arguments name the argument and what was expected', () => {
  fails('html_to_text', { html: '<a href="/x">x</a>', base_url: 'not a url' }, 'invalid-input',
    'base_url: expected an absolute http or https address such as "https://example.com/docs/", got "not a url"');
  fails('html_to_text', { html: 'x', base_url: 'ftp://example.com/' }, 'invalid-input',
    'base_url: expected an absolute http or https address such as "https://example.com/docs/", got "ftp://example.com/"');
  fails('html_to_text', { html: 42 }, 'invalid-input', 'html: expected a string, got 42');
  fails('markdown_to_text', {}, 'invalid-input', 'markdown: expected a string, got nothing');
  fails('markdown_to_text', { markdown: 'x', max_chars: 0 }, 'invalid-input',
    'max_chars: expected a whole number from 1 to 1000000, got 0');
  fails('markdown_to_text', { markdown: 'x', links: 'yes' }, 'invalid-input', 'links: expected true or false, got "yes"');
  fails('markdown_to_text', { markdown: 'x', html: 'y' }, 'invalid-input',
    'html: unknown argument; expected one of markdown, links, max_chars');
  fails('nope', {}, 'not-found', 'this plugin has no tool named "nope"');
  assert.throws(() => callTool('html_to_text', '[1]'), { message: 'arguments must be a JSON object' });
  assert.throws(() => callTool('html_to_text', '{'), /^ToolError: arguments are not JSON/);
});
