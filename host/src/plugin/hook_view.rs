//! What a hook is shown: its input, cut to what its memory budget can hold.
//!
//! A hook's instance holds its input several times over while it works (the
//! copy the host passes in, the document it parses, the answer it builds), so
//! a hook is shown at most one [`INPUT_SHARE`]th of its memory budget
//! (`hooks.memory_mib`; 1 MiB of the default 16 MiB). A conversation grows
//! without bound, so without this one long tool result would make a
//! `before-llm` hook fail on every later request of its session.
//!
//! When the input is larger, the longest texts in it (the JSON strings:
//! message contents, tool results, argument values) are cut, longest first,
//! to one common length, each followed by a marker saying how many bytes
//! were cut; everything else (the shape of the document, the short texts) is
//! shown as it is. A cut text that the hook gives back unchanged, marker
//! included, is put back whole, so a hook that adds a message to a long
//! conversation, or rewrites one argument, does not lose what it was not
//! shown. Each cut text is put back once at most (a copy of it is left as
//! the hook wrote it), and the texts put back take at most the bytes of the
//! input, so a hook that repeats a short cut text does not make the host
//! build its whole text over and over.
//!
//! At the tool points, a hook that fails closed guards what it is shown: it
//! is shown the whole call or it is not called (its failure then denies the
//! call or withholds the result), never a cut view that would let through
//! what it did not see.

use std::collections::HashMap;

use serde_json::Value;

/// A hook is shown at most `memory budget / INPUT_SHARE` bytes of input.
pub const INPUT_SHARE: u64 = 16;

/// Room kept for each cut text's marker (the longest marker is shorter).
const MARKER_ROOM: usize = 96;

/// The most bytes of input a hook with `memory_bytes` of memory is shown.
pub fn input_bound(memory_bytes: u64) -> usize {
    usize::try_from(memory_bytes / INPUT_SHARE).unwrap_or(usize::MAX)
}

/// The input does not fit even with every long text cut: its shape alone
/// (keys, numbers, short texts) is too large.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge {
    /// The input as it is.
    pub size: usize,
    /// The smallest view of it.
    pub smallest: usize,
}

/// The texts one view cut: the text as shown, and the whole text.
#[derive(Debug, Default, Clone)]
pub struct Cuts {
    whole: HashMap<String, String>,
    /// The most bytes of whole texts an answer may have put back: the size
    /// of the input they were cut from.
    room: usize,
}

/// An answer that would have more bytes of cut texts put back than its
/// input had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestoreTooLarge {
    /// The bytes the input had.
    pub room: usize,
}

impl Cuts {
    pub fn is_empty(&self) -> bool {
        self.whole.is_empty()
    }

    /// The whole text `shown` is the cut of, taken: it is put back once.
    fn take(
        &mut self,
        shown: &str,
        restored: &mut usize,
    ) -> Result<Option<String>, RestoreTooLarge> {
        let Some(whole) = self.whole.remove(shown) else {
            return Ok(None);
        };
        *restored += whole.len();
        if *restored > self.room {
            return Err(RestoreTooLarge { room: self.room });
        }
        Ok(Some(whole))
    }

    /// `text`, or the whole text it is the cut of.
    pub fn restore_text(&mut self, text: String) -> Result<String, RestoreTooLarge> {
        Ok(self.take(&text, &mut 0)?.unwrap_or(text))
    }

    /// `json` with the strings that are cut texts of this view put back
    /// whole, each the first time it appears; text that is not JSON is left
    /// as it is.
    pub fn restore_json(&mut self, json: String) -> Result<String, RestoreTooLarge> {
        if self.is_empty() {
            return Ok(json);
        }
        let Ok(mut doc) = serde_json::from_str::<Value>(&json) else {
            return self.restore_text(json);
        };
        let mut restored = 0;
        for s in strings(&mut doc) {
            if let Some(whole) = self.take(s.as_str(), &mut restored)? {
                *s = whole;
            }
            if self.is_empty() {
                break;
            }
        }
        Ok(if restored > 0 { doc.to_string() } else { json })
    }

    /// Cuts the longest strings of `parts` until, serialized, they take at
    /// most `bound` bytes together.
    pub fn fit(&mut self, parts: &mut [&mut Value], bound: usize) -> Result<(), TooLarge> {
        let shape: usize = parts.iter().map(|p| shape_len(p)).sum();
        let mut texts: Vec<&mut String> = Vec::new();
        for part in parts.iter_mut() {
            texts.extend(strings(part));
        }
        let lens: Vec<usize> = texts.iter().map(|s| escaped_len(s)).collect();
        let size = shape + lens.iter().sum::<usize>();
        if size <= bound {
            return Ok(());
        }
        self.room = self.room.saturating_add(size);
        // Each text takes min(len, cap + MARKER_ROOM) at a cap: find the
        // largest cap that fits.
        let taken = |cap: usize| -> usize {
            lens.iter()
                .map(|&len| len.min(cap + MARKER_ROOM))
                .sum::<usize>()
        };
        let room = bound.checked_sub(shape).filter(|&room| taken(0) <= room);
        let Some(room) = room else {
            return Err(TooLarge {
                size,
                smallest: shape + taken(0),
            });
        };
        let (mut lo, mut hi) = (0, lens.iter().copied().max().unwrap_or(0));
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if taken(mid) <= room {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        let cap = lo;
        for (text, len) in texts.into_iter().zip(lens) {
            if len <= cap + MARKER_ROOM {
                continue;
            }
            let keep = prefix_within(text, cap);
            let marker = format!(
                " [... {} bytes cut by the host to fit this hook's memory budget; cut {}]",
                text.len() - keep,
                self.whole.len() + 1
            );
            debug_assert!(marker.len() <= MARKER_ROOM);
            let mut shown = String::with_capacity(keep + marker.len());
            shown.push_str(&text[..keep]);
            shown.push_str(&marker);
            let whole = std::mem::replace(text, shown.clone());
            self.whole.insert(shown, whole);
        }
        Ok(())
    }
}

/// Every string value in `value` (object keys are not values).
fn strings(value: &mut Value) -> Vec<&mut String> {
    fn walk<'a>(value: &'a mut Value, out: &mut Vec<&'a mut String>) {
        match value {
            Value::String(s) => out.push(s),
            Value::Array(items) => items.iter_mut().for_each(|v| walk(v, out)),
            Value::Object(map) => map.values_mut().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(value, &mut out);
    out
}

/// Bytes of `value` as compact JSON.
#[cfg(test)]
fn json_len(value: &Value) -> usize {
    shape_len(value) + {
        let mut value = value.clone();
        strings(&mut value)
            .iter()
            .map(|s| escaped_len(s))
            .sum::<usize>()
    }
}

/// Bytes of `value` as compact JSON, but for what is inside its string
/// values (their quotes are counted).
fn shape_len(value: &Value) -> usize {
    match value {
        Value::String(_) => 2,
        Value::Array(items) => {
            2 + items.len().saturating_sub(1) + items.iter().map(shape_len).sum::<usize>()
        }
        Value::Object(map) => {
            2 + map.len().saturating_sub(1)
                + map
                    .iter()
                    .map(|(k, v)| escaped_len(k) + 3 + shape_len(v))
                    .sum::<usize>()
        }
        other => other.to_string().len(),
    }
}

/// The bytes a byte of a string takes inside a JSON string, less one.
const ESCAPE_EXTRA: [u8; 256] = {
    let mut extra = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        extra[b] = 5; // \u00XX
        b += 1;
    }
    extra[b'\n' as usize] = 1;
    extra[b'\r' as usize] = 1;
    extra[b'\t' as usize] = 1;
    extra[0x08] = 1;
    extra[0x0c] = 1;
    extra[b'"' as usize] = 1;
    extra[b'\\' as usize] = 1;
    extra
};

/// Bytes of `s` inside a JSON string, without the quotes.
fn escaped_len(s: &str) -> usize {
    s.len()
        + s.bytes()
            .map(|b| usize::from(ESCAPE_EXTRA[usize::from(b)]))
            .sum::<usize>()
}

/// The length of the longest prefix of `s`, on a character boundary, that
/// takes at most `room` bytes inside a JSON string.
fn prefix_within(s: &str, room: usize) -> usize {
    let mut taken = 0;
    for (i, b) in s.bytes().enumerate() {
        taken += 1 + usize::from(ESCAPE_EXTRA[usize::from(b)]);
        if taken > room {
            return s.floor_char_boundary(i);
        }
    }
    s.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_lengths_match_serde() {
        let doc = json!({"a": [1, "x\"y\n\u{1}é", null, {"k\"": true}], "b": 2.5, "": []});
        assert_eq!(json_len(&doc), doc.to_string().len());
    }

    #[test]
    fn small_inputs_are_shown_as_they_are() {
        let mut doc = json!({"messages": [{"role": "user", "content": "hi"}]});
        let before = doc.clone();
        let mut cuts = Cuts::default();
        cuts.fit(&mut [&mut doc], 1000).unwrap();
        assert_eq!(doc, before);
        assert!(cuts.is_empty());
    }

    #[test]
    fn the_longest_texts_are_cut_to_fit_and_come_back_whole() {
        let big = "a".repeat(100_000);
        let bigger = "b".repeat(300_000);
        let mut doc = json!({"messages": [
            {"role": "system", "content": "be brief"},
            {"role": "tool", "content": big},
            {"role": "tool", "content": bigger},
        ]});
        let original = doc.clone();
        let mut cuts = Cuts::default();
        cuts.fit(&mut [&mut doc], 10_000).unwrap();
        let shown = doc.to_string();
        assert!(shown.len() <= 10_000, "{}", shown.len());
        // Short texts and the shape are kept; both long texts are cut to
        // the same length, each with its marker.
        assert_eq!(doc["messages"][0], original["messages"][0]);
        let a = doc["messages"][1]["content"].as_str().unwrap();
        let b = doc["messages"][2]["content"].as_str().unwrap();
        let kept = a.find(" [...").unwrap();
        assert_eq!(b.find(" [...").unwrap(), kept);
        assert!(kept > 4_000, "{kept}");
        assert_eq!(
            &a[kept..],
            format!(
                " [... {} bytes cut by the host to fit this hook's memory budget; cut 1]",
                100_000 - kept
            )
        );
        assert!(b.ends_with(&format!(
            " [... {} bytes cut by the host to fit this hook's memory budget; cut 2]",
            300_000 - kept
        )));

        // A hook that adds a message and gives the rest back unchanged.
        let mut answer = doc.clone();
        answer["messages"]
            .as_array_mut()
            .unwrap()
            .insert(0, json!({"role": "system", "content": "today"}));
        let restored = cuts.clone().restore_json(answer.to_string()).unwrap();
        let restored: Value = serde_json::from_str(&restored).unwrap();
        assert_eq!(restored["messages"][0]["content"], "today");
        assert_eq!(
            restored["messages"].as_array().unwrap()[1..],
            original["messages"].as_array().unwrap()[..]
        );
        // A text the hook changed is its own.
        let mut edited = doc.clone();
        edited["messages"][1]["content"] = json!("short now");
        let restored = cuts.clone().restore_json(edited.to_string()).unwrap();
        let restored: Value = serde_json::from_str(&restored).unwrap();
        assert_eq!(restored["messages"][1]["content"], "short now");
        assert_eq!(restored["messages"][2], original["messages"][2]);
        assert_eq!(
            cuts.restore_text(b.to_string()).unwrap(),
            original["messages"][2]["content"]
        );
    }

    #[test]
    fn a_cut_text_given_back_many_times_is_put_back_once() {
        let big = "a".repeat(100_000);
        let mut doc = json!({"messages": [{"role": "tool", "content": big}]});
        let mut cuts = Cuts::default();
        cuts.fit(&mut [&mut doc], 1_000).unwrap();
        let shown = doc["messages"][0]["content"].as_str().unwrap().to_string();
        assert!(shown.len() < 1_000, "{}", shown.len());
        // A hook that repeats the short cut text a thousand times.
        let answer = json!({"messages": vec![json!({"role": "tool", "content": shown}); 1000]});
        let restored = cuts.clone().restore_json(answer.to_string()).unwrap();
        let restored: Value = serde_json::from_str(&restored).unwrap();
        let contents: Vec<&str> = (restored["messages"].as_array().unwrap().iter())
            .map(|m| m["content"].as_str().unwrap())
            .collect();
        assert_eq!(contents.len(), 1000);
        assert_eq!(contents[0], big);
        assert!(contents[1..].iter().all(|c| *c == shown));
        // A text given back as the answer's whole text, twice over.
        let mut once = cuts.clone();
        assert_eq!(once.restore_text(shown.clone()).unwrap(), big);
        assert_eq!(once.restore_text(shown.clone()).unwrap(), shown);
    }

    #[test]
    fn texts_put_back_take_at_most_the_bytes_of_the_input() {
        let mut doc = json!(["a".repeat(10_000), "b".repeat(10_000)]);
        let size = doc.to_string().len();
        let mut cuts = Cuts::default();
        cuts.fit(&mut [&mut doc], 1_000).unwrap();
        assert_eq!(cuts.room, size);
        // Both texts back fit the input they came from.
        let whole = cuts.clone().restore_json(doc.to_string()).unwrap();
        assert_eq!(whole.len(), size);
        // An answer past that room is refused, not built.
        cuts.room = 15_000;
        assert_eq!(
            cuts.clone().restore_json(doc.to_string()),
            Err(RestoreTooLarge { room: 15_000 })
        );
        assert_eq!(
            cuts.restore_text(doc[0].as_str().unwrap().to_string())
                .unwrap(),
            "a".repeat(10_000)
        );
    }

    #[test]
    fn cuts_fall_on_character_boundaries_and_count_escapes() {
        let mut doc = json!(["é\n".repeat(10_000)]);
        let mut cuts = Cuts::default();
        cuts.fit(&mut [&mut doc], 1_000).unwrap();
        assert!(doc.to_string().len() <= 1_000, "{}", doc.to_string().len());
    }

    #[test]
    fn a_shape_too_large_is_refused_with_its_sizes() {
        let mut doc = json!((0..1000).collect::<Vec<_>>());
        let size = doc.to_string().len();
        let err = Cuts::default().fit(&mut [&mut doc], 100).unwrap_err();
        assert_eq!(
            err,
            TooLarge {
                size,
                smallest: size
            }
        );
    }
}
