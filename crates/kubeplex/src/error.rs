//! The errors of kubeplex.

/// What can go wrong in kubeplex; every variant that concerns a context names it.
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
        "context {context}: the kubeconfig has no context {kubeconfig_context:?} (it has: {available})"
    )]
    ContextNotFound {
        /// The context as the controller declared it.
        context: String,
        /// The kubeconfig context it maps to (the same name unless remapped).
        kubeconfig_context: String,
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
    /// A reconcile asked for a context that no registered controller declared.
    #[error("context {context} was not declared by any controller of this manager")]
    UndeclaredContext {
        /// The context asked for.
        context: String,
    },
    /// A reconcile declared a child the controller's plan does not allow.
    #[error("context {context}: child {kind}: {reason}")]
    InvalidChild {
        /// The context the child was meant for.
        context: String,
        /// The child's kind.
        kind: String,
        /// What is wrong.
        reason: String,
    },
    /// A request to a context's API server failed.
    #[error("context {context}: {source}")]
    Kube {
        /// The context the request went to.
        context: String,
        /// What the client reported.
        #[source]
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
    /// A required context cannot be used, so the manager cannot start; each reason names its context.
    #[error("cannot start: {reasons}")]
    Startup {
        /// Why, one reason per context, separated by `; `.
        reasons: String,
    },
    /// The manager could not install its signal handlers.
    #[error("installing signal handlers: {0}")]
    Signals(#[source] std::io::Error),
}

/// A result with kubeplex's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
