//! Asking a cluster which it is (one request), and recording what it answered.

use std::time::Duration;

use super::identities::Asked;
use super::readiness::Readiness;
use crate::client::{Access, CLUSTER_ID_PROPERTY, IDENTITY_NAMESPACE, IdentitySource};
use crate::core::chain;

/// How long a cluster may take to say which it is: as long as a ping may take.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// Asks `name`'s server which cluster it is over `client` (one request, a read: it never waits for the
/// identity itself), and records the answer: its writes wait until then.
pub(crate) async fn identify(name: &str, client: kube::Client, readiness: &Readiness) {
    let source = readiness.identities().source();
    readiness.identified(name, ask_identity(client, source).await);
}

/// Asks the server behind `client` which cluster it is, where `source` says: one request (two for a
/// cluster without the ClusterProperty asked for), bounded by [`ASK_TIMEOUT`].
pub(crate) async fn ask_identity(client: kube::Client, source: IdentitySource) -> Asked {
    let asking = crate::client::ask_identity(client, source);
    match tokio::time::timeout(ASK_TIMEOUT, asking).await {
        // Written by the server, or a ClusterProperty's writer: shown in /readyz, logs and statuses only
        // when it looks like an id.
        Ok(Ok(id)) if !is_id(&id) => Asked::Unknowable(format!(
            "its Namespace {IDENTITY_NAMESPACE} has no UID (or its ClusterProperty \
             {CLUSTER_ID_PROPERTY} no value), or one that is not an id"
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

/// Whether `id` looks like an object's UID or a ClusterProperty id (a DNS subdomain of at most 128
/// characters): 1 to 128 ASCII letters, digits, dashes and dots.
fn is_id(id: &str) -> bool {
    let allowed = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'.';
    (1..=128).contains(&id.len()) && id.bytes().all(allowed)
}

#[cfg(test)]
mod tests {
    use super::is_id;

    #[test]
    fn only_what_looks_like_a_uid_or_a_cluster_id_is_taken_for_an_identity() {
        assert!(is_id("bda639d7-4a9b-47e1-ab1f-89a7f219b3e3"));
        assert!(is_id("cluster-a.fleet.example.com"));
        for hostile in [
            "",
            "a b",
            "uid\nforged log line",
            "<script>",
            &"a".repeat(129),
            "ünïcode",
        ] {
            assert!(!is_id(hostile), "{hostile:?}");
        }
    }
}
