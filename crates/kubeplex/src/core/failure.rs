//! Why a request to a cluster failed, in the same words everywhere: `/readyz`, logs, and the parent's
//! per-cluster status. A transport failure is told apart from the rest: nothing answered (`unreachable`), the
//! server's certificate is not trusted (`untrusted server`), or the server refused our client certificate
//! (`client certificate rejected`).

use super::error::chain;

/// The words for a transport failure (`kube::Error::HyperError` / `Service`): what kind, then the detail.
pub(crate) fn transport(error: &kube::Error) -> String {
    let detail = chain(error);
    // kube's own prefixes name its error variants, which say nothing to an operator.
    let detail = ["ServiceError: ", "HyperError: "]
        .iter()
        .fold(detail.as_str(), |d, prefix| {
            d.strip_prefix(prefix).unwrap_or(d)
        })
        .to_owned();
    let lower = detail.to_ascii_lowercase();
    let has = |needles: &[&str]| needles.iter().any(|n| lower.contains(n));
    if has(&[
        "invalid peer certificate",
        "unknownissuer",
        "notvalidforname",
        "certificate verify failed",
    ]) {
        format!(
            "untrusted server: its certificate is not trusted with the kubeconfig's CA ({})",
            tls_detail(&detail)
        )
    } else if has(&[
        "badcertificate",
        "certificaterequired",
        "unknownca",
        "certificateunknown",
        "decrypterror",
    ]) {
        format!(
            "client certificate rejected by the server ({})",
            tls_detail(&detail)
        )
    } else if has(&["connection refused"]) {
        "unreachable: connection refused".into()
    } else if has(&[
        "dns error",
        "failed to lookup address",
        "name or service not known",
    ]) {
        "unreachable: its address does not resolve (DNS)".into()
    } else if has(&["timed out", "deadline has elapsed"]) {
        "unreachable: the connection timed out".into()
    } else {
        format!("unreachable: {detail}")
    }
}

/// Whether a failure means the server could not be reached at all (as opposed to answering with an error).
pub(crate) fn is_transport(error: &kube::Error) -> bool {
    matches!(error, kube::Error::HyperError(_) | kube::Error::Service(_))
}

/// The TLS part of a chain: from rustls' words on, without the client plumbing before them.
fn tls_detail(detail: &str) -> &str {
    ["invalid peer certificate", "received fatal alert"]
        .iter()
        .find_map(|marker| detail.find(marker).map(|at| &detail[at..]))
        .unwrap_or(detail)
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

    fn service_error(message: &str) -> kube::Error {
        kube::Error::Service(message.to_owned().into())
    }

    #[test]
    fn transport_failures_are_told_apart() {
        let cases = [
            (
                "client error (Connect): invalid peer certificate: UnknownIssuer",
                "untrusted server: its certificate is not trusted with the kubeconfig's CA (invalid peer certificate: UnknownIssuer)",
            ),
            (
                "client error (SendRequest): received fatal alert: CertificateRequired",
                "client certificate rejected by the server (received fatal alert: CertificateRequired)",
            ),
            (
                "client error (Connect): tcp connect error: Connection refused (os error 111)",
                "unreachable: connection refused",
            ),
            (
                "client error (Connect): dns error: failed to lookup address information",
                "unreachable: its address does not resolve (DNS)",
            ),
            (
                "client error (Connect): tcp connect error: connection timed out",
                "unreachable: the connection timed out",
            ),
            ("something else", "unreachable: something else"),
        ];
        for (error, words) in cases {
            assert_eq!(transport(&service_error(error)), words);
        }
        assert!(is_transport(&service_error("x")));
    }
}
