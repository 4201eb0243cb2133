//! Why a request to a cluster failed, in the same words everywhere: `/readyz`, logs, and the parent's
//! per-cluster status. A transport failure is told apart from the rest: nothing answered (`unreachable`), the
//! server's certificate is not trusted (`untrusted server`), or the server refused our client certificate
//! (`client certificate rejected`).

use std::error::Error as StdError;
use std::io;

use rustls::AlertDescription;

use super::error::chain;

/// A write refused by this replica's fence (leader election or a shard's Lease): the replica is not the
/// writer any more, which is neither a transport failure nor the cluster's answer.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Fenced(pub(crate) &'static str);

/// A write refused at its cluster's identity gate: the name reaches the same cluster as another, or another
/// cluster than it did, or the cluster has not said which it is in time. Neither a transport failure nor
/// the cluster's answer.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct IdentityRefusal(pub(crate) String);

/// Why a write was refused for its cluster's identity, when `error` is (or was caused by) such a refusal.
pub(crate) fn identity_refusal<'a>(error: &'a (dyn StdError + 'static)) -> Option<&'a str> {
    causes(error).find_map(|e| e.downcast_ref::<IdentityRefusal>().map(|n| n.0.as_str()))
}

/// Every error in `error`'s chain, itself first. An `io::Error` wrapping another error (how tokio-rustls
/// and hyper pass TLS and connect failures on) is followed into what it wraps, which its `source()` skips.
fn causes<'a>(
    error: &'a (dyn StdError + 'static),
) -> impl Iterator<Item = &'a (dyn StdError + 'static)> {
    std::iter::successors(Some(error), |&e: &&'a (dyn StdError + 'static)| match e
        .downcast_ref::<io::Error>()
    {
        Some(io) => io.get_ref().map(|inner| inner as _).or_else(|| io.source()),
        None => e.source(),
    })
}

/// The fence's refusal, when `error` is (or was caused by) a write this replica's fence refused.
pub(crate) fn fenced(error: &(dyn StdError + 'static)) -> Option<&'static str> {
    causes(error).find_map(|e| e.downcast_ref::<Fenced>().map(|f| f.0))
}

/// Whether the failure `error` describes may pass by itself, with nothing in the configuration changed: an
/// exec credential plugin that ran and failed (its token server down, a timeout of its own), printed no
/// usable credential, or could not be started for a passing reason, or a token file that could not be read.
/// A plugin that is not there, or a configuration kube cannot use, stays as it is until it is changed.
pub(crate) fn may_pass(error: &(dyn std::error::Error + 'static)) -> bool {
    use kube::client::AuthError;
    use std::io::ErrorKind;
    match super::error::auth_cause(error) {
        Some(AuthError::AuthExecStart(io)) => {
            !matches!(io.kind(), ErrorKind::NotFound | ErrorKind::PermissionDenied)
        }
        Some(
            AuthError::AuthExecRun { .. }
            | AuthError::AuthExecParse(_)
            | AuthError::AuthExec(_)
            | AuthError::ExecPluginFailed
            | AuthError::MalformedTokenExpirationDate(_)
            | AuthError::UnrefreshableTokenResponse
            | AuthError::ReadTokenFile(..),
        ) => true,
        _ => false,
    }
}

/// Cuts `text` to at most `max` bytes, on a character boundary, ending it with `marker` when it was cut:
/// a reason may carry a server's answer, and whoever reads it must not be handed an unbounded one.
pub(crate) fn cut(text: &mut String, max: usize, marker: &str) {
    if text.len() <= max {
        return;
    }
    let room = max.saturating_sub(marker.len());
    let end = (0..=room)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or_default();
    text.truncate(end);
    text.push_str(marker);
}

/// What kind of transport failure a chain holds, judged by the types in it.
enum Transport<'a> {
    Untrusted(&'a rustls::Error),
    CertificateRejected(&'a rustls::Error),
    Refused,
    TimedOut,
    Unresolved,
    Other,
}

fn transport_kind<'a>(error: &'a (dyn StdError + 'static)) -> Transport<'a> {
    for cause in causes(error) {
        if let Some(tls) = cause.downcast_ref::<rustls::Error>() {
            match tls {
                rustls::Error::InvalidCertificate(_) => return Transport::Untrusted(tls),
                rustls::Error::AlertReceived(
                    AlertDescription::BadCertificate
                    | AlertDescription::CertificateRequired
                    | AlertDescription::UnknownCA
                    | AlertDescription::CertificateUnknown
                    | AlertDescription::DecryptError,
                ) => return Transport::CertificateRejected(tls),
                _ => {}
            }
        }
        if let Some(io) = cause.downcast_ref::<io::Error>() {
            match io.kind() {
                io::ErrorKind::ConnectionRefused => return Transport::Refused,
                io::ErrorKind::TimedOut => return Transport::TimedOut,
                _ => {}
            }
        }
        if cause.is::<tokio::time::error::Elapsed>() {
            return Transport::TimedOut;
        }
        // The resolver's failure is a plain `io::Error` with no kind of its own; hyper-util's connector
        // wraps it in an error whose only public trait is its text.
        if cause.to_string() == "dns error" {
            return Transport::Unresolved;
        }
    }
    Transport::Other
}

/// The words for a transport failure (`kube::Error::HyperError` / `Service`): what kind, then the detail.
pub(crate) fn transport(error: &kube::Error) -> String {
    match transport_kind(error) {
        Transport::Untrusted(tls) => format!(
            "untrusted server: its certificate is not trusted with the kubeconfig's CA ({tls})"
        ),
        Transport::CertificateRejected(tls) => {
            format!("client certificate rejected by the server ({tls})")
        }
        Transport::Refused => "unreachable: connection refused".into(),
        Transport::TimedOut => "unreachable: the connection timed out".into(),
        Transport::Unresolved => "unreachable: its address does not resolve (DNS)".into(),
        Transport::Other => {
            let detail = chain(error);
            // kube's own prefixes name its error variants, which say nothing to an operator.
            let detail = [
                "Error reading events stream: ",
                "ServiceError: ",
                "HyperError: ",
            ]
            .iter()
            .fold(detail.as_str(), |d, prefix| {
                d.strip_prefix(prefix).unwrap_or(d)
            })
            .to_owned();
            format!("unreachable: {detail}")
        }
    }
}

/// Whether a failure means the server could not be reached at all (as opposed to answering with an
/// error): no connection, or one that broke while a watch read from it (the server stopped answering its
/// PINGs). A write this replica's own fence refused never reached for the server: it is not one.
pub(crate) fn is_transport(error: &kube::Error) -> bool {
    let transport = matches!(
        error,
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_)
    );
    transport && fenced(error).is_none() && identity_refusal(error).is_none()
}

/// A watch failure as one word, for the `reason` label of `kubeplex_watch_restarts_total`: `expired` (410,
/// a normal relist), `unreachable`, `unauthorized` (401), `forbidden` (403), `not_served` (404), or `error`.
pub(crate) fn watch_failure_label(error: &kube::runtime::watcher::Error) -> &'static str {
    use kube::runtime::watcher::Error as E;
    let code = match error {
        E::WatchError(status) => Some(status.code),
        E::InitialListFailed(e) | E::WatchStartFailed(e) | E::WatchFailed(e) => {
            if is_transport(e) {
                return "unreachable";
            }
            match e {
                kube::Error::Api(status) => Some(status.code),
                _ => None,
            }
        }
        _ => None,
    };
    match code {
        Some(410) => "expired",
        Some(401) => "unauthorized",
        Some(403) => "forbidden",
        Some(404) => "not_served",
        _ => "error",
    }
}

/// Where a failing watch looks: for its failure's words.
pub(crate) struct WatchPlace<'a> {
    pub(crate) kind: &'a str,
    pub(crate) plural: &'a str,
    pub(crate) namespace: Option<&'a str>,
}

/// A watch failure in the words an operator's on-call needs: which verb, resource and namespace, or why
/// the server could not be reached.
pub(crate) fn watch_failure(
    error: &kube::runtime::watcher::Error,
    watch: &WatchPlace<'_>,
) -> String {
    let place = match watch.namespace {
        Some(namespace) => format!("namespace {namespace}"),
        None => "all namespaces".into(),
    };
    let (verb, source) = match error {
        kube::runtime::watcher::Error::InitialListFailed(source) => ("list", source),
        kube::runtime::watcher::Error::WatchStartFailed(source)
        | kube::runtime::watcher::Error::WatchFailed(source) => ("watch", source),
        kube::runtime::watcher::Error::WatchError(status) => {
            return format!(
                "watch of {} in {place} failed: {} ({})",
                watch.plural, status.message, status.code
            );
        }
        kube::runtime::watcher::Error::NoResourceVersion => {
            return format!(
                "kind {} returned no resourceVersion: it cannot be watched",
                watch.kind
            );
        }
    };
    match source {
        kube::Error::Api(status) => match status.code {
            401 => "credentials were rejected (401 Unauthorized)".into(),
            403 => format!(
                "user may not {verb} {} in {place} (403 Forbidden)",
                watch.plural
            ),
            404 => format!("kind {} is not served", watch.kind),
            code => format!(
                "{verb} {} in {place} failed: {} ({code})",
                watch.plural, status.message
            ),
        },
        error if is_transport(error) => transport(error),
        other => format!(
            "{verb} {} in {place} failed: {}",
            watch.plural,
            super::error::chain(other)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service_error(error: impl Into<tower::BoxError>) -> kube::Error {
        kube::Error::Service(error.into())
    }

    /// An error as a connector hands it on: an `io::Error` of `kind` wrapping `inner`.
    fn io_wrapping(
        kind: io::ErrorKind,
        inner: impl Into<Box<dyn StdError + Send + Sync>>,
    ) -> io::Error {
        io::Error::new(kind, inner)
    }

    /// Text-only error, as hyper-util's connector shows its own wrapper.
    #[derive(Debug, thiserror::Error)]
    #[error("{0}")]
    struct Wrapper(&'static str, #[source] io::Error);

    #[test]
    fn transport_failures_are_told_apart_by_their_types() {
        let untrusted = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let rejected = rustls::Error::AlertReceived(AlertDescription::CertificateRequired);
        let cases = [
            (
                service_error(io_wrapping(io::ErrorKind::InvalidData, untrusted)),
                "untrusted server: its certificate is not trusted with the kubeconfig's CA (invalid peer certificate: UnknownIssuer)",
            ),
            (
                service_error(Wrapper(
                    "client error (SendRequest)",
                    io_wrapping(io::ErrorKind::InvalidData, rejected),
                )),
                "client certificate rejected by the server (received fatal alert: CertificateRequired)",
            ),
            (
                service_error(Wrapper(
                    "tcp connect error",
                    io::Error::from(io::ErrorKind::ConnectionRefused),
                )),
                "unreachable: connection refused",
            ),
            (
                service_error(Wrapper(
                    "dns error",
                    io::Error::other("failed to lookup address information"),
                )),
                "unreachable: its address does not resolve (DNS)",
            ),
            (
                service_error(io::Error::from(io::ErrorKind::TimedOut)),
                "unreachable: the connection timed out",
            ),
            (
                service_error("something else"),
                "unreachable: something else",
            ),
            // A watch's connection that broke (a PING went unanswered) while its events were read.
            (
                kube::Error::ReadEvents(io::Error::other("keep-alive timed out")),
                "unreachable: keep-alive timed out",
            ),
        ];
        for (error, words) in cases {
            assert_eq!(transport(&error), words);
            assert!(is_transport(&error));
        }
        // The words alone decide nothing: a server's message that mentions a refused connection is not one.
        assert_eq!(
            transport(&service_error("upstream said: connection refused")),
            "unreachable: upstream said: connection refused"
        );
    }

    #[test]
    fn a_fenced_write_is_no_transport_failure() {
        let refused = service_error(Fenced("not the leader: this replica writes nothing"));
        assert!(!is_transport(&refused));
        assert_eq!(
            fenced(&refused),
            Some("not the leader: this replica writes nothing")
        );
        let wrapped = service_error(io_wrapping(io::ErrorKind::Other, Fenced("not the owner")));
        assert_eq!(fenced(&wrapped), Some("not the owner"));
        assert_eq!(fenced(&service_error("something else")), None);
    }
}
