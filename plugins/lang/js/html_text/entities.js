// HTML character references (`&amp;`, `&#233;`, `&#x1F600;`), shared by both
// converters: Markdown may contain them too.

// The named references that show up in real pages. The full HTML list has
// over 2000; an unknown name is left as it is, which is what browsers do too.
const NAMED = {
  amp: '&', lt: '<', gt: '>', quot: '"', apos: "'",
  // A no-break space becomes a plain space: the result is for reading.
  nbsp: ' ', ensp: ' ', emsp: ' ', thinsp: ' ',
  shy: '', zwj: '', zwnj: '', lrm: '', rlm: '',
  copy: '©', reg: '®', trade: '™', deg: '°', plusmn: '±', times: '×',
  divide: '÷', micro: 'µ', para: '¶', sect: '§', middot: '·', bull: '•',
  hellip: '…', ndash: '–', mdash: '—', minus: '−',
  lsquo: '‘', rsquo: '’', sbquo: '‚', ldquo: '“', rdquo: '”', bdquo: '„',
  laquo: '«', raquo: '»', lsaquo: '‹', rsaquo: '›', prime: '′', Prime: '″',
  dagger: '†', Dagger: '‡', permil: '‰', cent: '¢', pound: '£', yen: '¥',
  euro: '€', curren: '¤', iexcl: '¡', iquest: '¿', ordf: 'ª', ordm: 'º',
  sup1: '¹', sup2: '²', sup3: '³', frac14: '¼', frac12: '½', frac34: '¾',
  larr: '←', rarr: '→', uarr: '↑', darr: '↓', harr: '↔', rArr: '⇒', lArr: '⇐',
  le: '≤', ge: '≥', ne: '≠', asymp: '≈', infin: '∞', sum: '∑', prod: '∏',
  radic: '√', part: '∂', nabla: '∇', isin: '∈', cap: '∩', cup: '∪',
  alpha: 'α', beta: 'β', gamma: 'γ', delta: 'δ', epsilon: 'ε', lambda: 'λ',
  mu: 'μ', pi: 'π', sigma: 'σ', tau: 'τ', phi: 'φ', omega: 'ω',
  Delta: 'Δ', Sigma: 'Σ', Omega: 'Ω', check: '✓', hearts: '♥', star: '☆',
  Agrave: 'À', Aacute: 'Á', Acirc: 'Â', Atilde: 'Ã', Auml: 'Ä', Aring: 'Å',
  AElig: 'Æ', Ccedil: 'Ç', Egrave: 'È', Eacute: 'É', Ecirc: 'Ê', Euml: 'Ë',
  Igrave: 'Ì', Iacute: 'Í', Icirc: 'Î', Iuml: 'Ï', Ntilde: 'Ñ', Ograve: 'Ò',
  Oacute: 'Ó', Ocirc: 'Ô', Otilde: 'Õ', Ouml: 'Ö', Oslash: 'Ø', Ugrave: 'Ù',
  Uacute: 'Ú', Ucirc: 'Û', Uuml: 'Ü', Yacute: 'Ý', szlig: 'ß',
  agrave: 'à', aacute: 'á', acirc: 'â', atilde: 'ã', auml: 'ä', aring: 'å',
  aelig: 'æ', ccedil: 'ç', egrave: 'è', eacute: 'é', ecirc: 'ê', euml: 'ë',
  igrave: 'ì', iacute: 'í', icirc: 'î', iuml: 'ï', ntilde: 'ñ', ograve: 'ò',
  oacute: 'ó', ocirc: 'ô', otilde: 'õ', ouml: 'ö', oslash: 'ø', ugrave: 'ù',
  uacute: 'ú', ucirc: 'û', uuml: 'ü', yacute: 'ý', yuml: 'ÿ',
};

const REFERENCE = /&(?:#(\d{1,8})|#[xX]([0-9a-fA-F]{1,7})|([A-Za-z][A-Za-z0-9]{1,31}));?/g;

/** Replaces character references with the characters they stand for. */
export function decodeEntities(text) {
  if (!text.includes('&')) return text; // the common case, and cheap
  return text.replace(REFERENCE, (whole, dec, hex, name) => {
    if (name !== undefined) {
      // Only a known name is a reference: "AT&T" and "&foo" stay as written.
      return Object.hasOwn(NAMED, name) ? NAMED[name] : whole;
    }
    const code = dec !== undefined ? Number(dec) : parseInt(hex, 16);
    // NUL, surrogates and numbers past Unicode are invalid: U+FFFD, as in HTML.
    if (code === 0 || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return '\uFFFD';
    return String.fromCodePoint(code);
  });
}
