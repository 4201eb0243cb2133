use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};

use serde_json::{Value, json};
use tokio::time::Instant;

use super::*;
use crate::testing::fake_api;

const TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.a-scrapers-token";
const PROMETHEUS: &str = "system:serviceaccount:monitoring:prometheus";

/// A TokenReview's answer: `authenticated` as Prometheus's ServiceAccount.
fn token_review(authenticated: bool) -> (u16, Value) {
    let user = json!({ "username": PROMETHEUS, "uid": "u-1", "groups": ["system:serviceaccounts"],
                       "extra": { "authentication.kubernetes.io/pod-name": ["prometheus-0"] } });
    let status = match authenticated {
        true => json!({ "authenticated": true, "user": user }),
        false => json!({ "authenticated": false, "error": "invalid bearer token" }),
    };
    let review = json!({ "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                         "spec": {}, "status": status });
    (201, review)
}

fn access_review(allowed: bool) -> (u16, Value) {
    let review = json!({ "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                         "spec": {}, "status": { "allowed": allowed } });
    (201, review)
}

/// A review against an API server that authenticates `TOKEN` only, and allows the scrape as `allowed`.
fn reviewing(allowed: bool) -> (ScrapeReview, fake_api::Requests) {
    let (client, requests) = fake_api::client(move |method, uri, body| {
        assert_eq!(method, "POST");
        if uri.starts_with("/apis/authentication.k8s.io/v1/tokenreviews") {
            let asked: Value = serde_json::from_str(body).unwrap();
            token_review(asked["spec"]["token"] == TOKEN)
        } else if uri.starts_with("/apis/authorization.k8s.io/v1/subjectaccessreviews") {
            access_review(allowed)
        } else {
            fake_api::status(404, "NotFound", "no such path")
        }
    });
    (ScrapeReview::new(client, "control", Vec::new()), requests)
}

fn bearer(token: &str) -> Vec<u8> {
    format!("Bearer {token}").into_bytes()
}

#[tokio::test(start_paused = true)]
async fn an_allowed_user_is_reviewed_once_per_ttl() {
    let (review, requests) = reviewing(true);
    assert_eq!(
        review.review(Some(&bearer(TOKEN))).await,
        Ok(ScrapeAccess::Allowed)
    );
    let seen = requests.all();
    assert_eq!(seen.len(), 2, "{:?}", requests.lines());
    let access: Value = serde_json::from_str(&seen[1].body).unwrap();
    assert_eq!(
        access["spec"],
        json!({
            "user": PROMETHEUS, "uid": "u-1", "groups": ["system:serviceaccounts"],
            "extra": { "authentication.kubernetes.io/pod-name": ["prometheus-0"] },
            "nonResourceAttributes": { "path": "/metrics", "verb": "get" },
        })
    );
    // Scraped again within the TTL: the verdict kept, no request.
    tokio::time::advance(VERDICT_TTL - Duration::from_secs(1)).await;
    assert_eq!(
        review.review(Some(&bearer(TOKEN))).await,
        Ok(ScrapeAccess::Allowed)
    );
    assert_eq!(requests.all().len(), 2);
    // After it, reviewed again.
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(
        review.review(Some(&bearer(TOKEN))).await,
        Ok(ScrapeAccess::Allowed)
    );
    assert_eq!(requests.all().len(), 4);
}

#[tokio::test(start_paused = true)]
async fn a_user_without_the_rbac_is_forbidden_and_that_is_kept_too() {
    let (review, requests) = reviewing(false);
    let forbidden = ScrapeAccess::Forbidden {
        user: PROMETHEUS.into(),
    };
    assert_eq!(
        review.review(Some(&bearer(TOKEN))).await,
        Ok(forbidden.clone())
    );
    assert_eq!(review.review(Some(&bearer(TOKEN))).await, Ok(forbidden));
    assert_eq!(requests.all().len(), 2, "{:?}", requests.lines());
}

#[tokio::test(start_paused = true)]
async fn no_token_or_one_the_server_rejects_is_unauthenticated() {
    let (review, requests) = reviewing(true);
    assert_eq!(review.review(None).await, Ok(ScrapeAccess::Unauthenticated));
    assert_eq!(
        review.review(Some(b"Basic YTpi")).await,
        Ok(ScrapeAccess::Unauthenticated)
    );
    assert!(requests.all().is_empty(), "no token, no review");
    assert_eq!(
        review.review(Some(&bearer("garbage"))).await,
        Ok(ScrapeAccess::Unauthenticated)
    );
    assert_eq!(requests.all().len(), 1, "no SubjectAccessReview for nobody");
}

#[tokio::test(start_paused = true)]
async fn a_failing_review_is_an_error_without_the_token_and_is_not_kept() {
    let code = Arc::new(AtomicU16::new(503));
    let answer = code.clone();
    let (client, requests) =
        fake_api::client(move |_, uri, _| match answer.load(Ordering::Relaxed) {
            201 if uri.contains("tokenreviews") => token_review(true),
            201 => access_review(true),
            code => fake_api::status(code, "ServiceUnavailable", "etcd is down"),
        });
    let review = ScrapeReview::new(client, "control", Vec::new());
    let error = review.review(Some(&bearer(TOKEN))).await.unwrap_err();
    assert!(error.contains("context control"), "{error}");
    assert!(error.contains("TokenReview"), "{error}");
    assert!(!error.contains(TOKEN), "{error}");
    code.store(201, Ordering::Relaxed);
    assert_eq!(
        review.review(Some(&bearer(TOKEN))).await,
        Ok(ScrapeAccess::Allowed)
    );
    assert_eq!(requests.all().len(), 3, "asked again after the failure");
}

#[tokio::test(start_paused = true)]
async fn a_silent_api_server_fails_the_review_within_its_timeout() {
    let client = fake_api::answered_by(|_| std::future::pending());
    let review = ScrapeReview::new(client, "control", Vec::new());
    let started = Instant::now();
    let error = review.review(Some(&bearer(TOKEN))).await.unwrap_err();
    assert!(error.contains("no answer within"), "{error}");
    assert_eq!(started.elapsed(), REVIEW_TIMEOUT);
}

#[tokio::test(start_paused = true)]
async fn token_after_token_is_reviewed_within_the_budget_and_known_tokens_still_pass() {
    use super::super::review_budget::{BURST, REFILL_EVERY};
    let (review, requests) = reviewing(true);
    assert_eq!(
        review.review(Some(&bearer(TOKEN))).await,
        Ok(ScrapeAccess::Allowed)
    );
    let reviews = || requests.all().len();
    let before = reviews();
    let mut throttled = 0;
    for n in 0..BURST + 10 {
        match review.review(Some(&bearer(&format!("guess-{n}")))).await {
            Ok(ScrapeAccess::Throttled) => throttled += 1,
            verdict => assert_eq!(verdict, Ok(ScrapeAccess::Unauthenticated)),
        }
    }
    // The scraper's own review took one from the burst.
    assert_eq!(throttled, 11);
    assert_eq!(
        reviews() - before,
        BURST as usize - 1,
        "one TokenReview per guess within the budget"
    );
    let before = reviews();
    assert_eq!(
        review.review(Some(&bearer(TOKEN))).await,
        Ok(ScrapeAccess::Allowed),
        "a kept verdict needs no budget"
    );
    assert_eq!(
        review.review(Some(&bearer("guess-0"))).await,
        Ok(ScrapeAccess::Unauthenticated),
        "nor does a kept refusal"
    );
    assert_eq!(reviews(), before);
    tokio::time::advance(REFILL_EVERY).await;
    assert_eq!(
        review.review(Some(&bearer("guess-x"))).await,
        Ok(ScrapeAccess::Unauthenticated)
    );
    assert_eq!(
        review.review(Some(&bearer("guess-y"))).await,
        Ok(ScrapeAccess::Throttled)
    );
    assert_eq!(reviews(), before + 1);
}

#[tokio::test(start_paused = true)]
async fn audiences_are_asked_for_and_a_token_valid_for_none_of_them_is_unauthenticated() {
    // The server says the token is valid for `wrong-audience` unless the token is TOKEN; an empty list
    // (valid for the API server only) for `no-audience`.
    let (client, requests) = fake_api::client(move |_, uri, body| {
        if !uri.contains("tokenreviews") {
            return access_review(true);
        }
        let asked: Value = serde_json::from_str(body).unwrap();
        let (code, mut answer) = token_review(true);
        answer["status"]["audiences"] = match asked["spec"]["token"].as_str().unwrap() {
            TOKEN => json!(["fleet-metrics"]),
            "no-audience" => json!([]),
            _ => json!(["wrong-audience"]),
        };
        (code, answer)
    });
    let audiences = vec!["fleet-metrics".to_owned(), "other".to_owned()];
    let review = ScrapeReview::new(client, "control", audiences);
    assert_eq!(
        review.review(Some(&bearer(TOKEN))).await,
        Ok(ScrapeAccess::Allowed)
    );
    let asked: Value = serde_json::from_str(&requests.all()[0].body).unwrap();
    assert_eq!(
        asked["spec"]["audiences"],
        json!(["fleet-metrics", "other"])
    );
    for token in ["for-another-service", "no-audience"] {
        assert_eq!(
            review.review(Some(&bearer(token))).await,
            Ok(ScrapeAccess::Unauthenticated),
            "{token}"
        );
    }
    assert_eq!(
        requests.all().len(),
        4,
        "no SubjectAccessReview for a token not ours"
    );
}

#[tokio::test(start_paused = true)]
async fn without_audiences_none_are_asked_for() {
    let (review, requests) = reviewing(true);
    assert_eq!(
        review.review(Some(&bearer(TOKEN))).await,
        Ok(ScrapeAccess::Allowed)
    );
    let asked: Value = serde_json::from_str(&requests.all()[0].body).unwrap();
    assert_eq!(asked["spec"].get("audiences"), None, "{asked}");
}

#[test]
fn only_a_bearer_token_is_a_token() {
    assert_eq!(bearer_token(b"Bearer abc.def"), Some("abc.def"));
    assert_eq!(bearer_token(b"bearer  abc "), Some("abc"));
    assert_eq!(bearer_token(b"Basic dXNlcjpwYXNz"), None);
    assert_eq!(bearer_token(b"Bearer "), None);
    assert_eq!(bearer_token(b"Bearer"), None);
    assert_eq!(bearer_token(b"Bearer \xff"), None);
}
