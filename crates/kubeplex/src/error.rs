//! The errors of kubeplex.

/// What can go wrong in kubeplex; every variant names the context it concerns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A request to a context's API server failed.
    #[error("context {context}: {source}")]
    Kube {
        /// The context the request went to.
        context: String,
        /// What the client reported.
        #[source]
        source: kube::Error,
    },
}

/// A result with kubeplex's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
