//! The `[hooks]` table of a plugin's grants file: how its hooks run.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::fields::{FieldError, MAX_MEMORY_MIB, as_millis, check};
use crate::plugin::subscriptions::HookPoint;

/// `[hooks]` exactly as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookSettingsToml {
    pub priority: Option<i32>,
    pub timeout_ms: Option<u64>,
    pub memory_mib: Option<u64>,
    pub fail: Option<FailMode>,
    pub queue: Option<u64>,
}

/// What happens when a hook fails (traps, runs out of time or memory,
/// returns something unusable).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailMode {
    /// What the hook guards does not go on: the tool call is denied, its
    /// result is withheld, or the turn ends with an error.
    Closed,
    /// The hook is passed over, as if it had said `proceed`.
    Open,
}

/// How the hooks of one plugin run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HookSettings {
    /// Overrides the priority of every subscription of the plugin.
    pub priority: Option<i32>,
    /// Wall-clock time for one hook call.
    #[serde(rename = "timeout_ms", serialize_with = "as_millis")]
    pub timeout: Duration,
    /// Linear memory of one hook call's instance.
    pub memory_bytes: u64,
    /// As the operator set it. Unset, `before-*` hooks fail closed and
    /// `after-*` hooks open; `on-event` hooks always fail in isolation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fail: Option<FailMode>,
    /// Events an `on-event` hook may have waiting; more are dropped and
    /// counted.
    pub queue: usize,
}

impl Default for HookSettings {
    fn default() -> Self {
        HookSettings {
            priority: None,
            timeout: Duration::from_millis(50),
            memory_bytes: 16 << 20,
            fail: None,
            queue: 256,
        }
    }
}

impl HookSettings {
    /// How a failure at `point` is handled.
    pub fn fail_mode(&self, point: HookPoint) -> FailMode {
        match (point, self.fail) {
            (HookPoint::OnEvent, _) => FailMode::Open,
            (_, Some(mode)) => mode,
            (point, None) if point.is_before() => FailMode::Closed,
            (_, None) => FailMode::Open,
        }
    }

    /// `t` over `defaults` (the configuration's `[hooks]`, or the built-in
    /// ones): what `t` sets wins.
    pub fn resolve(
        t: &HookSettingsToml,
        defaults: &HookSettings,
    ) -> Result<HookSettings, FieldError> {
        let check =
            |field: &str, value, min, max| check(&format!("hooks.{field}"), value, min, max);
        let d = defaults;
        Ok(HookSettings {
            priority: t.priority.or(d.priority),
            timeout: match t.timeout_ms {
                Some(v) => Duration::from_millis(check("timeout_ms", v, 1, 60_000)?),
                None => d.timeout,
            },
            memory_bytes: match t.memory_mib {
                Some(v) => check("memory_mib", v, 1, MAX_MEMORY_MIB)? << 20,
                None => d.memory_bytes,
            },
            fail: t.fail.or(d.fail),
            queue: match t.queue {
                Some(v) => check("queue", v, 1, 1 << 20)? as usize,
                None => d.queue,
            },
        })
    }
}
