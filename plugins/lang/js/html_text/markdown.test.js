// node --test: the Markdown converter.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { markdownToText } from './markdown.js';

test('headings lose their marks, ATX and setext', () => {
  assert.equal(markdownToText('# Title #\n\nText\n\nSub\n---\n\n### Third'), 'Title\n\nText\n\nSub\n\nThird');
  assert.equal(markdownToText('Big\n===\nbody'), 'Big\nbody');
});

test('emphasis, strike-through and code spans', () => {
  assert.equal(
    markdownToText('Use **bold**, __strong__, *em*, _em_, ~~gone~~ and `a_b *c*`.'),
    'Use bold, strong, em, em, gone and a_b *c*.',
  );
  // Not emphasis: snake_case, lone stars, escapes.
  assert.equal(markdownToText('snake_case_name, 2 * 3 * 4, \\*literal\\*'), 'snake_case_name, 2 * 3 * 4, *literal*');
});

test('links, images, autolinks and references', () => {
  const md = 'See [the docs](https://example.com/a_b_c "Docs"), <https://x.org>, [ref][r] and ![a cat](cat.png).\n\n[r]: https://example.com/ref';
  assert.equal(markdownToText(md), 'See the docs (https://example.com/a_b_c), https://x.org, ref and [image: a cat].');
  assert.equal(markdownToText(md, { links: false }), 'See the docs, https://x.org, ref and [image: a cat].');
  assert.equal(markdownToText('[https://x.org](https://x.org) [top](#top)'), 'https://x.org top');
});

test('lists keep their nesting; task boxes stay', () => {
  assert.equal(
    markdownToText('* one\n+ [x] done\n  1) sub\n  2. *sub2*'),
    '- one\n- [x] done\n  1. sub\n  2. sub2',
  );
});

test('fenced code is kept, indented by four spaces, untouched', () => {
  assert.equal(
    markdownToText('Before\n\n```js\nconst a = **b**;\n\nf(a)\n```\n\nAfter'),
    'Before\n\n    const a = **b**;\n\n    f(a)\n\nAfter',
  );
  assert.equal(markdownToText('~~~~\n```\ninner\n~~~~'), '    ```\n    inner');
});

test('tables become "a | b" rows', () => {
  assert.equal(markdownToText('| Name | Value |\n|------|:-----:|\n| a | x\\|y |\n'), 'Name | Value\na | x|y');
  assert.equal(markdownToText('k | v\n--|--\n1 | 2'), 'k | v\n1 | 2');
});

test('quotes, rules, inline HTML and entities', () => {
  assert.equal(markdownToText('> quoted **text**\n> > nested'), '> quoted text\n> > nested');
  assert.equal(markdownToText('a\n\n***\n\nb'), 'a\n\n----\n\nb');
  assert.equal(markdownToText('Line<br>next and <span class="x">span</span> &copy; &amp;'), 'Line\nnext and span © &');
});

test('empty input and odd input do not throw', () => {
  assert.equal(markdownToText(''), '');
  assert.equal(markdownToText('```\nunclosed fence'), '    unclosed fence');
  assert.equal(markdownToText('[broken](link'), '[broken](link');
});

test('openers without closers cost linear time, not quadratic', () => {
  // Each took seconds for 100 KB on one line before the spans were bounded.
  for (const input of ['[a'.repeat(50_000), '**a '.repeat(25_000), '~~a '.repeat(25_000), '[a](x'.repeat(20_000)]) {
    const start = Date.now();
    markdownToText(input);
    assert.ok(Date.now() - start < 1000, `${input.slice(0, 8)}...: ${Date.now() - start} ms`);
  }
});
