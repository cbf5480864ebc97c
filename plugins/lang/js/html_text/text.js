// Finishing touches shared by both converters.

/** Strips trailing spaces, keeps at most one blank line, trims the ends. */
export function tidy(text) {
  return text
    .replace(/[ \t]+$/gm, '')
    .replace(/\n{3,}/g, '\n\n')
    .replace(/^\n+|\s+$/g, '');
}

/**
 * Cuts `text` to at most `maxChars` characters (UTF-16 code units, what
 * JavaScript counts), at a line or word end when one is near, and says so
 * at the end, so that the model knows it did not see everything.
 */
export function truncate(text, maxChars) {
  if (text.length <= maxChars) return text;
  let cut = maxChars;
  // Never split a surrogate pair (an emoji, say) in two.
  const last = text.charCodeAt(cut - 1);
  if (last >= 0xd800 && last <= 0xdbff) cut--;
  // Prefer a whitespace boundary near the end: within the last tenth of the
  // kept text, or its last 20 characters if that is more.
  const from = Math.max(0, cut - Math.max(20, Math.floor(cut / 10)));
  const space = text.slice(from, cut + 1).search(/\s\S*$/);
  if (space > 0) cut = from + space;
  const kept = text.slice(0, cut).trimEnd();
  return `${kept}\n[truncated: ${kept.length} of ${text.length} characters shown; raise max_chars to see more]`;
}
