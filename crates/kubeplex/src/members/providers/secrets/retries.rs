//! The Secrets whose handling failed (a read, or a write of the finalizer: a conflict, a 403, an API server
//! down), each tried again with backoff and jitter. A failure that would otherwise wait for the Secret's next
//! change never does: a Secret left without its finalizer would let a member's credentials go before its
//! children.
//!
//! A failure is logged at `warn` when its cause changes, and while it stays the same only once in a while; the
//! backoff grows for as long as the Secret's handling fails, and starts over once it succeeds or the Secret
//! goes.

use std::time::Duration;

use tokio::time::Instant;

use crate::executor::{Failed, KeyedRetries};

/// The first delay before a Secret whose handling failed is handled again.
pub(super) const RETRY_MIN: Duration = Duration::from_secs(1);
/// The longest delay before jitter, which adds up to as much again: two minutes at most.
pub(super) const RETRY_MAX: Duration = Duration::from_secs(60);
/// The Secrets to handle again, and how long each waits.
pub(super) struct Retries(KeyedRetries<()>);

impl Default for Retries {
    fn default() -> Self {
        Self(KeyedRetries::new(RETRY_MIN, RETRY_MAX))
    }
}

impl Retries {
    /// Handling `secret` failed with `failure`: it is handled again after a delay.
    pub(super) fn failed(&mut self, secret: &str, failure: &str) -> Failed {
        self.0.failed(secret, (), failure)
    }

    /// `secret` was handled: its backoff starts over. Returns whether a failure of it had been logged.
    pub(super) fn succeeded(&mut self, secret: &str) -> bool {
        self.0.ended(secret)
    }

    /// `secret` is gone: nothing of it is tried again.
    pub(super) fn forget(&mut self, secret: &str) {
        self.0.ended(secret);
    }

    /// When the next Secret is due, if one is.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.0.next_due()
    }

    /// The Secrets due by now, taken (their backoff stays until they are handled).
    pub(super) fn take_due(&mut self) -> Vec<String> {
        self.0
            .take_due()
            .into_iter()
            .map(|(secret, ())| secret)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    //! Secrets handled again with backoff: the policy alone, and the provider's loop on a stand-in API server
    //! whose first finalizer patches are refused (paused time).

    use std::sync::Arc;
    use std::time::Duration;

    use parking_lot::Mutex;
    use serde_json::json;
    use tokio::sync::mpsc;
    use tokio::time::Instant;

    use super::*;
    use crate::core::ContextName;
    use crate::executor::LOG_AGAIN_AFTER;
    use crate::members::LeavePolicy;
    use crate::members::provider::{Command, FixedClients, MemberProvider, MemberSink};
    use crate::members::providers::secret_finalizer::MEMBER_FINALIZER;
    use crate::members::providers::secrets::KubeconfigSecrets;
    use crate::testing::fake_api::{self, Seen, status};

    #[tokio::test(start_paused = true)]
    async fn the_backoff_grows_with_jitter_and_starts_over_once_handled() {
        let mut retries = Retries::default();
        let delays: Vec<Duration> = (0..4)
            .map(|_| retries.failed("a", "refused").retry_in)
            .collect();
        // Each delay lies in [base, 2 × base): base 1, 2, 4, 8 s.
        for (delay, base) in delays.iter().zip([1, 2, 4, 8].map(Duration::from_secs)) {
            assert!(*delay >= base && *delay < base * 2, "{delays:?}");
        }
        assert!(retries.succeeded("a"), "a failure was logged");
        assert!(retries.failed("a", "refused").retry_in < RETRY_MIN * 2);
        // Another Secret has a backoff of its own.
        assert!(retries.failed("b", "refused").retry_in < RETRY_MIN * 2);
        retries.forget("a");
        retries.forget("b");
        assert_eq!(retries.next_due(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_is_logged_when_it_changes_and_then_rarely() {
        let mut retries = Retries::default();
        assert!(retries.failed("a", "403").warn);
        assert!(!retries.failed("a", "403").warn);
        assert!(retries.failed("a", "409").warn);
        assert!(!retries.failed("a", "409").warn);
        tokio::time::advance(LOG_AGAIN_AFTER).await;
        assert!(retries.failed("a", "409").warn);
        assert!(!retries.failed("a", "409").warn);
    }

    #[tokio::test(start_paused = true)]
    async fn a_secret_is_due_after_its_delay_and_taken_once() {
        let mut retries = Retries::default();
        let delay = retries.failed("a", "refused").retry_in;
        assert_eq!(retries.next_due(), Some(Instant::now() + delay));
        assert!(retries.take_due().is_empty());
        tokio::time::advance(delay).await;
        assert_eq!(retries.take_due(), ["a"]);
        assert!(retries.take_due().is_empty());
        assert_eq!(retries.next_due(), None);
    }

    /// The member Secret the stand-in server holds, with `finalizers`.
    fn secret(finalizers: &[&str]) -> serde_json::Value {
        let kubeconfig = "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
        contexts: [{name: c, context: {cluster: c, user: u}}]\n\
        clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n\
        users: [{name: u, user: {token: t}}]\n";
        let data = k8s_openapi::ByteString(kubeconfig.as_bytes().to_vec());
        json!({
            "apiVersion": "v1", "kind": "Secret", "data": { "kubeconfig": data },
            "metadata": {
                "name": "cluster-c", "namespace": "members", "resourceVersion": "1",
                "labels": { "fleet.test/member": "true" }, "finalizers": finalizers,
            },
        })
    }

    /// The finalizer patches the stand-in server received, each with when it came.
    type Patches = Arc<Mutex<Vec<(Instant, Seen)>>>;

    /// A stand-in API server: the Secret listed, its watch silent, a read answering the Secret, and the first
    /// `refused` finalizer patches answered 403. Returns the client and each patch, with when it came.
    fn server(refused: usize) -> (kube::Client, Patches) {
        let patches = Arc::new(Mutex::new(Vec::new()));
        let seen = patches.clone();
        let client = fake_api::answered_by(move |request: Seen| {
            let watch = request.uri.contains("watch=true");
            let answer = match request.method.as_str() {
                "GET"
                    if request
                        .uri
                        .starts_with("/api/v1/namespaces/members/secrets?") =>
                {
                    (
                        200,
                        json!({ "apiVersion": "v1", "kind": "SecretList",
                    "metadata": { "resourceVersion": "1" }, "items": [secret(&[])] }),
                    )
                }
                "GET" => (200, secret(&[])),
                "PATCH" => {
                    let mut patches = seen.lock();
                    patches.push((Instant::now(), request));
                    match patches.len() <= refused {
                        true => status(403, "Forbidden", "secrets \"cluster-c\" is forbidden"),
                        false => (200, secret(&[MEMBER_FINALIZER])),
                    }
                }
                _ => status(405, "MethodNotAllowed", "not here"),
            };
            async move {
                if watch {
                    // Nothing changes: only the retries bring the Secret back.
                    std::future::pending::<()>().await;
                }
                answer
            }
        });
        (client, patches)
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_finalizer_is_added_later_with_growing_delays_without_a_change_of_the_secret()
    {
        let (client, patches) = server(3);
        let (commands, mut received) = mpsc::channel(16);
        let clients: FixedClients = Arc::new(move |_: &str| Ok(client.clone()));
        let sink = MemberSink::new(commands, clients, LeavePolicy::Delete);
        let provider = KubeconfigSecrets::new(
            ContextName::new("control"),
            "members",
            "fleet.test/member=true",
        );
        let provider = tokio::spawn(Box::new(provider).run(sink));
        let joined = tokio::time::timeout(Duration::from_secs(60), received.recv()).await;
        assert!(
            matches!(joined, Ok(Some(Command::Join { ref name, .. })) if name == "cluster-c"),
            "the member joins while its finalizer is refused"
        );

        // Three refusals, then the finalizer added: each try after a longer wait than the one before.
        let added = async {
            loop {
                if patches.lock().len() >= 4 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        let within = tokio::time::timeout(Duration::from_secs(600), added).await;
        let patches_seen = patches.lock().clone();
        let lines: Vec<String> = patches_seen.iter().map(|(_, s)| s.body.clone()).collect();
        assert!(
            within.is_ok(),
            "the finalizer was not tried again: {lines:#?}"
        );
        assert!(
            lines.iter().all(|b| b.contains(MEMBER_FINALIZER)),
            "{lines:#?}"
        );
        let at: Vec<Instant> = patches_seen.iter().map(|(at, _)| *at).collect();
        let gaps: Vec<Duration> = at.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps[0] >= RETRY_MIN, "{gaps:?}");
        assert!(gaps.windows(2).all(|g| g[1] > g[0]), "{gaps:?}");

        // Added: nothing more is sent for it.
        tokio::time::sleep(RETRY_MAX * 4).await;
        assert_eq!(patches.lock().len(), 4);
        provider.abort();
    }
}
