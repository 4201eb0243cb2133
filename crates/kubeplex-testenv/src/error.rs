//! What can go wrong while starting or driving a test environment.

use std::time::Duration;

/// An error of the test environment; those about one cluster name it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The builder was given no cluster.
    #[error("no clusters: name at least one, e.g. `control`")]
    NoClusters,
    /// A cluster name cannot serve as a kubeconfig context and directory name.
    #[error("invalid cluster name {name:?}: {reason}")]
    InvalidClusterName {
        /// The name as given.
        name: String,
        /// What is wrong with it (for a name that is not a DNS-1123 label, in the words `#[controller]` and
        /// the kubeplex runtime use for one).
        reason: String,
    },
    /// A cluster name that the environment does not have.
    #[error("no cluster named {name:?} in this environment (it has: {known})")]
    UnknownCluster {
        /// The name asked for.
        name: String,
        /// The environment's clusters, comma-separated.
        known: String,
    },
    /// The kube-apiserver, etcd or kube-controller-manager programs could not be found or built.
    #[error("test cluster binaries: {0}")]
    Binaries(String),
    /// Generating certificates or keys failed.
    #[error("certificates: {0}")]
    Pki(String),
    /// The kubeconfig cannot be written where it was asked to be.
    #[error("cannot write the kubeconfig {path}: {source}")]
    KubeconfigPath {
        /// The path asked for.
        path: std::path::PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A file or directory operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, with the path.
        what: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A cluster's process exited or never became ready.
    #[error("cluster {cluster}: {problem}\n--- last lines of {program}'s log ---\n{log_tail}")]
    NotReady {
        /// The cluster.
        cluster: String,
        /// `kube-apiserver`, `etcd` or `kube-controller-manager`.
        program: &'static str,
        /// What happened, e.g. "not ready after 60s: connection refused".
        problem: String,
        /// The end of the process's log, where the cause usually is.
        log_tail: String,
    },
    /// A request to a cluster failed.
    #[error("cluster {cluster}: {source}")]
    Kube {
        /// The cluster.
        cluster: String,
        /// What the client reported.
        #[source]
        source: kube::Error,
    },
    /// The generated kubeconfig could not be turned into a client configuration.
    #[error("cluster {cluster}: kubeconfig: {source}")]
    Kubeconfig {
        /// The cluster.
        cluster: String,
        /// What the kubeconfig loader reported.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// A custom resource definition was not established in time.
    #[error("cluster {cluster}: CRD {crd} not established after {waited:?}")]
    CrdNotEstablished {
        /// The cluster.
        cluster: String,
        /// The CRD's name.
        crd: String,
        /// How long we waited.
        waited: Duration,
    },
    /// A service-account token could not be had.
    #[error("cluster {cluster}: a token for the ServiceAccount {service_account}: {problem}")]
    Token {
        /// The cluster.
        cluster: String,
        /// `namespace/name`.
        service_account: String,
        /// What went wrong.
        problem: String,
    },
    /// The audit log was asked for, but the environment was started without
    /// [`TestEnvBuilder::audit_log`](crate::TestEnvBuilder::audit_log).
    #[error("cluster {cluster}: no audit log: start the environment with `.audit_log(true)`")]
    NoAuditLog {
        /// The cluster.
        cluster: String,
    },
    /// A condition polled with [`try_eventually`](crate::try_eventually) did not hold in time.
    #[error("{what}: not within {within:?}; last observed: {last}")]
    NotEventually {
        /// What was waited for.
        what: String,
        /// How long.
        within: Duration,
        /// What the last run of the check saw instead.
        last: String,
    },
    /// The shared environment failed to start in an earlier test of this binary.
    #[error("the shared test environment failed to start: {0}")]
    SharedStartFailed(String),
    /// A stop, start, freeze or replace of a cluster this environment attached to ([`ATTACH_VAR`](crate::ATTACH_VAR)):
    /// another process runs it, for other tests too.
    #[error(
        "cluster {cluster} is attached to (another process runs it): start an environment of your own to stop, freeze or replace it"
    )]
    Attached {
        /// The cluster.
        cluster: String,
    },
    /// The clusters of an attach file ([`ATTACH_VAR`](crate::ATTACH_VAR)) do not have what the builder asks
    /// for.
    #[error("attaching to the clusters described in {path}: {problem}")]
    Attach {
        /// The file that describes them.
        path: std::path::PathBuf,
        /// What is wrong or missing.
        problem: String,
    },
    /// A GET ([`http_get`](crate::http_get)) got no whole HTTP response.
    #[error("GET {path}: {problem}")]
    Http {
        /// The path asked for.
        path: String,
        /// What went wrong: the connection's error, the time limit, or what came instead of a response.
        problem: String,
    },
    /// A relay ([`TestEnv::relay`](crate::TestEnv::relay)) could not start, or a kubeconfig to route
    /// through it has no cluster of its name.
    #[error("cluster {cluster}: relay: {problem}")]
    Relay {
        /// The cluster the relay is in front of.
        cluster: String,
        /// What went wrong.
        problem: String,
    },
}

/// A result with the test environment's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) fn io_error(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}
