//! Pings: each context's API server is asked for `/version` at an interval, so that a cluster that stops
//! answering shows in `/readyz` even while its watch connections stay open (a frozen or partitioned server).

use std::sync::Arc;
use std::time::Duration;

use crate::error::chain;
use crate::health::Health;

/// How often each context's API server is asked for `/version` by default.
pub const DEFAULT_PING_INTERVAL: Duration = Duration::from_secs(10);
/// How long a ping may take before the context counts as unreachable.
const PING_TIMEOUT: Duration = Duration::from_secs(5);

/// Pings `context` every `interval`, recording whether it answers; a failure is logged when it changes.
pub(crate) async fn ping(
    context: String,
    client: kube::Client,
    health: Arc<Health>,
    interval: Duration,
) {
    let mut last: Option<String> = None;
    loop {
        let problem = match tokio::time::timeout(PING_TIMEOUT, client.apiserver_version()).await {
            Ok(Ok(_)) => None,
            Ok(Err(kube::Error::Api(status))) if status.code == 401 => {
                Some("credentials were rejected (401 Unauthorized)".to_owned())
            }
            Ok(Err(error)) => Some(format!("unreachable: {}", chain(&error))),
            Err(_) => Some(format!("unreachable: no answer within {PING_TIMEOUT:?}")),
        };
        if problem != last {
            match &problem {
                Some(problem) => tracing::warn!(%context, %problem, "ping failed"),
                None if last.is_some() => tracing::info!(%context, "answers pings again"),
                None => {}
            }
            last.clone_from(&problem);
        }
        health.pinged(&context, problem);
        tokio::time::sleep(interval).await;
    }
}
