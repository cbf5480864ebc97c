//! The operator's policy: what each plugin may reach and how it is bounded,
//! read from the grants file beside it (`NAME.toml`) and checked at load.
//!
//! Plain data and the rules that check it: nothing here runs a guest, so
//! nothing here depends on the sandbox or on the host implementations; both
//! of those read what is resolved here.
//!
//! - [`grants`]: the `NAME.toml` sidecar as a whole: directories,
//!   environment, limits, `[config]`, and the tables below.
//! - [`fields`]: what every table shares: bounds checks, the largest memory
//!   limit, time limits written back in milliseconds.
//! - [`hook_settings`]: the `[hooks]` table: a hook plugin's budget and fail
//!   modes.
//! - [`network`]: the `[network]` table and `[[credentials]]`: the origins a
//!   plugin may reach over `wasi:http`, and which addresses count as internal.
//! - [`secrets`]: the operator's secrets, which credentials name.
//! - [`protected`]: the host's own paths, which no directory grant reaches.
//! - [`env_grant`]: the environment variables a grant may pass through.

pub mod env_grant;
pub mod fields;
pub mod grants;
pub mod hook_settings;
pub mod network;
pub mod protected;
pub mod secrets;
