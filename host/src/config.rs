//! The configuration (being built up: the file's loader comes with the
//! next change).

mod settings;

pub use settings::*;

pub mod sources {
    /// Where each value came from.
    #[derive(Debug, Clone, Default)]
    pub struct Sources;
}
