//! Whether a scrape may read the metrics, as controller-runtime's secure metrics decide it: the bearer
//! token authenticated by a TokenReview, the user it names authorised by a SubjectAccessReview for `get`
//! on the non-resource path `/metrics`, both asked of one context's API server; the verdict kept a short
//! while ([`ReviewCache`]); new tokens reviewed within a budget ([`ReviewBudget`]). With audiences, the
//! TokenReview asks for them and a token valid for none of them is not authenticated.
//!
//! Neither review is a typed k8s-openapi field access: the fields' optionality differs between the
//! Kubernetes versions an application may choose, so both travel as JSON.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::TokenReview;
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use kube::api::{Api, PostParams};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::Semaphore;

use super::review_budget::ReviewBudget;
use super::review_cache::{MAX_VERDICTS, ReviewCache, VERDICT_TTL, digest};
use crate::core::{LogThrottle, chain};

/// The path and verb a scraper must be allowed, as for controller-runtime's metrics.
pub(super) const METRICS_PATH: &str = "/metrics";
const METRICS_VERB: &str = "get";
/// How long the two reviews of one scrape may take together, waiting for a turn included.
pub(super) const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
/// The most reviews under way at once: many new tokens at once wait instead of flooding the API server.
const REVIEWS_AT_ONCE: usize = 8;
/// How often the same failure to review is logged again.
const LOG_AGAIN_AFTER: Duration = Duration::from_secs(60);

/// What a scrape's credentials allow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum ScrapeAccess {
    /// A token not reviewed lately, past the budget of new tokens' reviews: not reviewed, try again later.
    Throttled,
    /// The user may read the metrics.
    Allowed,
    /// The token authenticates `user`, who may not read them.
    Forbidden { user: String },
    /// No token, or one the API server does not accept.
    Unauthenticated,
}

/// Reviews scrapes against one context's API server.
pub(super) struct ScrapeReview {
    client: kube::Client,
    context: String,
    /// The audiences a token must be valid for (one of them); none: the API server's own.
    audiences: Vec<String>,
    verdicts: Mutex<ReviewCache<ScrapeAccess>>,
    /// Reviews of tokens without a kept verdict: a client trying token after token is held to it.
    budget: Mutex<ReviewBudget>,
    turns: Semaphore,
    /// Which failures are worth a `warn` line.
    logged: Mutex<LogThrottle>,
}

impl ScrapeReview {
    /// Reviews with `client`, of `context`, for `audiences` (empty: the API server's own).
    pub(super) fn new(client: kube::Client, context: &str, audiences: Vec<String>) -> Self {
        Self {
            client,
            context: context.to_owned(),
            audiences,
            verdicts: Mutex::new(ReviewCache::new(VERDICT_TTL, MAX_VERDICTS)),
            budget: Mutex::new(ReviewBudget::new()),
            turns: Semaphore::new(REVIEWS_AT_ONCE),
            logged: Mutex::new(LogThrottle::new(LOG_AGAIN_AFTER)),
        }
    }

    /// The verdict on the value of an `Authorization` header (`None`: there was none); an error when the
    /// API server could not tell, in words that never contain the token.
    pub(super) async fn review(
        &self,
        authorization: Option<&[u8]>,
    ) -> Result<ScrapeAccess, String> {
        let Some(token) = authorization.and_then(bearer_token) else {
            return Ok(ScrapeAccess::Unauthenticated);
        };
        let key = digest(token);
        if let Some(verdict) = self.verdicts.lock().get(&key) {
            return Ok(verdict);
        }
        if !self.budget.lock().take() {
            return Ok(ScrapeAccess::Throttled);
        }
        let reviewed = tokio::time::timeout(REVIEW_TIMEOUT, async {
            let _turn = self.turns.acquire().await.expect("never closed");
            self.ask(token).await
        });
        let verdict = match reviewed.await {
            Ok(Ok(verdict)) => verdict,
            Ok(Err(problem)) => return Err(self.failed(problem)),
            Err(_) => return Err(self.failed(format!("no answer within {REVIEW_TIMEOUT:?}"))),
        };
        self.verdicts.lock().put(key, verdict.clone());
        Ok(verdict)
    }

    /// A TokenReview, then, for an authenticated user, a SubjectAccessReview.
    async fn ask(&self, token: &str) -> Result<ScrapeAccess, String> {
        let mut review = json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": { "token": token },
        });
        if !self.audiences.is_empty() {
            review["spec"]["audiences"] = json!(self.audiences);
        }
        let review: TokenReview =
            serde_json::from_value(review).expect("a well-formed TokenReview");
        let api: Api<TokenReview> = Api::all(self.client.clone());
        // kube's errors carry the server's message, which never repeats the request's token.
        let answered = api.create(&PostParams::default(), &review).await;
        let answered = answered.map_err(|e| format!("TokenReview: {}", chain(&e)))?;
        let status: TokenStatus = status_of(&answered)?;
        // Asked for audiences, the answer names those the token is valid for: none of ours, not ours.
        let audience_ok = self.audiences.is_empty()
            || (status.audiences.iter().flatten()).any(|a| self.audiences.contains(a));
        let user = match (status.authenticated && audience_ok, status.user) {
            (true, Some(user)) => user,
            _ => return Ok(ScrapeAccess::Unauthenticated),
        };
        let review = json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user.username,
                "uid": user.uid,
                "groups": user.groups,
                "extra": user.extra,
                "nonResourceAttributes": { "path": METRICS_PATH, "verb": METRICS_VERB },
            },
        });
        let review: SubjectAccessReview =
            serde_json::from_value(review).expect("a well-formed SubjectAccessReview");
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answered = api.create(&PostParams::default(), &review).await;
        let answered = answered.map_err(|e| format!("SubjectAccessReview: {}", chain(&e)))?;
        let access: AccessStatus = status_of(&answered)?;
        Ok(if access.allowed {
            ScrapeAccess::Allowed
        } else {
            let user = user.username.unwrap_or_default();
            ScrapeAccess::Forbidden { user }
        })
    }

    /// `problem` as the answer says it, logged when it changes and then once a minute.
    fn failed(&self, problem: String) -> String {
        let warn = self.logged.lock().warn(&problem);
        if warn {
            tracing::warn!(cluster = %self.context, %problem, "secure metrics: a scrape could not be reviewed");
        }
        format!("context {}: {problem}", self.context)
    }
}

/// The token of `Authorization: Bearer <token>` (the scheme in any case), if that is what it says.
fn bearer_token(value: &[u8]) -> Option<&str> {
    let value = std::str::from_utf8(value).ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The `status` of a review as answered.
fn status_of<S: for<'de> Deserialize<'de>>(answered: &impl Serialize) -> Result<S, String> {
    let answered = serde_json::to_value(answered).map_err(|e| e.to_string())?;
    let status = answered.get("status").cloned().unwrap_or_else(|| json!({}));
    serde_json::from_value(status).map_err(|e| format!("an unexpected review status: {e}"))
}

/// What a TokenReview answers.
#[derive(Deserialize)]
struct TokenStatus {
    #[serde(default)]
    authenticated: bool,
    user: Option<UserInfo>,
    audiences: Option<Vec<String>>,
}

/// The user a token authenticates, as the SubjectAccessReview asks about it.
#[derive(Deserialize)]
struct UserInfo {
    username: Option<String>,
    uid: Option<String>,
    groups: Option<Vec<String>>,
    extra: Option<BTreeMap<String, Vec<String>>>,
}

/// What a SubjectAccessReview answers.
#[derive(Deserialize)]
struct AccessStatus {
    #[serde(default)]
    allowed: bool,
}

#[cfg(test)]
mod tests;
