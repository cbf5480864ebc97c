// Markdown to plain text: the syntax goes, the words and the layout stay.
//
// Line by line, in the spirit of CommonMark and GitHub's tables, not to the
// letter: headings lose their marks, emphasis its stars, links become
// `text (url)`, code blocks stay as text indented by four spaces, list
// markers become "- " or "1. ", tables become "a | b" rows.

import { decodeEntities } from './entities.js';
import { tidy } from './text.js';

const FENCE = /^( {0,3})(`{3,}|~{3,})(.*)$/;
const ATX_HEADING = /^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const SETEXT_UNDERLINE = /^ {0,3}(?:=+|-+)[ \t]*$/;
const THEMATIC_BREAK = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const LIST_ITEM = /^([ \t]*)([-*+]|\d{1,9}[.)])(?:[ \t]+(.*))?$/;
const TASK = /^\[([ xX])\][ \t]+/;
const BLOCKQUOTE = /^ {0,3}>[ \t]?/;
const LINK_DEFINITION = /^ {0,3}\[[^\]^][^\]]*\]:[ \t]*\S+.*$/;
const TABLE_DELIMITER = /^[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/;

/**
 * Converts Markdown to plain text. Option: `links` (default true) writes a
 * link as `text (url)`; false keeps the text only.
 */
export function markdownToText(markdown, { links = true } = {}) {
  const lines = markdown.replace(/\r\n?/g, '\n').split('\n');
  const out = [];
  let fence = null; // the opening fence while inside a fenced code block
  let previousIsText = false; // for setext headings: "Title\n====="

  for (let i = 0; i < lines.length; i++) {
    let line = lines[i];

    if (fence) {
      const close = FENCE.exec(line);
      if (close && close[2][0] === fence[0] && close[2].length >= fence.length && !close[3].trim()) {
        fence = null;
        out.push('');
      } else {
        out.push(line.trim() ? `    ${line}` : '');
      }
      continue;
    }
    const open = FENCE.exec(line);
    // A backtick fence's info string (the language) has no backticks.
    if (open && !(open[2][0] === '`' && open[3].includes('`'))) {
      fence = open[2];
      out.push('');
      previousIsText = false;
      continue;
    }

    // Quote marks stay as "> ", as html_to_text writes <blockquote>.
    let quote = '';
    while (BLOCKQUOTE.test(line)) {
      line = line.replace(BLOCKQUOTE, '');
      quote += '> ';
    }

    if (!line.trim()) {
      out.push(quote.trimEnd());
      previousIsText = false;
      continue;
    }
    if (previousIsText && SETEXT_UNDERLINE.test(line)) {
      previousIsText = false; // the line above was a heading: drop its underline
      continue;
    }
    if (THEMATIC_BREAK.test(line)) {
      out.push(quote + '----');
      previousIsText = false;
      continue;
    }
    if (LINK_DEFINITION.test(line)) {
      continue; // "[id]: https://..." only defines a reference
    }

    const heading = ATX_HEADING.exec(line);
    if (heading) {
      out.push(quote + inline(heading[1] ?? '', links));
      previousIsText = false;
      continue;
    }

    const nextIsDelimiter = i + 1 < lines.length && TABLE_DELIMITER.test(lines[i + 1]) && lines[i + 1].includes('-');
    if (TABLE_DELIMITER.test(line) && line.includes('|') && line.includes('-')) {
      continue; // the |---|:--:| row under a table's header
    }
    if (line.trimStart().startsWith('|') || (nextIsDelimiter && line.includes('|'))) {
      out.push(quote + tableRow(line, links));
      previousIsText = false;
      continue;
    }

    const item = LIST_ITEM.exec(line);
    if (item) {
      const [, indent, marker, rest = ''] = item;
      const bullet = /\d/.test(marker) ? `${marker.slice(0, -1)}. ` : '- ';
      const task = TASK.exec(rest);
      const body = task ? `[${task[1] === ' ' ? ' ' : 'x'}] ${rest.slice(task[0].length)}` : rest;
      out.push(quote + indent.replace(/\t/g, '    ') + bullet + inline(body, links));
      previousIsText = false;
      continue;
    }

    // Indented code after a blank line: kept as it is.
    if (/^( {4}|\t)/.test(line) && !previousIsText) {
      out.push(quote + line);
      continue;
    }

    // A paragraph line. Two trailing spaces or a backslash mark a hard line
    // break, which the line end already is.
    const text = line.trim().replace(/\\$/, '');
    out.push(quote + inline(text, links));
    previousIsText = true;
  }
  return tidy(out.join('\n'));
}

/** A table row "| a | b |" as "a | b". */
function tableRow(line, links) {
  const cells = line
    .trim()
    .replace(/^\|/, '')
    .replace(/(?<!\\)\|$/, '')
    .split(/(?<!\\)\|/)
    .map((cell) => inline(cell.trim(), links));
  return cells.join(' | ');
}

// Inline syntax. Code spans and backslash escapes are set aside first as
// placeholders (private-use characters), so that nothing inside them is
// taken for emphasis or links, and put back at the end.
const HOLD_START = '\uE000';
const HOLD_END = '\uE001';
const HELD = /\uE000(\d+)\uE001/g;

function inline(text, links) {
  // Most prose lines have no inline syntax at all: skip the dozen passes.
  if (!/[`*_~[\]<>!&\\]/.test(text)) return text;
  const held = [];
  const hold = (s) => `${HOLD_START}${held.push(s) - 1}${HOLD_END}`;

  // Spans are bounded (code 1000 characters, emphasis 300, a link's address
  // 2000) and labels stop at "[": an opener without its closer then costs
  // a short look ahead, not a scan to the end of a long line for each one.
  text = text
    // `code`, ``co`de``: the content as it is, one padding space trimmed.
    .replace(/(`+)([^`]|[^`][\s\S]{0,1000}?[^`])\1(?!`)/g, (_, ticks, code) =>
      hold(/^ .* $/.test(code) && code.trim() ? code.slice(1, -1) : code))
    .replace(/\\([!-/:-@[-`{-~])/g, (_, ch) => hold(ch))
    // ![alt](src "title"): the picture's description, if it has one.
    .replace(/!\[([^[\]]*)\]\((?:[^()\s]|\([^()\s]*\)){0,2000}(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)/g, (_, alt) =>
      alt.trim() ? `[image: ${alt.trim()}]` : '')
    // [text](url "title")
    .replace(/\[([^[\]]*)\]\(\s*<?((?:[^()\s<>]|\([^()\s]*\)){0,2000})>?(?:\s+(?:"[^"]*"|'[^']*'|\([^)]*\)))?\s*\)/g,
      (_, label, url) => link(label, url))
    // [text][id] and [text][]: the text (the definition is dropped).
    .replace(/\[([^[\]]+)\]\[[^[\]]*\]/g, '$1')
    // <https://example.com> and <someone@example.com>
    .replace(/<((?:https?|ftp):\/\/[^\s<>]+|mailto:[^\s<>]+)>/gi, (_, url) => hold(url))
    .replace(/<([^\s<>@]+@[^\s<>@]+\.[a-zA-Z]{2,})>/g, (_, mail) => hold(mail))
    // Inline HTML: <br> breaks the line, other tags go.
    .replace(/[ \t]*<br\s*\/?>[ \t]*/gi, '\n')
    .replace(/<\/?[a-zA-Z][a-zA-Z0-9-]*(?:\s[^<>]*)?\/?>/g, '')
    // Emphasis and strike-through; "_" only around words (snake_case stays).
    // A word character is [A-Za-z0-9_] or any non-ASCII one: the JS engine
    // in the component has no Unicode property classes (\p{L}).
    .replace(/~~(\S(?:.{0,300}?\S)?)~~/g, '$1')
    .replace(/\*\*(\S(?:.{0,300}?\S)?)\*\*/g, '$1')
    .replace(/(^|[^\w\u0080-\uffff])__(\S(?:.{0,300}?\S)?)__(?![\w\u0080-\uffff])/g, '$1$2')
    .replace(/\*(\S(?:[^*]*?\S)?)\*/g, '$1')
    .replace(/(^|[^\w\u0080-\uffff])_(\S(?:[^_]*?\S)?)_(?![\w\u0080-\uffff])/g, '$1$2');

  text = decodeEntities(text);
  // Put back what was set aside. A held link address may itself hold an
  // escape, hence a second round; text that had private-use characters of
  // its own keeps them.
  for (let round = 0; round < 2 && text.includes(HOLD_START); round++) {
    text = text.replace(HELD, (whole, n) => held[Number(n)] ?? whole);
  }
  return text;

  // "text (url)", the address held so that its "_" and "*" stay as they are.
  function link(label, url) {
    const words = label.trim();
    if (!links || !url || url.startsWith('#')) return words;
    if (!words || words === url) return hold(url);
    return `${words} (${hold(url)})`;
  }
}
