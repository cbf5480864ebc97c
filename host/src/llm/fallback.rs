//! The fallback chain: the candidates a turn may use, in order of preference.
//!
//! A retryable failure (see [`LlmError::is_retryable`]) is tried again on the
//! same candidate after an exponential backoff (less a random part of it,
//! [`RetryPolicy::jitter`], so clients that failed together do not all
//! come back at the same moment), or after the server's
//! `retry-after` when that is longer, up to [`RetryPolicy::attempts`] times;
//! then the candidate cools down and the next one is tried. A `retry-after`
//! longer than the longest backoff moves on to the next candidate when there
//! is one, and is waited for (up to [`RetryPolicy::max_retry_after`]) when
//! there is not; one longer than that ends the candidate's tries at once,
//! naming the wait the server asked for. Cooling candidates go to the back of the order until
//! their cooldown ends, so a dead provider costs one round of retries, not
//! one per turn. A final error (400, 401, a missing key) ends the call at
//! once: another candidate would not fix the request.
//!
//! A failed call is a [`ChainError`]: the reason a turn gives, and the
//! failure that ended the call, whose class ([`LlmError::class`]) the turn
//! reports as its `error_kind`. When every candidate failed, that is the
//! last candidate's last failure.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::types::{ChatRequest, ChatResponse};
use super::{LlmError, Provider};
use crate::plugin::units::duration;
use crate::protocol::TurnErrorKind;

/// How hard to try.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Tries per candidate, the first included.
    pub attempts: u32,
    /// The wait before the first retry; doubled for each next one.
    pub base_delay: Duration,
    pub max_delay: Duration,
    /// How long a candidate that used up its attempts is tried last.
    pub cooldown: Duration,
    /// The longest `retry-after` that is waited for; a longer one ends the
    /// candidate's tries.
    pub max_retry_after: Duration,
    /// Up to this fraction (0 to 1) of each backoff is taken off at random:
    /// 0.2 waits 80% to 100% of it; 0 waits exactly the backoff. A wait the
    /// server asked for (`retry-after`) is never shortened.
    pub jitter: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
            cooldown: Duration::from_secs(60),
            max_retry_after: DEFAULT_MAX_RETRY_AFTER,
            jitter: DEFAULT_JITTER,
        }
    }
}

/// The longest `retry-after` waited for by default.
pub const DEFAULT_MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// The part of each backoff taken off at random by default.
pub const DEFAULT_JITTER: f64 = 0.2;

/// What to do after a retryable failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// Try the same candidate again after this wait.
    Wait(Duration),
    /// Stop trying this candidate.
    MoveOn,
    /// Stop trying this candidate: the server asked for this long a wait,
    /// longer than the policy allows.
    TooLong(Duration),
}

/// What the chain reports while it works.
#[derive(Debug)]
pub enum Progress<'a> {
    /// Streamed reply text.
    Delta(&'a str),
    /// A failed attempt that will be followed by another.
    Retry(Retry),
}

#[derive(Debug, Clone)]
pub struct Retry {
    pub model: String,
    /// 1 for the first retry of `model`.
    pub attempt: u32,
    pub error: String,
    pub next_model: String,
    pub delay: Duration,
    /// Text streamed by the failed attempt is void.
    pub discard_partial: bool,
}

/// Why a call through the chain failed.
///
/// `Display` is the reason a turn gives: the final error alone when one
/// ended the call at once; else, for a single candidate, its last failure
/// with how often it was tried (or the wait the server asked for); for
/// several, `every model candidate failed: ` and each of them.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ChainError {
    /// The failure that ended the call: a final error, or, when every
    /// candidate used up its tries, the last candidate's last failure.
    pub last: LlmError,
    /// The candidates that used up their tries before the call ended, in
    /// the order tried.
    pub tried: Vec<Tried>,
    message: String,
}

/// A candidate that used up its tries.
#[derive(Debug, Clone)]
pub struct Tried {
    /// Its last failure.
    pub error: LlmError,
    pub attempts: u32,
    /// The server asked to wait this long, longer than the policy allows.
    pub asked_to_wait: Option<Duration>,
}

impl ChainError {
    /// The class of the failure that ended the call ([`ChainError::last`]):
    /// when every candidate failed, the last one's, since that is the one
    /// the turn gave up on.
    pub fn class(&self) -> TurnErrorKind {
        self.last.class()
    }
}

/// A reply and who gave it.
#[derive(Debug)]
pub struct Answered {
    pub model: String,
    pub response: ChatResponse,
}

struct Candidate {
    provider: Provider,
    cooling_until: Mutex<Option<Instant>>,
}

impl Candidate {
    fn is_cooling(&self, now: Instant) -> bool {
        self.cooling_until.lock().unwrap().is_some_and(|t| t > now)
    }
}

pub struct Chain {
    candidates: Vec<Candidate>,
    policy: RetryPolicy,
}

impl Chain {
    pub fn new(providers: Vec<Provider>, policy: RetryPolicy) -> Chain {
        assert!(!providers.is_empty(), "a chain needs a candidate");
        Chain {
            candidates: providers
                .into_iter()
                .map(|provider| Candidate {
                    provider,
                    cooling_until: Mutex::new(None),
                })
                .collect(),
            policy,
        }
    }

    /// The candidate a call would try first, with `model` in place of its
    /// own when given.
    pub fn first_model(&self, model: Option<&str>) -> String {
        with_model(self.order()[0].provider.name(), model)
    }

    /// Every candidate, in configured order.
    pub fn models(&self) -> Vec<&str> {
        self.candidates.iter().map(|c| c.provider.name()).collect()
    }

    /// Candidates in the order to try them: those not cooling down first.
    fn order(&self) -> Vec<&Candidate> {
        let now = Instant::now();
        let (ready, cooling): (Vec<&Candidate>, Vec<&Candidate>) =
            self.candidates.iter().partition(|c| !c.is_cooling(now));
        ready.into_iter().chain(cooling).collect()
    }

    /// Asks the candidates in turn until one answers.
    pub async fn chat(
        &self,
        request: &ChatRequest,
        progress: &mut (dyn FnMut(Progress<'_>) + Send),
    ) -> Result<Answered, ChainError> {
        let order = self.order();
        let mut failures = Vec::new();
        let mut tried = Vec::new();
        for (index, candidate) in order.iter().enumerate() {
            let name = with_model(candidate.provider.name(), request.model.as_deref());
            let name = name.as_str();
            let mut attempt = 1;
            let last_error = loop {
                let mut streamed = false;
                let result = candidate
                    .provider
                    .chat(request, &mut |text| {
                        if !text.is_empty() {
                            streamed = true;
                            progress(Progress::Delta(text))
                        }
                    })
                    .await
                    .map_err(|mut error| {
                        // The model asked for, not the candidate's own.
                        error.candidate = name.to_string();
                        error
                    });
                let error = match result {
                    Ok(response) => {
                        *candidate.cooling_until.lock().unwrap() = None;
                        return Ok(Answered {
                            model: name.to_string(),
                            response,
                        });
                    }
                    Err(error) if !error.is_retryable() => {
                        return Err(ChainError {
                            message: error.to_string(),
                            last: error,
                            tried,
                        });
                    }
                    Err(error) => error,
                };
                let step = self.backoff(attempt, &error, index + 1 < order.len());
                let next = match step {
                    Next::Wait(delay) => Some((name.to_string(), delay)),
                    Next::MoveOn | Next::TooLong(_) => order.get(index + 1).map(|c| {
                        let next = with_model(c.provider.name(), request.model.as_deref());
                        (next, Duration::ZERO)
                    }),
                };
                if let Some((next_model, delay)) = next {
                    progress(Progress::Retry(Retry {
                        model: name.to_string(),
                        attempt,
                        error: error.to_string(),
                        next_model,
                        delay,
                        discard_partial: streamed,
                    }));
                }
                match step {
                    Next::Wait(delay) => {
                        tokio::time::sleep(delay).await;
                        attempt += 1;
                    }
                    Next::MoveOn => break (error, None),
                    Next::TooLong(wait) => break (error, Some(wait)),
                }
            };
            let (last_error, too_long) = last_error;
            if index + 1 < order.len() {
                tracing::warn!(
                    model = name,
                    "model candidate failed {attempt} times; cooling down: {last_error}"
                );
            } else {
                // The last candidate: its failure is the chain's, which the
                // caller reports (a turn's end); a warning would say it twice.
                tracing::info!(
                    model = name,
                    "model candidate failed {attempt} times; cooling down: {last_error}"
                );
            }
            if request.model.is_none() {
                // Another model of the same provider (a SubTurn's) failing
                // says little about the candidate's own.
                *candidate.cooling_until.lock().unwrap() =
                    Some(Instant::now() + self.policy.cooldown);
            }
            failures.push(match too_long {
                Some(wait) => format!(
                    "{last_error} (the server asked to wait {}, longer than the longest wait allowed, {} (--max-retry-wait))",
                    duration(wait),
                    duration(self.policy.max_retry_after)
                ),
                None => format!("{last_error} (after {attempt} attempts)"),
            });
            tried.push(Tried {
                error: last_error,
                attempts: attempt,
                asked_to_wait: too_long,
            });
        }
        let message = match failures.as_slice() {
            [only] => only.clone(),
            all => format!("every model candidate failed: {}", all.join("; ")),
        };
        let last = tried.last().expect("a chain has a candidate").error.clone();
        Err(ChainError {
            last,
            tried,
            message,
        })
    }

    /// What to do after `attempt` failed with `error`.
    fn backoff(&self, attempt: u32, error: &LlmError, has_next: bool) -> Next {
        if attempt >= self.policy.attempts {
            return Next::MoveOn;
        }
        let exponential = self
            .policy
            .base_delay
            .saturating_mul(1 << (attempt - 1).min(16))
            .min(self.policy.max_delay);
        let exponential = jittered(exponential, self.policy.jitter);
        match error.retry_after {
            // The server wants more time than we would wait: try elsewhere,
            // or, with nowhere else to go, wait as asked up to the limit.
            Some(wait) if wait > self.policy.max_delay && has_next => Next::MoveOn,
            Some(wait) if wait > self.policy.max_retry_after => Next::TooLong(wait),
            Some(wait) => Next::Wait(wait.max(exponential)),
            None => Next::Wait(exponential),
        }
    }
}

/// `wait` less a random part of up to `jitter` of it.
fn jittered(wait: Duration, jitter: f64) -> Duration {
    if jitter.is_nan() || jitter <= 0.0 {
        return wait;
    }
    // 53 random bits: a uniform number in [0, 1). Without randomness from
    // the system, the full wait.
    let unit = getrandom::u64().map_or(0.0, |bits| (bits >> 11) as f64 / (1u64 << 53) as f64);
    wait.mul_f64(1.0 - jitter.min(1.0) * unit)
}

/// `provider:model` for a candidate named `provider:own-model` asked to use
/// `model` instead.
fn with_model(candidate: &str, model: Option<&str>) -> String {
    match (model, candidate.split_once(':')) {
        (Some(model), Some((provider, _))) => format!("{provider}:{model}"),
        _ => candidate.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{LlmErrorKind, ProviderConfig};

    fn chain(jitter: f64) -> Chain {
        let config = ProviderConfig::parse("openai:m", |_| None).unwrap();
        let provider = Provider::new(config, crate::llm::http_client()).unwrap();
        let policy = RetryPolicy {
            base_delay: Duration::from_millis(1000),
            max_delay: Duration::from_millis(8000),
            attempts: 10,
            jitter,
            ..RetryPolicy::default()
        };
        Chain::new(vec![provider], policy)
    }

    fn wait(chain: &Chain, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let mut error = LlmError::new("openai:m", LlmErrorKind::Overloaded, "busy");
        error.retry_after = retry_after;
        match chain.backoff(attempt, &error, false) {
            Next::Wait(wait) => wait,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn jitter_takes_a_random_part_off_the_backoff_and_none_off_a_servers_wait() {
        let exact = chain(0.0);
        assert_eq!(wait(&exact, 1, None), Duration::from_millis(1000));
        assert_eq!(wait(&exact, 3, None), Duration::from_millis(4000));

        let jittery = chain(0.5);
        let waits: Vec<Duration> = (0..200).map(|_| wait(&jittery, 2, None)).collect();
        assert!(
            waits
                .iter()
                .all(|w| (Duration::from_millis(1000)..=Duration::from_millis(2000)).contains(w)),
            "{waits:?}"
        );
        let distinct: std::collections::BTreeSet<_> = waits.iter().collect();
        assert!(distinct.len() > 100, "{} distinct waits", distinct.len());
        // Past the cap, the cap is jittered too: never longer than it.
        assert!((0..50).all(|_| wait(&jittery, 9, None) <= Duration::from_millis(8000)));
        // A server's `retry-after` longer than the backoff is waited in full.
        let asked = Duration::from_millis(5000);
        assert!((0..50).all(|_| wait(&jittery, 1, Some(asked)) == asked));
    }
}
