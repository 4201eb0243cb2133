//! The log filter an operator built on kubeplex starts with.

/// A `tracing_subscriber::EnvFilter` directive for an operator's default output: warnings and errors, without
/// the client libraries' own lines about failures that kubeplex already reports.
///
/// kubeplex logs each failure of a cluster once when it starts or changes, and then about once a minute with
/// a count, every line naming the cluster. kube's client and watcher log the same failures again, per request
/// or per retry, without the cluster and as raw `Debug` dumps (`Api(Status { .. })`, `eof in poll: ..`, the
/// text of an unparsable response); this filter keeps only their errors. Use it when `RUST_LOG` is unset:
///
/// ```
/// let filter = tracing_subscriber::EnvFilter::try_from_default_env()
///     .unwrap_or_else(|_| kubeplex::logging::DEFAULT_LOG_FILTER.into());
/// # let _ = filter;
/// ```
pub const DEFAULT_LOG_FILTER: &str =
    "warn,kube_client::client=error,kube_client::client::builder=off,kube_runtime::watcher=error";

/// The directives of [`DEFAULT_LOG_FILTER`] that quiet the client libraries (everything but its level).
pub const QUIET_DIRECTIVES: [&str; 3] = [
    "kube_client::client=error",
    "kube_client::client::builder=off",
    "kube_runtime::watcher=error",
];

/// A user's filter (`RUST_LOG`, say) with kubeplex's [`QUIET_DIRECTIVES`] added, so that `RUST_LOG=warn` or
/// `RUST_LOG=info` does not bring back the client libraries' repeats (`ERROR kube_client::client::builder:
/// failed with status 500` for every refused apply). A quiet directive is left out when the user's filter
/// names its target or a parent of it (`kube_client=debug` is kept as asked); an empty filter is
/// [`DEFAULT_LOG_FILTER`].
///
/// ```
/// let rust_log = std::env::var("RUST_LOG").unwrap_or_default();
/// let filter = tracing_subscriber::EnvFilter::try_new(kubeplex::logging::log_filter(&rust_log))
///     .unwrap_or_else(|_| kubeplex::logging::DEFAULT_LOG_FILTER.into());
/// # let _ = filter;
/// assert_eq!(
///     kubeplex::logging::log_filter("info"),
///     "info,kube_client::client=error,kube_client::client::builder=off,kube_runtime::watcher=error"
/// );
/// ```
pub fn log_filter(user: &str) -> String {
    let user = user.trim().trim_matches(',');
    if user.is_empty() {
        return DEFAULT_LOG_FILTER.to_owned();
    }
    // The targets the user's directives name (a bare level names none).
    let named: Vec<&str> = user
        .split(',')
        .filter_map(|d| {
            d.split_once('=')
                .map(|(target, _)| target.split('[').next().unwrap_or(target).trim())
        })
        .collect();
    let covers = |quiet: &str| {
        let target = quiet.split_once('=').map_or(quiet, |(t, _)| t);
        named
            .iter()
            .any(|n| target == *n || target.starts_with(&format!("{n}::")))
    };
    let mut all = vec![user.to_owned()];
    all.extend(
        QUIET_DIRECTIVES
            .iter()
            .filter(|q| !covers(q))
            .map(|q| (*q).to_owned()),
    );
    all.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_the_levels_and_the_quiet_directives() {
        assert_eq!(
            DEFAULT_LOG_FILTER,
            format!("warn,{}", QUIET_DIRECTIVES.join(","))
        );
        assert_eq!(log_filter(""), DEFAULT_LOG_FILTER);
        assert_eq!(log_filter("  "), DEFAULT_LOG_FILTER);
    }

    #[test]
    fn a_users_level_gets_the_quiet_directives_and_their_own_targets_win() {
        assert_eq!(log_filter("warn"), DEFAULT_LOG_FILTER);
        assert_eq!(
            log_filter("info,kube_client=debug"),
            "info,kube_client=debug,kube_runtime::watcher=error"
        );
        assert_eq!(
            log_filter("debug,kube_runtime::watcher=info"),
            "debug,kube_runtime::watcher=info,kube_client::client=error,kube_client::client::builder=off"
        );
        // A target that only shares a prefix of letters is not a parent.
        assert!(log_filter("kube=trace").contains("kube_client::client=error"));
    }
}
