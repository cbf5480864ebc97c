//! What every table of a grants file shares (and the configuration file's
//! defaults for them): how a number is checked against its bounds, the largest memory limit any of them may ask for,
//! and how a time limit is written back (in milliseconds, as it was given).

use std::time::Duration;

/// The largest memory limit a grant may ask for. The pooling allocator reserves
/// address space for this much per instance slot.
pub const MAX_MEMORY_MIB: u64 = 1024;

/// A value out of its bounds: the field (`limits.memory_mib`) and what was
/// expected. The configuration file puts it at the field's line; a grants
/// file's error names the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl From<FieldError> for String {
    fn from(e: FieldError) -> String {
        e.to_string()
    }
}

/// `value` if it is within `min..=max`; otherwise an error naming `field`.
pub fn check(field: &str, value: u64, min: u64, max: u64) -> Result<u64, FieldError> {
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(FieldError {
            field: field.to_string(),
            message: format!("expected {min} to {max}, found {value}"),
        })
    }
}

/// Serializes a duration as whole milliseconds (the `timeout_ms` fields).
pub fn as_millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}
