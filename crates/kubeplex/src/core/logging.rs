//! The log filter an operator built on kubeplex starts with.

/// A `tracing_subscriber::EnvFilter` directive for an operator's default output: warnings and errors, without
/// the client libraries' own lines about failures that kubeplex already reports.
///
/// kubeplex logs each failure of a context once when it starts or changes, and then about once a minute with
/// a count, every line naming the context. kube's client and watcher log the same failures again, per request
/// or per retry, without the context and as raw `Debug` dumps (`Api(Status { .. })`, `eof in poll: ..`, the
/// text of an unparsable response); this filter keeps only their errors. Use it when `RUST_LOG` is unset:
///
/// ```
/// let filter = tracing_subscriber::EnvFilter::try_from_default_env()
///     .unwrap_or_else(|_| kubeplex::DEFAULT_LOG_FILTER.into());
/// # let _ = filter;
/// ```
pub const DEFAULT_LOG_FILTER: &str =
    "warn,kube_client::client=error,kube_client::client::builder=off,kube_runtime::watcher=error";
