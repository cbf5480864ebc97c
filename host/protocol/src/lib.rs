//! The wire types: Ops in, Events out.
//!
//! Every front end (the CLI, the HTTP API, the OpenAI-compatible endpoint,
//! tests) talks to the core only by submitting [`Op`]s and reading
//! [`Event`]s. This crate depends on serde and nothing else, so the JSON
//! shape is reviewed in one place and nothing of the host can leak into it:
//! conversions to and from the WIT types and the providers' types live
//! beside those types, in the host.
//!
//! - [`op`]: what a front end asks ([`Op`]) and what it is told ([`Accepted`],
//!   [`Refused`]).
//! - [`event`]: what happened ([`Event`], one struct per [`EventKind`]).
//! - [`values`]: the values both carry: statuses, usage, error classes, hook
//!   points, SubTurn requests.
//! - [`message`]: a conversation's messages, as a session's history keeps
//!   them and [`Op::ImportHistory`] brings them in.
//!
//! An event serializes as one flat JSON object:
//!
//! ```json
//! {"seq":7,"time":"2026-11-30T18:00:00.123Z","session":"s1","turn_id":"t-…",
//!  "parent_turn_id":null,"type":"tool_call_end","call_id":"c1","tool":"calculate",
//!  "ok":true,"output":"42","duration_ms":0.41}
//! ```

pub mod event;
pub mod message;
pub mod op;
pub mod values;

pub use event::*;
pub use message::*;
pub use op::*;
pub use values::*;
