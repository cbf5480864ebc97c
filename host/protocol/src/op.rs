//! What a front end asks of the core, and what it is told.

use serde::{Deserialize, Serialize};

use crate::message::Message;
use crate::values::{ApprovalDecision, ApprovalScope};

/// A request to the core.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Op {
    /// A user message for a session: starts a turn when the session is idle;
    /// otherwise steers its running turn or waits as a follow-up turn, by the
    /// session's [`Policy`].
    UserMessage {
        session: String,
        content: String,
        /// The agent the message is for: a session that has none chosen
        /// runs it from now on; one that runs another agent refuses the
        /// message. None: the session's agent (the host's default agent
        /// until one is chosen).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
    },
    /// A message for the turn running on a session, taken in before its next
    /// model call whatever the session's policy; starts a turn when none runs.
    Steer { session: String, content: String },
    /// Stops a turn, named by its session or its id.
    Interrupt { target: Target, mode: InterruptMode },
    /// What a session does with a message that arrives while its turn runs.
    SetPolicy { session: String, policy: Policy },
    /// The named agent the session's next turns run as (its prompt, model
    /// chain and tools). Refused for an agent the configuration does not
    /// have.
    SetAgent { session: String, agent: String },
    /// The model chain of the session's next turns (`PROVIDER:MODEL`,
    /// comma-separated for a fallback chain), in place of its agent's; None
    /// returns to the agent's. Refused for a spec the configuration cannot
    /// build.
    SetModel {
        session: String,
        model: Option<String>,
    },
    /// Decides the tool call `call_id` of `session` that waits for
    /// approval (`approval_requested`): once, for the rest of the session,
    /// or always for the session's agent. A call is decided once; a
    /// decision for a call that does not wait (decided, timed out, another
    /// session's) is refused.
    Approve {
        session: String,
        call_id: String,
        /// The turn that asked; needed only when two turns of the session
        /// (a turn and its SubTurns) wait with the same call id.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn_id: Option<String>,
        decision: ApprovalDecision,
        #[serde(default)]
        scope: ApprovalScope,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    /// Earlier conversation for a new session: `messages` become its
    /// history, recorded as one turn (reason `imported`) that runs nothing
    /// and publishes no events. Refused for a session that already has
    /// history or recorded turns, or has a turn running or waiting.
    ImportHistory {
        session: String,
        messages: Vec<Message>,
    },
    /// Summarizes the older part of an idle session's history now, as a
    /// turn does when its context fills up (the messages stay in the
    /// store). Refused while the session has a turn running or waiting,
    /// and when there is nothing old enough to summarize.
    Compact { session: String },
}

/// What a session does with a user message that arrives while its turn runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// Inject it into the running turn before its next model call.
    #[default]
    Steer,
    /// Queue it as a turn of its own, run after the current one.
    FollowUp,
}

/// What the core did with an accepted [`Op`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Accepted {
    /// A turn started (or waits for a free slot) for the message.
    Started {
        turn_id: String,
    },
    /// The message will be injected into the running turn.
    Steered {
        turn_id: String,
    },
    /// The message waits as a follow-up turn, which will have this id; 1
    /// is next.
    Queued {
        turn_id: String,
        position: usize,
    },
    /// The turn was told to stop. `discarded`: the messages that went with
    /// it (a hard interrupt drops its pending steering and the session's
    /// queued follow-ups). For a SubTurn (named by its id) `turn_id` is the
    /// SubTurn's and `discarded` is empty: it takes no steering, and the
    /// session's follow-ups stay queued.
    Interrupted {
        turn_id: String,
        discarded: Vec<String>,
    },
    PolicySet,
    /// The session's agent or model was set for its next turns.
    SessionSet,
    /// The waiting call was decided; its turn goes on.
    Decided {
        call_id: String,
    },
    /// The history was imported, recorded as the turn `turn_id` (which ran
    /// nothing: no `turn_end` is published for it).
    Imported {
        turn_id: String,
        messages: usize,
    },
    /// The session's history was compacted: `summarized` messages are now
    /// one summary, `kept` follow it verbatim.
    Compacted {
        summarized: usize,
        kept: usize,
        tokens_before: u64,
        tokens_after: u64,
    },
}

/// Why an [`Op`] was refused. Nothing else changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "error", content = "message", rename_all = "snake_case")]
pub enum Refused {
    /// The interrupt's target has no running turn.
    NoActiveTurn(String),
    /// The session's steering or follow-up queue is at its limit.
    QueueFull(String),
    /// The op itself is malformed (an empty session key).
    Invalid(String),
    /// The host is shutting down.
    Closed(String),
    /// The host could not do it (its session store failed); nothing was
    /// changed.
    Failed(String),
    /// The approval names a tool call that does not wait for one (decided
    /// already, timed out, stopped, or another session's).
    NotWaiting(String),
}

/// Which turn a control operation is for: never "the active turn".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    Session(String),
    Turn(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InterruptMode {
    /// Finish running tools, then one last answer without tools.
    Graceful,
    /// Cancel at once; the turn leaves no history.
    Hard,
}

impl Refused {
    /// The message, which names what was refused and why.
    pub fn message(&self) -> &str {
        match self {
            Refused::NoActiveTurn(m)
            | Refused::QueueFull(m)
            | Refused::Invalid(m)
            | Refused::Closed(m)
            | Refused::Failed(m)
            | Refused::NotWaiting(m) => m,
        }
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for Refused {}
