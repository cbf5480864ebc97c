// node --test: the HTML converter, on small documents.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { htmlToText } from './html.js';

test('drops head, scripts, styles and comments', () => {
  const html = `<!DOCTYPE html><html><head><title>T</title><style>p{color:red}</style></head>
    <body><script>var s = "<p>not text</p>";</script><!-- a <p> comment --><p>Only this</p></body></html>`;
  assert.equal(htmlToText(html), 'Only this');
});

test('a <head> without an end tag stops at <body>', () => {
  assert.equal(htmlToText('<head><meta charset="utf-8"><body><p>Text</p>'), 'Text');
});

test('blocks become lines, paragraphs are separated by one blank line', () => {
  const html = '<h1>Title</h1><p>One</p><p>Two<br>three</p><div>a</div><div>b</div>';
  assert.equal(htmlToText(html), 'Title\n\nOne\n\nTwo\nthree\n\na\nb');
});

test('whitespace collapses, inline tags join words', () => {
  assert.equal(htmlToText('<p>  Hello,\n\t  <b>big</b>   <i>wide</i>  wor<span>ld</span> </p>'), 'Hello, big wide world');
});

test('lists get "- " and numbers, nested lists are indented', () => {
  const html = '<ul><li>one</li><li>two<ol start="3"><li>a</li><li>b</li></ol></li></ul>';
  assert.equal(htmlToText(html), '- one\n- two\n  3. a\n  4. b');
});

test('links as "text (url)", resolved against base_url, or text only', () => {
  const html = '<p>See <a href="/docs?a=1&amp;b=2">the docs</a>, <a href="#top">top</a> and <a href="https://x.org">https://x.org</a>.</p>';
  assert.equal(
    htmlToText(html, { baseUrl: 'https://example.com/a/' }),
    'See the docs (https://example.com/docs?a=1&b=2), top and https://x.org.',
  );
  assert.equal(htmlToText(html, { links: false }), 'See the docs, top and https://x.org.');
  assert.equal(htmlToText('<a href="page.html">p</a>'), 'p (page.html)');
});

test('entities are decoded; unknown ones and bare ampersands stay', () => {
  assert.equal(
    htmlToText('<p>&lt;tag&gt; caf&eacute; &#233;&#x1F600; &copy;&nbsp;2024 AT&T &bogus; &#0;</p>'),
    '<tag> café é😀 © 2024 AT&T &bogus; \uFFFD',
  );
});

test('pre keeps its whitespace', () => {
  assert.equal(htmlToText('<p>Code:</p><pre>\n  a  =  1\n    b</pre><p>after</p>'), 'Code:\n\n  a  =  1\n    b\n\nafter');
});

test('tables, quotes, images and rules', () => {
  const html = '<table><tr><th>k</th><th>v</th></tr><tr><td>x</td><td>1</td></tr></table>' +
    '<blockquote><p>wise words</p></blockquote><img src="c.png" alt="A cat"><hr><p>end</p>';
  assert.equal(htmlToText(html), 'k | v\nx | 1\n\n> wise words\n\n[image: A cat]\n\n----\n\nend');
});

test('a "<" that starts no tag is text; broken markup does not throw', () => {
  assert.equal(htmlToText('3 < 4 and 5 <= 6'), '3 < 4 and 5 <= 6');
  assert.equal(htmlToText('<p>open <b>never closed <a href="x">link'), 'open never closed link');
  assert.equal(htmlToText('<script>unterminated'), '');
  assert.equal(htmlToText(''), '');
  assert.equal(htmlToText('</pre><constructor>a</constructor><p>b</p>'), 'a\n\nb');
});

test('attribute values may contain ">"', () => {
  assert.equal(htmlToText('<a title="a > b" href="/x">go</a>'), 'go (/x)');
});

test('openers without closers cost linear time, not quadratic', () => {
  // Each took seconds for 100 KB before the scanner's regexes stopped at '<'.
  for (const input of ['<a x'.repeat(25_000), '</a'.repeat(33_000), '<a x="'.repeat(20_000)]) {
    const start = Date.now();
    htmlToText(input);
    assert.ok(Date.now() - start < 1000, `${input.slice(0, 8)}...: ${Date.now() - start} ms`);
  }
});
