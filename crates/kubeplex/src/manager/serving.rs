//! What the manager serves: the builders of its probe, metrics and webhook servers.

use super::Manager;
use crate::readiness::SecureMetrics;
use crate::webhook::Webhooks;

impl Manager {
    /// Serves `/startupz`, `/readyz`, `/livez` and `/metrics` on `address`, e.g. `0.0.0.0:8080` (port 0 picks
    /// one); without `/metrics` when [`secure_metrics`](Self::secure_metrics) serves it.
    pub fn probes(mut self, address: impl Into<String>) -> Self {
        self.probes = Some(address.into());
        self
    }

    /// Serves `/metrics` over HTTPS on an address of its own, only to scrapers whose bearer token the
    /// context's API server authenticates and allows `get` on `/metrics` ([docs/observability.md]); the
    /// probe port then serves the probes only, over plain HTTP as kubelet asks them. The context joins the
    /// manager's, like a Lease's.
    ///
    /// [docs/observability.md]: https://github.com/kubeplex/kubeplex/blob/main/docs/observability.md#secure-metrics
    pub fn secure_metrics(mut self, metrics: SecureMetrics) -> Self {
        self.secure_metrics = Some(metrics);
        self
    }

    /// Registers metrics of your own, served with kubeplex's on `/metrics` ([docs/observability.md]).
    ///
    /// ```
    /// use kubeplex::prometheus_client::metrics::counter::Counter;
    ///
    /// let deployed = Counter::<u64>::default();
    /// let manager = kubeplex::Manager::new()
    ///     .register_metrics(|registry| registry.register("myapp_deployed", "Apps deployed", deployed.clone()));
    /// # let _ = manager;
    /// ```
    ///
    /// [docs/observability.md]: https://github.com/kubeplex/kubeplex/blob/main/docs/observability.md
    pub fn register_metrics(
        mut self,
        register: impl FnOnce(&mut prometheus_client::registry::Registry),
    ) -> Self {
        register(&mut self.registry);
        self
    }

    /// Serves admission and conversion webhooks over HTTPS ([docs/webhooks.md]): on every replica, a
    /// standby included, their handlers reading the caches of the manager's controllers.
    ///
    /// [docs/webhooks.md]: https://github.com/kubeplex/kubeplex/blob/main/docs/webhooks.md
    pub fn webhooks(mut self, webhooks: Webhooks) -> Self {
        self.webhooks = Some(webhooks);
        self
    }
}
