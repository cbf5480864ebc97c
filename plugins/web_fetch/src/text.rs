//! A response body as readable text: HTML reduced to its words and line
//! breaks, plain text and JSON as they are, anything else refused.

use std::borrow::Cow;

/// How a body is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Html,
    Text,
}

/// The media type of a `content-type` value, lower case, without parameters.
pub fn media_type(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// Whether a body of this content type can be shown. With no content type,
/// a body that looks like text is shown as text (or HTML, when it starts
/// like HTML).
pub fn classify(content_type: Option<&str>, body: &[u8]) -> Result<Kind, String> {
    let media = content_type.map(media_type).unwrap_or_default();
    if media.is_empty() {
        let head = &body[..body.len().min(1024)];
        if head.contains(&0) {
            return Err("the response has no content-type and does not look like text".into());
        }
        let start = String::from_utf8_lossy(head)
            .trim_start()
            .to_ascii_lowercase();
        return Ok(
            if start.starts_with("<!doctype html") || start.starts_with("<html") {
                Kind::Html
            } else {
                Kind::Text
            },
        );
    }
    match media.as_str() {
        "text/html" | "application/xhtml+xml" => Ok(Kind::Html),
        "application/json" => Ok(Kind::Text),
        m if m.starts_with("text/") || m.ends_with("+json") => Ok(Kind::Text),
        m => Err(format!(
            "the response is {m}, which cannot be shown as text (only HTML, text/* and JSON can)"
        )),
    }
}

/// The body as text: Latin-1 when the content type says so, otherwise UTF-8
/// (invalid sequences replaced), without a byte order mark.
pub fn decode(content_type: Option<&str>, body: &[u8]) -> String {
    let charset = content_type
        .into_iter()
        .flat_map(|ct| ct.split(';').skip(1))
        .filter_map(|param| param.split_once('='))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("charset"))
        .map(|(_, value)| value.trim().trim_matches('"').to_ascii_lowercase());
    let text = match charset.as_deref() {
        Some("iso-8859-1" | "latin1" | "latin-1" | "windows-1252" | "cp1252" | "us-ascii") => {
            body.iter().map(|&b| char::from(b)).collect()
        }
        _ => String::from_utf8_lossy(body).into_owned(),
    };
    match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_string(),
        None => text,
    }
}

/// The text cut to `max_chars` characters, or `None` when it is not longer.
pub fn cut(text: &str, max_chars: usize) -> Option<&str> {
    text.char_indices().nth(max_chars).map(|(i, _)| &text[..i])
}

/// Elements whose content is not shown.
const DROPPED: &[&str] = &["script", "style", "head", "noscript", "template", "svg"];

/// Elements that start and end a paragraph: a blank line around them.
const PARAGRAPHS: &[&str] = &[
    "p",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "pre",
    "blockquote",
    "table",
    "ul",
    "ol",
    "dl",
    "figure",
    "hr",
];

/// Elements that start and end a line.
const LINES: &[&str] = &[
    "address",
    "article",
    "aside",
    "caption",
    "dd",
    "details",
    "dialog",
    "div",
    "dt",
    "fieldset",
    "figcaption",
    "footer",
    "form",
    "header",
    "legend",
    "li",
    "main",
    "nav",
    "option",
    "section",
    "summary",
    "tbody",
    "tfoot",
    "thead",
    "title",
    "tr",
];

/// Elements whose boundaries separate words.
const CELLS: &[&str] = &["td", "th"];

/// The text of an HTML document: script, style and head dropped, block
/// elements and `<br>` as line breaks, list items as `- `, tags removed,
/// entities decoded, whitespace collapsed (kept inside `<pre>`).
pub fn html_to_text(html: &str) -> String {
    // ASCII lower-casing keeps every byte offset, so `lower` can be searched
    // and `html` sliced with the same indices.
    let lower = html.to_ascii_lowercase();
    let bytes = html.as_bytes();
    let mut w = Writer::default();
    let mut pre = 0usize;
    let mut pos = 0;
    while pos < html.len() {
        let Some(lt) = html[pos..].find('<') else {
            w.text(&html[pos..], pre > 0);
            break;
        };
        w.text(&html[pos..pos + lt], pre > 0);
        pos += lt;
        let after = &html[pos + 1..];
        if after.starts_with("!--") {
            match html[pos + 4..].find("-->") {
                Some(end) => pos += 4 + end + 3,
                None => break,
            }
            continue;
        }
        let closing = after.starts_with('/');
        let name_start = pos + 1 + usize::from(closing);
        let name_len = html[name_start..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == ':'))
            .unwrap_or(html.len() - name_start);
        let starts_like_tag = bytes.get(name_start).is_some_and(u8::is_ascii_alphabetic);
        if !starts_like_tag {
            if after.starts_with(['!', '?', '/']) {
                // <!DOCTYPE ...>, <?xml ...?>, </ ...>: no text.
                match html[pos..].find('>') {
                    Some(end) => pos += end + 1,
                    None => break,
                }
            } else {
                // A lone `<` in text.
                w.text("<", pre > 0);
                pos += 1;
            }
            continue;
        }
        let name = &lower[name_start..name_start + name_len];
        let Some(end) = tag_end(bytes, name_start + name_len) else {
            break;
        };
        let self_closing = bytes[end - 2] == b'/';
        pos = end;
        if closing {
            if name == "pre" {
                pre = pre.saturating_sub(1);
            }
        } else if DROPPED.contains(&name) {
            if !self_closing {
                pos = skip_element(&lower, pos, name);
            }
            continue;
        } else if name == "pre" {
            pre += 1;
            w.pre_start = true;
        }
        match name {
            "br" => w.line_break(),
            "li" if !closing => {
                w.block(1);
                w.text("- ", true);
            }
            _ if PARAGRAPHS.contains(&name) => w.block(2),
            _ if LINES.contains(&name) => w.block(1),
            _ if CELLS.contains(&name) => w.space(),
            _ => {}
        }
    }
    w.finish()
}

/// The index just after the `>` that ends a tag whose name ends at `i`;
/// a `>` inside a quoted attribute value does not count.
fn tag_end(bytes: &[u8], mut i: usize) -> Option<usize> {
    while i < bytes.len() {
        match bytes[i] {
            b'>' => return Some(i + 1),
            b'=' => {
                i += 1;
                while i < bytes.len() && bytes[i].is_ascii_whitespace() {
                    i += 1;
                }
                if let Some(&quote @ (b'"' | b'\'')) = bytes.get(i) {
                    let close = bytes[i + 1..].iter().position(|&b| b == quote)?;
                    i += close + 2;
                }
            }
            _ => i += 1,
        }
    }
    None
}

/// The index just after the end tag of the element `name` whose start tag
/// ends at `pos` (the end of the text when it is missing). `head` also ends
/// where `<body` starts, since its end tag may be left out.
fn skip_element(lower: &str, pos: usize, name: &str) -> usize {
    let close = format!("</{name}");
    let mut from = pos;
    let mut end = lower.len();
    while let Some(i) = lower[from..].find(&close) {
        let after = from + i + close.len();
        if lower
            .as_bytes()
            .get(after)
            .is_none_or(|b| b.is_ascii_whitespace() || *b == b'>' || *b == b'/')
        {
            end = lower[after..]
                .find('>')
                .map_or(lower.len(), |e| after + e + 1);
            break;
        }
        from = after;
    }
    if name == "head"
        && let Some(body) = lower[pos..end].find("<body")
    {
        return pos + body;
    }
    end
}

/// Collects text, collapsing whitespace and line breaks.
#[derive(Default)]
struct Writer {
    out: String,
    /// A space is due before the next word.
    space: bool,
    /// Line breaks due before the next word (at most 2: one blank line).
    breaks: usize,
    /// Just after `<pre>`, whose first line break is not shown.
    pre_start: bool,
}

impl Writer {
    /// Text between tags; `pre`: keep its spaces and line breaks.
    fn text(&mut self, raw: &str, pre: bool) {
        let decoded = decode_entities(raw);
        for c in decoded.chars() {
            if pre {
                let first = std::mem::take(&mut self.pre_start);
                match c {
                    '\r' => self.pre_start = first,
                    '\n' if first => {}
                    '\n' => {
                        self.flush();
                        self.out.push('\n');
                    }
                    c => {
                        self.flush();
                        self.out.push(c);
                    }
                }
            } else if c.is_whitespace() {
                self.space = true;
            } else {
                self.flush();
                self.out.push(c);
            }
        }
    }

    fn space(&mut self) {
        self.space = true;
    }

    fn block(&mut self, breaks: usize) {
        self.breaks = self.breaks.max(breaks);
    }

    fn line_break(&mut self) {
        self.breaks = (self.breaks + 1).min(2);
    }

    /// Writes the space or line breaks that are due.
    fn flush(&mut self) {
        if self.out.is_empty() {
            // Nothing before the first word.
        } else if self.breaks > 0 {
            let trailing = self.out.len() - self.out.trim_end_matches('\n').len();
            for _ in trailing.min(2)..self.breaks {
                self.out.push('\n');
            }
        } else if self.space && !self.out.ends_with([' ', '\n']) {
            self.out.push(' ');
        }
        self.space = false;
        self.breaks = 0;
    }

    fn finish(self) -> String {
        let mut out: String = self
            .out
            .lines()
            .map(str::trim_end)
            .collect::<Vec<_>>()
            .join("\n");
        out.truncate(out.trim_end().len());
        out
    }
}

/// `&amp;`, `&lt;`, `&gt;`, `&quot;`, `&apos;`, `&nbsp;` (as a space), a few
/// other common named ones, and `&#NNN;` / `&#xHH;` decoded; anything else
/// left as written.
pub fn decode_entities(text: &str) -> Cow<'_, str> {
    if !text.contains('&') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let decoded = rest
            .bytes()
            .take(34)
            .position(|b| b == b';')
            .and_then(|semi| Some((entity(&rest[1..semi])?, semi)));
        if let Some((c, semi)) = decoded {
            out.push(c);
            rest = &rest[semi + 1..];
        } else {
            out.push('&');
            rest = &rest[1..];
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

fn entity(name: &str) -> Option<char> {
    if let Some(number) = name.strip_prefix('#') {
        let code = match number.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => number.parse::<u32>().ok()?,
        };
        return Some(match char::from_u32(code) {
            Some('\0') | None => '\u{fffd}',
            Some(c) => c,
        });
    }
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" | "ensp" | "emsp" | "thinsp" => ' ',
        "shy" => '\u{ad}',
        "ndash" => '–',
        "mdash" => '—',
        "hellip" => '…',
        "lsquo" => '‘',
        "rsquo" => '’',
        "ldquo" => '“',
        "rdquo" => '”',
        "laquo" => '«',
        "raquo" => '»',
        "bull" => '•',
        "middot" => '·',
        "times" => '×',
        "divide" => '÷',
        "minus" => '−',
        "plusmn" => '±',
        "deg" => '°',
        "copy" => '©',
        "reg" => '®',
        "trade" => '™',
        "euro" => '€',
        "pound" => '£',
        "yen" => '¥',
        "cent" => '¢',
        "sect" => '§',
        "para" => '¶',
        "larr" => '←',
        "rarr" => '→',
        "uarr" => '↑',
        "darr" => '↓',
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_content_types() {
        let html = Some("text/html; charset=utf-8");
        assert_eq!(classify(html, b""), Ok(Kind::Html));
        assert_eq!(classify(Some("application/xhtml+xml"), b""), Ok(Kind::Html));
        assert_eq!(classify(Some("text/plain"), b""), Ok(Kind::Text));
        assert_eq!(classify(Some("Text/Markdown"), b""), Ok(Kind::Text));
        assert_eq!(classify(Some("application/json"), b""), Ok(Kind::Text));
        assert_eq!(
            classify(Some("application/problem+json"), b""),
            Ok(Kind::Text)
        );
        let e = classify(Some("image/png"), b"\x89PNG").unwrap_err();
        assert!(e.contains("image/png"), "{e}");
        let e = classify(Some("application/pdf; x=y"), b"%PDF").unwrap_err();
        assert!(e.contains("application/pdf"), "{e}");
        assert_eq!(classify(None, b"  <!DOCTYPE html><p>x"), Ok(Kind::Html));
        assert_eq!(classify(Some(""), b"<html><p>x"), Ok(Kind::Html));
        assert_eq!(classify(None, b"just words"), Ok(Kind::Text));
        assert!(classify(None, b"\x00\x01\x02").is_err());
    }

    #[test]
    fn decodes_charsets() {
        assert_eq!(decode(Some("text/plain"), "é".as_bytes()), "é");
        assert_eq!(
            decode(Some("text/plain; charset=ISO-8859-1"), b"caf\xe9"),
            "café"
        );
        assert_eq!(
            decode(Some("text/html; charset=\"windows-1252\""), b"\xe9"),
            "é"
        );
        assert_eq!(decode(None, b"\xef\xbb\xbfhi"), "hi");
        assert_eq!(decode(None, b"a\xffb"), "a\u{fffd}b");
    }

    #[test]
    fn cuts_on_character_boundaries() {
        assert_eq!(cut("héllo", 2), Some("hé"));
        assert_eq!(cut("héllo", 5), None);
        assert_eq!(cut("héllo", 9), None);
        assert_eq!(cut("日本語", 1), Some("日"));
        assert_eq!(cut("", 0), None);
    }

    #[test]
    fn decodes_entities() {
        assert_eq!(
            decode_entities("&amp; &lt; &gt; &quot; &#39; a&nbsp;b"),
            "& < > \" ' a b"
        );
        assert_eq!(decode_entities("&#233;&#xE9;&#XE9;&#x1F600;"), "ééé😀");
        assert_eq!(decode_entities("&mdash;&hellip;&copy;"), "—…©");
        assert_eq!(
            decode_entities("AT&T &unknown; & &; &#xZZ; &#0; &#x110000;"),
            "AT&T &unknown; & &; &#xZZ; \u{fffd} \u{fffd}"
        );
        assert_eq!(decode_entities("no entities"), "no entities");
        assert!(matches!(decode_entities("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn reduces_a_page_to_its_text() {
        let html = r#"<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Rust</title>
  <style>body { color: red; }</style>
  <script>var x = "<p>not shown</p>";</script>
</head>
<body>
  <header><nav><a href="/">Home</a> | <a href="/about">About</a></nav></header>
  <h1>Rust  (programming
     language)</h1>
  <p>Rust is a <b>general-purpose</b> language.<br>It was   designed
  for <i>performance</i> &amp; safety.</p>
  <script type="text/javascript">
    document.write("</div>");
  </script>
  <ul><li>Fast</li><li>Reliable</li></ul>
  <table><tr><th>Year</th><th>Event</th></tr><tr><td>2015</td><td>1.0</td></tr></table>
  <p>Line one<br/><br/>Line three</p>
  <!-- a comment <p>hidden</p> -->
  <footer>&copy; 2024</footer>
</body>
</html>"#;
        assert_eq!(
            html_to_text(html),
            "Home | About\n\n\
             Rust (programming language)\n\n\
             Rust is a general-purpose language.\n\
             It was designed for performance & safety.\n\n\
             - Fast\n\
             - Reliable\n\n\
             Year Event\n\
             2015 1.0\n\n\
             Line one\n\n\
             Line three\n\n\
             © 2024"
        );
    }

    #[test]
    fn keeps_preformatted_text() {
        let html =
            "<p>Code:</p><pre>\nfn main() {\n    println!(\"&lt;hi&gt;\");\n}\n</pre><p>After</p>";
        assert_eq!(
            html_to_text(html),
            "Code:\n\nfn main() {\n    println!(\"<hi>\");\n}\n\nAfter"
        );
    }

    #[test]
    fn copes_with_odd_markup() {
        // A `>` inside a quoted attribute does not end the tag.
        assert_eq!(
            html_to_text(r#"<a title="a > b" href='x>y'>link</a>"#),
            "link"
        );
        // A lone `<` is text.
        assert_eq!(html_to_text("1 < 2 and 3 <= 4"), "1 < 2 and 3 <= 4");
        // Upper-case tags; a <header> is not a <head>.
        assert_eq!(
            html_to_text("<HEADER>Top</HEADER><P>Body</P>"),
            "Top\n\nBody"
        );
        assert_eq!(html_to_text("<SCRIPT>x()</SCRIPT>shown"), "shown");
        // A </script inside a longer name does not end the script.
        assert_eq!(html_to_text("<script>a</scripts>b</script>c"), "c");
        // An unclosed script hides the rest; an unclosed tag ends the text.
        assert_eq!(html_to_text("a<script>b"), "a");
        assert_eq!(html_to_text("a<p class=\"x"), "a");
        // A head whose end tag is left out ends at <body>.
        assert_eq!(html_to_text("<head><title>T</title><body>Text"), "Text");
        // Self-closing dropped elements drop nothing after them.
        assert_eq!(html_to_text("<svg/>after"), "after");
        // Processing instructions, doctype, bogus end tags.
        assert_eq!(
            html_to_text("<?xml version=\"1.0\"?><!DOCTYPE x></ >text"),
            "text"
        );
        // An unclosed comment hides the rest.
        assert_eq!(html_to_text("a<!-- b"), "a");
        assert_eq!(html_to_text(""), "");
        assert_eq!(html_to_text("  \n  "), "");
        assert_eq!(
            html_to_text("<div><div><div>deep</div></div></div>"),
            "deep"
        );
        assert_eq!(
            html_to_text("non&nbsp;breaking&nbsp;&nbsp;space"),
            "non breaking space"
        );
        assert_eq!(html_to_text("日本<b>語</b>"), "日本語");
    }
}
