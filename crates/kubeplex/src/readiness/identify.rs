//! Asking a cluster which it is (one request), and recording what it answered.

use std::time::Duration;

use super::identities::Asked;
use super::readiness::Readiness;
use crate::client::{Access, IDENTITY_NAMESPACE};
use crate::core::chain;

/// How long a cluster may take to say which it is: as long as a ping may take.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// Asks `name`'s server which cluster it is over `client` (one request, a read: it never waits for the
/// identity itself), and records the answer: its writes wait until then.
pub(crate) async fn identify(name: &str, client: kube::Client, readiness: &Readiness) {
    readiness.identified(name, ask_identity(client).await);
}

/// Asks the server behind `client` which cluster it is: one request, bounded by [`ASK_TIMEOUT`].
pub(crate) async fn ask_identity(client: kube::Client) -> Asked {
    let asking = crate::client::ask_identity(client);
    match tokio::time::timeout(ASK_TIMEOUT, asking).await {
        // The server writes it: shown in /readyz, logs and statuses only when it looks like a UID.
        Ok(Ok(uid)) if !is_uid(&uid) => Asked::Unknowable(format!(
            "its Namespace {IDENTITY_NAMESPACE} has no UID, or one that is not a UID"
        )),
        Ok(Ok(uid)) => Asked::Known(uid),
        // A cluster that has just started may not have created it yet: asked again at the next ping.
        Ok(Err(kube::Error::Api(status))) if status.code == 404 => Asked::NoAnswer(format!(
            "its Namespace {IDENTITY_NAMESPACE} is not there (yet)"
        )),
        Ok(Err(kube::Error::Api(status))) if status.code == 403 => Asked::Unknowable(format!(
            "reading its Namespace {IDENTITY_NAMESPACE} was refused ({}); grant get on it",
            status.code
        )),
        Ok(Err(error @ kube::Error::Api(_))) => Asked::Refused(chain(&error)),
        Ok(Err(error)) => Asked::NoAnswer(chain(&error)),
        Err(_) => Asked::NoAnswer(format!("no answer within {ASK_TIMEOUT:?}")),
    }
}

/// As [`identify`], over a client of its own on `access`.
pub(super) async fn identify_over_own(context: &str, access: &Access, readiness: &Readiness) {
    match crate::client::own_client(access) {
        Ok(client) => identify(context, client, readiness).await,
        Err(error) => {
            tracing::debug!(cluster = %context, %error, "cannot build a client to ask which cluster this is");
        }
    }
}

/// Whether `uid` looks like an object's UID: 1 to 64 ASCII letters, digits and dashes.
fn is_uid(uid: &str) -> bool {
    (1..=64).contains(&uid.len()) && uid.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::is_uid;

    #[test]
    fn only_what_looks_like_a_uid_is_taken_for_an_identity() {
        assert!(is_uid("bda639d7-4a9b-47e1-ab1f-89a7f219b3e3"));
        for hostile in [
            "",
            "a b",
            "uid\nforged log line",
            "<script>",
            &"a".repeat(65),
            "ünïcode",
        ] {
            assert!(!is_uid(hostile), "{hostile:?}");
        }
    }
}
