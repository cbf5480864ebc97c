//! Request bodies written straight to bytes, with the parts that stay the
//! same from call to call serialized once.
//!
//! A turn sends the same system prompt and the same tool list with every
//! model call (the tool list is one shared `Arc` until the plugins change);
//! with 50 tools and a long prompt they are most of a request. Each
//! provider keeps their serialized form in a [`Fragments`], keyed on what
//! the request is built from: the tool list by the identity of its `Arc`
//! (held weakly, so a freed list's address is never taken for a new one's),
//! the system prompt by its text. Whatever builds the request (the agent's
//! own settings, a profile, a hook's rewrite) gets the cache's help as long
//! as it passes the same list and text again, and a right body anyway.
//!
//! [`ObjectWriter`] writes the body's fields, the cached ones as they are.

use std::sync::{Arc, Mutex, Weak};

use serde::Serialize;

use super::types::ToolDef;

/// Tool lists and system prompts each [`Fragments`] keeps (a few agents'
/// or SubTurns' lists may alternate).
const KEPT: usize = 8;

/// What a fragment is kept by, and the fragment, most recently used first.
type Kept<K> = Mutex<Vec<(K, Arc<str>)>>;

/// Serialized parts of one provider's requests.
#[derive(Default)]
pub struct Fragments {
    tools: Kept<Weak<Vec<ToolDef>>>,
    prompts: Kept<String>,
}

impl std::fmt::Debug for Fragments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fragments").finish_non_exhaustive()
    }
}

/// Finds `key` among `kept` (most recent first), else builds its fragment
/// and keeps it first, dropping the oldest past [`KEPT`].
fn lookup<K>(
    kept: &Kept<K>,
    matches: impl Fn(&K) -> bool,
    make: impl FnOnce() -> (K, String),
) -> Arc<str> {
    let mut kept = kept.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(at) = kept.iter().position(|(k, _)| matches(k)) {
        let entry = kept.remove(at);
        let json = entry.1.clone();
        kept.insert(0, entry);
        return json;
    }
    let (key, json) = make();
    let json: Arc<str> = json.into();
    kept.insert(0, (key, json.clone()));
    kept.truncate(KEPT);
    json
}

impl Fragments {
    /// The JSON of `tools` as `write` writes it, serialized once per list.
    pub fn tools(
        &self,
        tools: &Arc<Vec<ToolDef>>,
        write: impl FnOnce(&[ToolDef]) -> String,
    ) -> Arc<str> {
        let weak = Arc::downgrade(tools);
        lookup(
            &self.tools,
            |kept| Weak::ptr_eq(kept, &weak),
            || (weak.clone(), write(tools)),
        )
    }

    /// The JSON array of `tools`, each as `wire` shapes it (serialized once
    /// per list); none for no tools.
    pub fn tool_list<'a, T: Serialize + 'a>(
        &self,
        tools: &'a Arc<Vec<ToolDef>>,
        wire: impl Fn(&'a ToolDef) -> T,
    ) -> Option<Arc<str>> {
        let write = |_: &[ToolDef]| to_json(&tools.iter().map(&wire).collect::<Vec<_>>());
        (!tools.is_empty()).then(|| self.tools(tools, write))
    }

    /// The JSON of the system prompt `prompt` as `write` writes it,
    /// serialized once per text.
    pub fn prompt(&self, prompt: &str, write: impl FnOnce(&str) -> String) -> Arc<str> {
        lookup(
            &self.prompts,
            |kept| kept == prompt,
            || (prompt.to_string(), write(prompt)),
        )
    }
}

/// A body for `messages` with the serialized `system` prompt and `tools`
/// (those that stay the same from call to call), sized for them.
pub fn object_for(system: Option<&str>, tools: Option<&str>, messages: usize) -> ObjectWriter {
    let cached = system.map_or(0, str::len) + tools.map_or(0, str::len);
    ObjectWriter::with_capacity(cached + 256 * messages + 256)
}

/// The JSON of `value`.
pub fn to_json(value: &impl Serialize) -> String {
    serde_json::to_string(value).expect("request parts serialize")
}

/// A JSON object written field by field.
pub struct ObjectWriter {
    out: Vec<u8>,
    empty: bool,
}

impl ObjectWriter {
    pub fn with_capacity(bytes: usize) -> ObjectWriter {
        let mut out = Vec::with_capacity(bytes);
        out.push(b'{');
        ObjectWriter { out, empty: true }
    }

    fn key(&mut self, key: &str) {
        if !self.empty {
            self.out.push(b',');
        }
        self.empty = false;
        serde_json::to_writer(&mut self.out, key).expect("a key serializes");
        self.out.push(b':');
    }

    /// `"key": value`.
    pub fn field(&mut self, key: &str, value: &impl Serialize) {
        self.key(key);
        serde_json::to_writer(&mut self.out, value).expect("request parts serialize");
    }

    /// `"key": json`, `json` already serialized.
    pub fn raw(&mut self, key: &str, json: &str) {
        self.key(key);
        self.out.extend_from_slice(json.as_bytes());
    }

    /// `"key": [first, items...]`, `first` (if any) already serialized.
    pub fn array<T: Serialize>(
        &mut self,
        key: &str,
        first: Option<&str>,
        items: impl IntoIterator<Item = T>,
    ) {
        self.key(key);
        self.out.push(b'[');
        let mut empty = true;
        if let Some(first) = first {
            self.out.extend_from_slice(first.as_bytes());
            empty = false;
        }
        for item in items {
            if !empty {
                self.out.push(b',');
            }
            empty = false;
            serde_json::to_writer(&mut self.out, &item).expect("request parts serialize");
        }
        self.out.push(b']');
    }

    /// `"key": [first, rest]`, `first` (if any) already serialized and
    /// `rest` (if any) writing the other items, comma-separated.
    pub fn array_with(
        &mut self,
        key: &str,
        first: Option<&str>,
        rest: Option<impl FnOnce(&mut Vec<u8>)>,
    ) {
        self.key(key);
        self.out.push(b'[');
        if let Some(first) = first {
            self.out.extend_from_slice(first.as_bytes());
        }
        if let Some(rest) = rest {
            if first.is_some() {
                self.out.push(b',');
            }
            rest(&mut self.out);
        }
        self.out.push(b']');
    }

    pub fn finish(mut self) -> Vec<u8> {
        self.out.push(b'}');
        self.out
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use serde_json::json;

    use super::*;

    fn tool(name: &str) -> ToolDef {
        ToolDef {
            name: name.into(),
            description: String::new(),
            parameters: json!({"type": "object"}),
        }
    }

    #[test]
    fn a_tool_list_is_serialized_once_per_list_and_a_prompt_once_per_text() {
        let fragments = Fragments::default();
        let built = Cell::new(0);
        let write = |tools: &[ToolDef]| {
            built.set(built.get() + 1);
            to_json(&tools.iter().map(|t| &t.name).collect::<Vec<_>>())
        };
        let list = Arc::new(vec![tool("a"), tool("b")]);
        assert_eq!(&*fragments.tools(&list, write), r#"["a","b"]"#);
        assert_eq!(&*fragments.tools(&list.clone(), write), r#"["a","b"]"#);
        assert_eq!(built.get(), 1);
        // Keyed by the list, not by what it holds: another list is its own.
        let same_content = Arc::new(vec![tool("a"), tool("b")]);
        fragments.tools(&same_content, write);
        assert_eq!(built.get(), 2);

        let prompts = Cell::new(0);
        let quote = |p: &str| {
            prompts.set(prompts.get() + 1);
            to_json(&p)
        };
        assert_eq!(&*fragments.prompt("be brief", quote), r#""be brief""#);
        let same_text = String::from("be brief");
        assert_eq!(&*fragments.prompt(&same_text, quote), r#""be brief""#);
        assert_eq!(prompts.get(), 1);
        // A few are kept; past that the least recently used goes.
        for i in 0..KEPT {
            fragments.prompt(&format!("prompt {i}"), quote);
        }
        assert_eq!(prompts.get(), 1 + KEPT);
        fragments.prompt("be brief", quote);
        assert_eq!(prompts.get(), 2 + KEPT);
    }

    #[test]
    fn a_freed_list_is_never_taken_for_a_new_one() {
        let fragments = Fragments::default();
        let names = |tools: &[ToolDef]| to_json(&tools.iter().map(|t| &t.name).collect::<Vec<_>>());
        for i in 0..100 {
            // Each list is freed before the next is made, which the
            // allocator may put at the same address.
            let list = Arc::new(vec![tool(&format!("t{i}"))]);
            assert_eq!(&*fragments.tools(&list, names), format!(r#"["t{i}"]"#));
        }
    }

    #[test]
    fn an_object_is_written_field_by_field() {
        let mut object = ObjectWriter::with_capacity(16);
        object.field("a", &1);
        object.raw("b", r#"{"c":true}"#);
        object.array("d", Some(r#""first""#), [2, 3]);
        object.array("e", None, Vec::<u8>::new());
        let written: serde_json::Value = serde_json::from_slice(&object.finish()).unwrap();
        assert_eq!(
            written,
            json!({"a": 1, "b": {"c": true}, "d": ["first", 2, 3], "e": []})
        );
    }
}
