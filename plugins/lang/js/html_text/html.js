// HTML to readable plain text, for a model reading a web page.
//
// Not a full HTML parser: a small scanner walks tags and text once, keeps no
// tree, and writes text as it goes. That is enough for reading and keeps the
// cost linear (strings are slow inside the wasm JS engine, so the scanner
// jumps with indexOf and sticky regexes instead of looking at every
// character).

import { decodeEntities } from './entities.js';
import { tidy } from './text.js';

// Elements whose whole content is dropped: code, styling, metadata, and
// pictures that have no text.
const SKIPPED = new Set([
  'script', 'style', 'head', 'title', 'noscript', 'template', 'svg', 'canvas',
  'iframe', 'object', 'select', 'button',
]);

// Elements that end a line (1) or stand apart as a paragraph (2). A Map,
// not an object: a tag named "constructor" must not find Object's.
const BLOCKS = new Map([
  ...['p', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'blockquote', 'pre', 'table', 'figure', 'hr', 'dl',
    'details', 'fieldset', 'address'].map((name) => [name, 2]),
  ...['ul', 'ol', 'li', 'div', 'section', 'article', 'header', 'footer', 'nav', 'aside', 'main',
    'form', 'tr', 'dt', 'dd', 'figcaption', 'summary', 'caption', 'center', 'body', 'html', 'tbody',
    'thead', 'tfoot'].map((name) => [name, 1]),
]);

// Elements that never have content or a closing tag.
const VOID = new Set([
  'br', 'hr', 'img', 'input', 'meta', 'link', 'area', 'base', 'col', 'embed',
  'source', 'track', 'wbr', 'param',
]);

// `<name attributes>` or `<name/>`; attribute values may hold '>' in quotes.
// Names and unquoted values stop at '<', so that a '<' without its '>'
// costs a short look ahead, not a scan to the end of the input.
const OPEN_TAG = /<([a-zA-Z][a-zA-Z0-9:-]*)((?:\s+[^\s"'<>/=]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'=<>`]+))?|\s*\/(?!>))*)\s*(\/?)>/y;
const CLOSE_TAG = /<\/([a-zA-Z][a-zA-Z0-9:-]*)[^<>]*>/y;
const ATTRIBUTE = /([^\s"'>/=]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+)))?/g;

/**
 * Converts an HTML document or fragment to plain text.
 *
 * Options: `links` (default true) writes a link as `text (url)`;
 * `baseUrl` makes relative link and image addresses absolute.
 */
export function htmlToText(html, { links = true, baseUrl } = {}) {
  const out = new Writer();
  const lists = []; // one entry per open <ul>/<ol>: {ordered, next}
  const anchors = []; // one entry per open <a>: {href, start}
  let pos = 0;

  while (pos < html.length) {
    const lt = html.indexOf('<', pos);
    const textEnd = lt === -1 ? html.length : lt;
    if (textEnd > pos) out.text(decodeEntities(html.slice(pos, textEnd)));
    if (lt === -1) break;
    pos = lt;

    // Comments, <!DOCTYPE>, <![CDATA[ and <? ... ?>: not text.
    if (html.startsWith('<!--', pos)) {
      const end = html.indexOf('-->', pos + 4);
      pos = end === -1 ? html.length : end + 3;
      continue;
    }
    if (html[pos + 1] === '!' || html[pos + 1] === '?') {
      const end = html.indexOf('>', pos);
      pos = end === -1 ? html.length : end + 1;
      continue;
    }

    CLOSE_TAG.lastIndex = pos;
    const close = CLOSE_TAG.exec(html);
    if (close) {
      pos = CLOSE_TAG.lastIndex;
      const name = close[1].toLowerCase();
      if (name === 'a') {
        const anchor = anchors.pop();
        if (anchor && links) out.linkTarget(anchor);
      } else if (name === 'ul' || name === 'ol') {
        lists.pop();
      } else if (name === 'li') {
        out.prefix = ''; // an empty item leaves no marker behind
      } else if (name === 'pre') {
        out.pre = Math.max(0, out.pre - 1);
      } else if (name === 'blockquote') {
        out.quote = Math.max(0, out.quote - 1);
      }
      if (BLOCKS.has(name)) out.breakLine(BLOCKS.get(name));
      continue;
    }

    OPEN_TAG.lastIndex = pos;
    const open = OPEN_TAG.exec(html);
    if (!open) {
      // A '<' that starts no tag ("a < b") is text.
      out.text('<');
      pos++;
      continue;
    }
    pos = OPEN_TAG.lastIndex;
    const name = open[1].toLowerCase();
    const selfClosing = open[3] === '/' || VOID.has(name);

    if (SKIPPED.has(name)) {
      if (!selfClosing) pos = skipElement(html, pos, name);
      continue;
    }
    if (BLOCKS.has(name)) out.breakLine(BLOCKS.get(name));

    switch (name) {
      case 'br':
        out.newline();
        break;
      case 'hr':
        out.text('----');
        out.breakLine(2);
        break;
      case 'ul':
      case 'ol':
        if (!selfClosing) {
          const start = Number.parseInt(attributes(open[2]).start, 10);
          lists.push({ ordered: name === 'ol', next: Number.isFinite(start) ? start : 1 });
        }
        break;
      case 'li': {
        const list = lists[lists.length - 1];
        const indent = '  '.repeat(Math.max(0, lists.length - 1));
        out.prefix = indent + (list && list.ordered ? `${list.next++}. ` : '- ');
        break;
      }
      case 'td':
      case 'th':
        out.cell();
        break;
      case 'tr':
        out.row();
        break;
      case 'pre':
        if (!selfClosing) out.pre++;
        // The newline right after <pre> is not content.
        if (html[pos] === '\n') pos++;
        else if (html.startsWith('\r\n', pos)) pos += 2;
        break;
      case 'blockquote':
        if (!selfClosing) out.quote++;
        break;
      case 'img': {
        const { alt } = attributes(open[2]);
        const text = alt === undefined ? '' : decodeEntities(alt).trim();
        if (text) out.text(`[image: ${text}]`);
        break;
      }
      case 'a':
        if (!selfClosing) {
          const href = attributes(open[2]).href;
          anchors.push({ href: href === undefined ? undefined : decodeEntities(href).trim(), start: out.length });
        }
        break;
      default:
        break;
    }
  }
  return out.finish(links ? (href) => resolveLink(href, baseUrl) : null);
}

/** The position after the element's end tag (or the end of the input). */
function skipElement(html, pos, name) {
  // <head> often has no end tag: the body starts where it would be.
  const end = new RegExp(name === 'head' ? '</head\\b|<body\\b' : `</${name}\\b`, 'gi');
  end.lastIndex = pos;
  const found = end.exec(html);
  if (!found) return html.length;
  if (found[0].toLowerCase() === '<body') return found.index;
  const gt = html.indexOf('>', end.lastIndex);
  return gt === -1 ? html.length : gt + 1;
}

/** The attributes of a tag as an object; names in lower case, first one wins. */
function attributes(source) {
  const result = Object.create(null); // no inherited names such as "constructor"
  for (const m of source.matchAll(ATTRIBUTE)) {
    const name = m[1].toLowerCase();
    if (!(name in result)) result[name] = m[2] ?? m[3] ?? m[4] ?? '';
  }
  return result;
}

/**
 * The address to show for a link, or null to show none: fragments
 * (`#top`) and script links say nothing to a reader.
 */
function resolveLink(href, baseUrl) {
  if (!href || href.startsWith('#') || /^(javascript|data):/i.test(href)) return null;
  if (baseUrl) {
    try {
      return new URL(href, baseUrl).href;
    } catch {
      return href;
    }
  }
  return href;
}

/**
 * Collects the text: collapses whitespace outside <pre>, turns requested
 * line breaks into at most one blank line, and writes list markers and
 * quote marks at the start of lines.
 */
class Writer {
  constructor() {
    this.parts = [];
    this.length = 0; // characters written so far, for link text positions
    this.pendingBreak = 0; // newlines owed before the next text: 0, 1 or 2
    this.atLineStart = true;
    this.spaceOwed = false; // whitespace seen between two words
    this.prefix = ''; // list marker for the next line
    this.pre = 0; // depth of <pre>: whitespace is kept inside
    this.quote = 0; // depth of <blockquote>
    this.cellsInRow = 0;
    this.linkMarks = []; // [position, href] of each link to annotate
  }

  breakLine(n) {
    if (this.length > 0) this.pendingBreak = Math.max(this.pendingBreak, n);
    this.spaceOwed = false;
  }

  newline() {
    // <br> always counts, even twice in a row.
    this.write('\n');
    this.atLineStart = true;
    this.spaceOwed = false;
  }

  row() {
    this.cellsInRow = 0;
  }

  cell() {
    if (this.cellsInRow++ > 0) this.text(' | ');
  }

  text(raw) {
    if (this.pre > 0) {
      if (raw) this.startText();
      this.write(raw);
      this.atLineStart = raw.endsWith('\n');
      return;
    }
    // Runs of whitespace (newlines included) become one space.
    const words = raw.split(/\s+/);
    for (let i = 0; i < words.length; i++) {
      if (i > 0) this.spaceOwed = true;
      const word = words[i];
      if (!word) continue;
      this.startText();
      if (this.spaceOwed && !this.atLineStart) this.write(' ');
      this.spaceOwed = false;
      this.atLineStart = false;
      this.write(word);
    }
  }

  /** Writes owed line breaks, quote marks and the list marker. */
  startText() {
    if (this.pendingBreak > 0) {
      this.write('\n'.repeat(this.pendingBreak));
      this.pendingBreak = 0;
      this.atLineStart = true;
    }
    if (this.atLineStart) {
      if (this.quote > 0) this.write('> '.repeat(this.quote));
      if (this.prefix) this.write(this.prefix);
      this.prefix = '';
      this.spaceOwed = false;
    }
  }

  /** Called at </a>: the address goes after the link's text. */
  linkTarget({ href, start }) {
    if (href !== undefined) this.linkMarks.push([this.length, href, start]);
  }

  write(s) {
    this.parts.push(s);
    this.length += s.length;
  }

  finish(resolve) {
    const text = this.parts.join('');
    if (!resolve) return tidy(text);
    // Put " (url)" after each link's text. Links end in increasing order, so
    // one pass from the front rebuilds the text. A link whose text is its
    // address gets none.
    const pieces = [];
    let done = 0;
    for (const [end, href, start] of this.linkMarks) {
      const url = resolve(href);
      if (!url) continue;
      const label = text.slice(start, end).trim();
      if (label === url || label === href || `mailto:${label}` === url) continue;
      pieces.push(text.slice(done, end), label ? ` (${url})` : url);
      done = end;
    }
    pieces.push(text.slice(done));
    return tidy(pieces.join(''));
  }
}
