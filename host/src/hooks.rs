//! Hooks: plugin code that runs at fixed points of every turn and may change
//! what happens there.
//!
//! - [`HookSet`]: the hooks of one plugin set, by point, in the order they
//!   run (priority, then plugin name).
//! - [`chain`]: running the hooks of one point in turn, and what their
//!   decisions and failures do.
//! - [`llm_json`]: a model request and response as hooks see them.
//! - [`observers`]: `on-event` hooks, each behind a bounded queue of its own.
//!
//! Every hook call runs in a fresh instance of its plugin, like a tool call,
//! with the hook budget of the plugin's grants (`[hooks]`).

pub mod chain;
pub mod llm_json;
pub mod observers;

use std::sync::Arc;

use crate::plugin::catalog::{Catalog, PluginStatus};
use crate::plugin::loader::Plugin;
use crate::plugin::{HookPoint, Subscription};

pub use chain::{HookScope, HookStop, ToolGate};
pub use observers::{ObserverStats, Observers};

/// One plugin's subscription to one point.
#[derive(Clone)]
pub struct Hooked {
    pub plugin: Arc<Plugin>,
    pub subscription: Subscription,
}

impl Hooked {
    pub fn name(&self) -> &str {
        &self.plugin.name
    }
}

/// The hooks of one plugin set, by point, each list in running order.
#[derive(Default)]
pub struct HookSet {
    before_llm: Vec<Hooked>,
    after_llm: Vec<Hooked>,
    before_tool: Vec<Hooked>,
    after_tool: Vec<Hooked>,
}

impl HookSet {
    pub fn build(catalog: &Catalog) -> HookSet {
        let mut set = HookSet::default();
        for status in &catalog.plugins {
            let PluginStatus::Loaded(plugin) = status else {
                continue;
            };
            for subscription in &plugin.subscriptions {
                let list = match subscription.point {
                    HookPoint::BeforeLlm => &mut set.before_llm,
                    HookPoint::AfterLlm => &mut set.after_llm,
                    HookPoint::BeforeTool => &mut set.before_tool,
                    HookPoint::AfterTool => &mut set.after_tool,
                    HookPoint::OnEvent => continue,
                };
                list.push(Hooked {
                    plugin: plugin.clone(),
                    subscription: subscription.clone(),
                });
            }
        }
        for list in [
            &mut set.before_llm,
            &mut set.after_llm,
            &mut set.before_tool,
            &mut set.after_tool,
        ] {
            list.sort_by(|a, b| {
                (a.subscription.priority, a.name()).cmp(&(b.subscription.priority, b.name()))
            });
        }
        set
    }

    /// The hooks at `point` (none for `on-event`: see [`Observers`]).
    pub fn at(&self, point: HookPoint) -> &[Hooked] {
        match point {
            HookPoint::BeforeLlm => &self.before_llm,
            HookPoint::AfterLlm => &self.after_llm,
            HookPoint::BeforeTool => &self.before_tool,
            HookPoint::AfterTool => &self.after_tool,
            HookPoint::OnEvent => &[],
        }
    }
}
