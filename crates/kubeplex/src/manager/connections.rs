//! How the manager's clients connect to a cluster.

use super::Manager;
use crate::core::Context;

impl Manager {
    /// Connects to `cluster` over HTTP/1.1 only. By default every cluster is offered HTTP/2 (ALPN `h2`,
    /// then `http/1.1`): its reads and watches share one connection, PINGed when silent, and a server or
    /// TLS-terminating proxy that does not speak HTTP/2 gets HTTP/1.1 by itself. Force it where something on
    /// the way accepts `h2` but handles it badly: each request in flight then holds a connection of its
    /// own, and an outage is seen by the pings alone ([docs/ha.md]). `cluster` is a context, or a member
    /// by its name (`ContextName::new(name)`).
    ///
    /// [docs/ha.md]: https://github.com/kubeplex/kubeplex/blob/main/docs/ha.md
    pub fn http1_only(mut self, cluster: impl Context) -> Self {
        self.pool.http1_only.insert(cluster.name().to_owned());
        self
    }
}
