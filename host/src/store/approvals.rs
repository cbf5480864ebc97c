//! Approval decisions kept beyond one tool call: `session` ones (owner: the
//! session key) for the rest of that session, `always` ones (owner: the
//! agent's name) until revoked. One row per (scope, owner, tool); a later
//! decision replaces an earlier one.

use anyhow::{Context, Result};
use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use super::Store;
use crate::protocol::{ApprovalDecision, ApprovalScope};

/// A kept decision, as `wasmclaw approvals list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeptApproval {
    pub scope: ApprovalScope,
    /// The session key (`session`) or the agent's name (`always`).
    pub owner: String,
    pub tool: String,
    pub decision: ApprovalDecision,
    /// RFC 3339.
    pub decided_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

fn scope_str(scope: ApprovalScope) -> Result<&'static str> {
    match scope {
        ApprovalScope::Session => Ok("session"),
        ApprovalScope::Always => Ok("always"),
        ApprovalScope::Once => anyhow::bail!("a decision for one call is not kept"),
    }
}

fn decision_of(text: &str) -> ApprovalDecision {
    match text {
        "allow" => ApprovalDecision::Allow,
        _ => ApprovalDecision::Deny,
    }
}

impl Store {
    /// Keeps `decision` on `tool` for `owner` (a session key for `session`,
    /// an agent's name for `always`).
    pub async fn keep_approval(
        &self,
        scope: ApprovalScope,
        owner: &str,
        tool: &str,
        decision: ApprovalDecision,
        note: Option<&str>,
    ) -> Result<()> {
        let scope = scope_str(scope)?;
        let (owner, tool, note) = (owner.to_string(), tool.to_string(), note.map(String::from));
        let what = format!("keeping the {scope} decision on tool {tool} for {owner}");
        let now = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
        self.with_conn(move |conn| {
            conn.prepare_cached(
                "INSERT INTO approvals (scope, owner, tool, decision, decided_at, note)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (scope, owner, tool) DO UPDATE SET
                     decision = excluded.decision,
                     decided_at = excluded.decided_at,
                     note = excluded.note",
            )?
            .execute(params![scope, owner, tool, decision.as_str(), now, note])?;
            Ok(())
        })
        .await
        .context(what)
    }

    /// The decision kept for a call of `tool` in `session` of `agent`: the
    /// session's own first, then the agent's.
    pub async fn kept_approval(
        &self,
        session: &str,
        agent: &str,
        tool: &str,
    ) -> Result<Option<(ApprovalScope, ApprovalDecision)>> {
        let (session, agent, tool) = (session.to_string(), agent.to_string(), tool.to_string());
        self.with_conn(move |conn| {
            let mut query = conn.prepare_cached(
                "SELECT scope, decision FROM approvals
                 WHERE tool = ?3 AND ((scope = 'session' AND owner = ?1)
                                   OR (scope = 'always' AND owner = ?2))
                 ORDER BY scope DESC LIMIT 1",
            )?;
            let row = query
                .query_row(params![session, agent, tool], |row| {
                    Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
                })
                .optional()?;
            Ok(row.map(|(scope, decision)| {
                let scope = match scope.as_str() {
                    "session" => ApprovalScope::Session,
                    _ => ApprovalScope::Always,
                };
                (scope, decision_of(&decision))
            }))
        })
        .await
        .context("reading the kept approval decisions")
    }

    /// Every kept decision of `scope` (both scopes when None), by owner and
    /// tool.
    pub async fn kept_approvals(&self, scope: Option<ApprovalScope>) -> Result<Vec<KeptApproval>> {
        let scope = scope.map(scope_str).transpose()?;
        self.with_conn(move |conn| {
            let mut query = conn.prepare_cached(
                "SELECT scope, owner, tool, decision, decided_at, note FROM approvals
                 WHERE ?1 IS NULL OR scope = ?1 ORDER BY scope, owner, tool",
            )?;
            let rows = query.query_map([scope], |row| {
                let scope = match row.get::<_, String>(0)?.as_str() {
                    "session" => ApprovalScope::Session,
                    _ => ApprovalScope::Always,
                };
                Ok(KeptApproval {
                    scope,
                    owner: row.get(1)?,
                    tool: row.get(2)?,
                    decision: decision_of(&row.get::<_, String>(3)?),
                    decided_at: row.get(4)?,
                    note: row.get(5)?,
                })
            })?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .await
        .context("listing the kept approval decisions")
    }

    /// Forgets the kept decisions of `owner` (for `tool`, or every tool when
    /// None); how many there were.
    pub async fn revoke_approvals(
        &self,
        scope: ApprovalScope,
        owner: &str,
        tool: Option<&str>,
    ) -> Result<usize> {
        let scope = scope_str(scope)?;
        let (owner, tool) = (owner.to_string(), tool.map(String::from));
        self.with_conn(move |conn| {
            let n = conn
                .prepare_cached(
                    "DELETE FROM approvals
                     WHERE scope = ?1 AND owner = ?2 AND (?3 IS NULL OR tool = ?3)",
                )?
                .execute(params![scope, owner, tool])?;
            Ok(n)
        })
        .await
        .context("revoking kept approval decisions")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn kept_decisions_are_found_listed_replaced_and_revoked() {
        let store = Store::open_in_memory().unwrap();
        let (allow, deny) = (ApprovalDecision::Allow, ApprovalDecision::Deny);
        let (session, always) = (ApprovalScope::Session, ApprovalScope::Always);
        assert_eq!(
            store.kept_approval("s", "coder", "write").await.unwrap(),
            None
        );
        store
            .keep_approval(always, "coder", "write", allow, Some("ok"))
            .await
            .unwrap();
        assert_eq!(
            store.kept_approval("s", "coder", "write").await.unwrap(),
            Some((always, allow))
        );
        // Another agent's decision is not this one's.
        assert_eq!(
            store.kept_approval("s", "other", "write").await.unwrap(),
            None
        );
        // The session's own decision comes before the agent's.
        store
            .keep_approval(session, "s", "write", deny, None)
            .await
            .unwrap();
        assert_eq!(
            store.kept_approval("s", "coder", "write").await.unwrap(),
            Some((session, deny))
        );
        assert_eq!(
            store.kept_approval("t", "coder", "write").await.unwrap(),
            Some((always, allow))
        );
        store
            .keep_approval(always, "coder", "write", deny, None)
            .await
            .unwrap();
        let listed = store.kept_approvals(Some(always)).await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(
            (listed[0].decision, listed[0].note.as_deref()),
            (deny, None)
        );
        assert_eq!(store.kept_approvals(None).await.unwrap().len(), 2);
        assert_eq!(
            store
                .revoke_approvals(always, "coder", Some("read"))
                .await
                .unwrap(),
            0
        );
        assert_eq!(
            store.revoke_approvals(always, "coder", None).await.unwrap(),
            1
        );
        assert_eq!(store.kept_approvals(Some(always)).await.unwrap(), []);
        let once = store
            .keep_approval(ApprovalScope::Once, "s", "x", allow, None)
            .await;
        assert!(once.unwrap_err().to_string().contains("is not kept"));
    }
}
