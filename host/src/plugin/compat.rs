//! The released versions of `wasmclaw:plugin` that are older than the
//! newest, one module each, in the newest version's terms: their imports
//! answered by the newest implementation, their types converted to the
//! newest (and, where the host passes or answers one, back down).
//!
//! - [`v0_1`]: 0.1.0, frozen in `wit/0.1.0/plugin.wit`.
//!
//! The rest of the host knows only the newest types; [`super::exports`]
//! is where a call picks the version's bindings.

pub mod v0_1;
