//! The errors of kubeplex.

/// What can go wrong in kubeplex; every variant that concerns a cluster names it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No kubeconfig was found: neither `KUBECONFIG`, nor `~/.kube/config`, nor an in-cluster service account.
    #[error("no kubeconfig: {reason}")]
    NoKubeconfig {
        /// Where we looked and what we found.
        reason: String,
    },
    /// A kubeconfig file exists but cannot be read or parsed.
    #[error("invalid kubeconfig: {reason}")]
    InvalidKubeconfig {
        /// The file and what is wrong with it.
        reason: String,
    },
    /// A declared context is not in the kubeconfig.
    #[error(
        "context {context}: {}",
        no_such_context(kubeconfig, kubeconfig_context, remapped, available)
    )]
    ContextNotFound {
        /// The context as the controller declared it.
        context: String,
        /// The kubeconfig context it maps to (the same name unless remapped).
        kubeconfig_context: String,
        /// Where the remapping came from, e.g. ` (set by KUBEPLEX_CONTEXT_CLUSTER_B)`; empty when not remapped.
        remapped: String,
        /// Which kubeconfig was read, e.g. `the kubeconfig /home/me/.kube/config`.
        kubeconfig: String,
        /// The kubeconfig's contexts, comma-separated.
        available: String,
    },
    /// A context is in the kubeconfig but no client could be configured from it.
    #[error("context {context}: cannot configure a client: {reason}")]
    ClientConfig {
        /// The context.
        context: String,
        /// What the kubeconfig loader reported.
        reason: String,
    },
    /// A client was asked for a context that no registered controller (nor the member provider) declared.
    #[error(
        "context {context} was not declared by any controller or member provider of this manager"
    )]
    UndeclaredContext {
        /// The context asked for.
        context: String,
    },
    /// A member of the fleet cannot be used: its provider reported it malformed, or it is no member now.
    #[error("member {member}: {reason}")]
    Member {
        /// The member's name.
        member: String,
        /// What is wrong, in the provider's or the runtime's words (never its credentials).
        reason: String,
    },
    /// A reconcile declared a child the controller's plan does not allow.
    #[error("cluster {cluster}: child {kind}: {reason}")]
    InvalidChild {
        /// The cluster the child was meant for.
        cluster: String,
        /// The child's kind.
        kind: String,
        /// What is wrong.
        reason: String,
    },
    /// `Cx::cached` of a kind the controller declared nowhere in that cluster, or `FleetView::cached` of one
    /// no controller did.
    #[error("cluster {cluster}: no cache of {kind} there; {fix}")]
    NotWatched {
        /// The cluster read.
        cluster: String,
        /// The kind (`Kind.group/version`).
        kind: String,
        /// The declaration that would watch it.
        fix: String,
    },
    /// A reconcile's own status fields cannot be written (`Cx::set_status`).
    #[error("the reconcile's status fields: {reason}")]
    InvalidStatus {
        /// What is wrong with them.
        reason: String,
    },
    /// A cluster that is not written to: it reaches the same cluster as another name, or another cluster
    /// than it did.
    #[error("cluster {cluster}: {reason}")]
    NotWritten {
        /// The cluster's name (a context or a member).
        cluster: String,
        /// Why, naming the other name or both identities.
        reason: String,
    },
    /// A request to a cluster's API server failed.
    #[error("cluster {cluster}: {}", describe_kube(source))]
    Kube {
        /// The cluster the request went to.
        cluster: String,
        /// What the client reported (its words are already in this error's message).
        source: kube::Error,
    },
    /// The probe server could not listen on its address.
    #[error("probe server on {address}: {source}")]
    Probes {
        /// The address asked for.
        address: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The secure metrics server cannot start: its address, its certificate or its context's client.
    #[error("secure metrics on {address}: {reason}")]
    SecureMetrics {
        /// The address asked for.
        address: String,
        /// Why, in words naming the file or the context.
        reason: String,
    },
    /// The webhook server cannot start: its address or its certificate.
    #[error("webhooks on {address}: {reason}")]
    Webhooks {
        /// The address asked for.
        address: String,
        /// Why, in words naming the file.
        reason: String,
    },
    /// A required context cannot be used, so the manager cannot start; each reason names its context.
    #[error("cannot start: {reasons}")]
    Startup {
        /// Why, one reason per context, separated by `; `.
        reasons: String,
    },
    /// A plan written by hand (not by `#[controller]`, which checks the same while compiling) is invalid.
    #[error("controller {controller}: {reason}")]
    InvalidPlan {
        /// The controller's name as the plan gives it.
        controller: String,
        /// What is wrong, and the fix.
        reason: String,
    },
    /// The leader election's settings cannot fence writes, or its Lease's context is unusable.
    #[error("leader election (Lease {lease}): {reason}")]
    LeaderElection {
        /// `namespace/name` of the Lease, in its context.
        lease: String,
        /// What is wrong, and the fix.
        reason: String,
    },
    /// Sharded mode's settings cannot work, or its Leases' context is unusable.
    #[error("sharding (group {group}): {reason}")]
    Sharding {
        /// `namespace/name` of the shard group, in its context.
        group: String,
        /// What is wrong, and the fix.
        reason: String,
    },
    /// The manager could not install its signal handlers.
    #[error("installing signal handlers: {0}")]
    Signals(#[source] std::io::Error),
}

fn no_such_context(
    kubeconfig: &str,
    kubeconfig_context: &str,
    remapped: &str,
    available: &str,
) -> String {
    format!("{kubeconfig} has no context {kubeconfig_context:?}{remapped} (it has: {available})")
}

impl Error {
    /// What is wrong, without naming the cluster it concerns: for a message that names the cluster
    /// already (a parent's status entry for it, an Event about it), so that the cluster is named once.
    pub(crate) fn detail(&self) -> String {
        match self {
            Self::ContextNotFound {
                kubeconfig,
                kubeconfig_context,
                remapped,
                available,
                ..
            } => no_such_context(kubeconfig, kubeconfig_context, remapped, available),
            Self::ClientConfig { reason, .. } => format!("cannot configure a client: {reason}"),
            Self::UndeclaredContext { .. } => {
                "not declared by any controller of this manager".into()
            }
            Self::Member { reason, .. } | Self::NotWritten { reason, .. } => reason.clone(),
            Self::InvalidChild { kind, reason, .. } => format!("child {kind}: {reason}"),
            Self::Kube { source, .. } => describe_kube(source),
            other => other.to_string(),
        }
    }
}

/// A result with kubeplex's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error and its causes on one line, each cause once. A kube API error reads as the server's message with
/// its HTTP code (`deployments.apps "web" not found (404 NotFound)`), never as a Rust `Debug` dump, even
/// when an outer error's message embedded one.
pub(crate) fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    if let Some(kube) = error.downcast_ref::<kube::Error>() {
        return describe_kube(kube);
    }
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        if let Some(kube) = cause.downcast_ref::<kube::Error>() {
            if let kube::Error::Api(status) = kube {
                // kube's message appends `({status:?})`; an outer error that embedded it has the dump too.
                text = text.replace(&format!(" ({status:?})"), "");
            }
            // The kube error's own words cover its causes.
            let cause_text = describe_kube(kube);
            if !text.contains(&cause_text) {
                text.push_str(": ");
                text.push_str(&cause_text);
            }
            break;
        }
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    without_plugin_output(error, text)
}

/// A kube client error in words: the API server's message and code for API errors, else the error's chain.
pub(super) fn describe_kube(error: &kube::Error) -> String {
    match error {
        // The server says only "Unauthorized"; these are the words `/readyz` and the logs use for it.
        kube::Error::Api(status) if status.code == 401 => {
            "credentials were rejected (401 Unauthorized)".into()
        }
        kube::Error::Api(status) => {
            let reason = if status.reason.is_empty() {
                String::new()
            } else {
                format!(" {}", status.reason)
            };
            format!("{} ({}{reason})", status.message, status.code)
        }
        other => {
            let mut text = other.to_string();
            let mut source = std::error::Error::source(other);
            while let Some(cause) = source {
                let cause_text = cause.to_string();
                if !text.contains(&cause_text) {
                    text.push_str(": ");
                    text.push_str(&cause_text);
                }
                source = cause.source();
            }
            without_plugin_output(other, text)
        }
    }
}

/// `text` (describing `error`) with an exec plugin's failure, wherever an error embedded it, in words that
/// leave out the plugin's output.
fn without_plugin_output(error: &(dyn std::error::Error + 'static), text: String) -> String {
    match auth_cause(error) {
        Some(auth) => text.replace(&auth.to_string(), &describe_auth(auth)),
        None => text,
    }
}

/// The kube authentication error in `error`'s chain, if any.
pub(super) fn auth_cause<'e>(
    error: &'e (dyn std::error::Error + 'static),
) -> Option<&'e kube::client::AuthError> {
    let mut current = Some(error);
    while let Some(cause) = current {
        if let Some(auth) = cause.downcast_ref::<kube::client::AuthError>() {
            return Some(auth);
        }
        current = cause.source();
    }
    None
}

/// An authentication failure without what an exec plugin printed (kube's message embeds the plugin's whole
/// stdout and stderr, and a parse error quotes it: either may hold a token).
fn describe_auth(error: &kube::client::AuthError) -> String {
    use kube::client::AuthError;
    match error {
        // Not `cmd` either: kube renders it with the plugin's environment and arguments.
        AuthError::AuthExecRun { out, .. } => format!(
            "the credential plugin (the user's `exec`) failed ({}); its output is not shown, as it may hold credentials",
            out.status
        ),
        AuthError::AuthExecParse(parse) => {
            let at = parse
                .location()
                .map(|l| format!(" at line {}, column {}", l.line(), l.column()))
                .unwrap_or_default();
            format!(
                "the credential plugin's output is not an ExecCredential{at}; its output is not shown, as it may hold credentials"
            )
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn not_found() -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("deployments.apps \"web\" not found", "NotFound")
                .with_code(404)
                .boxed(),
        )
    }

    #[test]
    fn api_errors_read_as_the_servers_message_and_code() {
        assert_eq!(
            describe_kube(&not_found()),
            "deployments.apps \"web\" not found (404 NotFound)"
        );
        let wrapped = Error::Kube {
            cluster: "cluster-a".into(),
            source: not_found(),
        };
        assert_eq!(
            chain(&wrapped),
            "cluster cluster-a: deployments.apps \"web\" not found (404 NotFound)"
        );
    }

    #[test]
    fn the_detail_of_an_error_about_a_context_leaves_the_context_out() {
        let errors = [
            Error::ContextNotFound {
                context: "cluster-b".into(),
                kubeconfig_context: "kind-b".into(),
                remapped: String::new(),
                kubeconfig: "the kubeconfig".into(),
                available: "control".into(),
            },
            Error::ClientConfig {
                context: "cluster-b".into(),
                reason: "no user".into(),
            },
        ];
        for error in errors {
            let detail = error.detail();
            assert!(!detail.contains("cluster-b"), "{detail}");
            assert_eq!(error.to_string(), format!("context cluster-b: {detail}"));
        }
        let undeclared = Error::UndeclaredContext {
            context: "cluster-b".into(),
        };
        assert_eq!(
            undeclared.detail(),
            "not declared by any controller of this manager"
        );
        let member = Error::Member {
            member: "cluster-c".into(),
            reason: "its kubeconfig has no server".into(),
        };
        assert_eq!(member.detail(), "its kubeconfig has no server");
    }

    #[test]
    fn a_401_reads_as_everywhere_else() {
        let unauthorized = kube::Error::Api(
            kube::core::Status::failure("Unauthorized", "Unauthorized")
                .with_code(401)
                .boxed(),
        );
        assert_eq!(
            describe_kube(&unauthorized),
            "credentials were rejected (401 Unauthorized)"
        );
    }

    #[test]
    fn a_debug_dump_embedded_by_an_outer_error_is_removed() {
        #[derive(Debug, thiserror::Error)]
        #[error("sync failed: {0}")]
        struct Outer(#[source] kube::Error);
        let text = chain(&Outer(not_found()));
        assert!(!text.contains("Status {"), "{text}");
        assert!(text.contains("(404 NotFound)"), "{text}");
    }

    #[cfg(unix)]
    fn plugin_failed() -> kube::client::AuthError {
        use std::os::unix::process::ExitStatusExt as _;
        kube::client::AuthError::AuthExecRun {
            cmd: "get-token".into(),
            out: Box::new(std::process::Output {
                status: std::process::ExitStatus::from_raw(1 << 8),
                stdout: b"{\"status\":{\"token\":\"s3cr3t-token\"}}".to_vec(),
                stderr: b"refreshing s3cr3t-token failed".to_vec(),
            }),
        }
    }

    #[cfg(unix)]
    #[test]
    fn an_exec_plugins_output_never_reaches_the_words() {
        let direct = kube::Error::Auth(plugin_failed());
        let through_the_client_stack = kube::Error::Service(Box::new(plugin_failed()));
        let in_context = Error::Kube {
            cluster: "cluster-a".into(),
            source: kube::Error::Service(Box::new(plugin_failed())),
        };
        for text in [
            describe_kube(&direct),
            describe_kube(&through_the_client_stack),
            chain(&in_context),
            in_context.to_string(),
        ] {
            assert!(!text.contains("s3cr3t"), "{text}");
            assert!(
                text.contains("credential plugin (the user's `exec`) failed (exit status: 1)"),
                "{text}"
            );
        }
        assert!(chain(&in_context).starts_with("cluster cluster-a: "));
    }

    #[test]
    fn an_exec_plugins_unparsable_output_is_not_quoted() {
        let parse = serde_saphyr::from_str::<std::collections::BTreeMap<String, String>>(
            "token: s3cr3t-token\n  : [",
        )
        .unwrap_err();
        let error = kube::Error::Auth(kube::client::AuthError::AuthExecParse(Box::new(parse)));
        let text = describe_kube(&error);
        assert!(!text.contains("s3cr3t"), "{text}");
        assert!(text.contains("not an ExecCredential"), "{text}");
    }
}
