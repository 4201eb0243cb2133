//! The webhook server's metrics: controller-runtime's names (requests by HTTP code, in flight, latency),
//! and kubeplex's own for what the handlers decided (denials) and could not (failures, by reason). Labels
//! are bounded by the paths the server was given.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::family::Family;

/// Sub-millisecond to 10 s: an answer from memory takes well under 5 ms, the bound a few seconds.
const LATENCY_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

type Labels<const N: usize> = [(&'static str, String); N];

/// Every family of the webhook server.
#[derive(Clone, Debug)]
pub(crate) struct WebhookMetrics {
    requests: Family<Labels<2>, Counter>,
    in_flight: Family<Labels<1>, Gauge>,
    latency: Family<Labels<1>, Histogram>,
    denials: Family<Labels<1>, Counter>,
    failures: Family<Labels<2>, Counter>,
}

impl Default for WebhookMetrics {
    /// Families registered nowhere: for unit tests.
    fn default() -> Self {
        Self::register(&mut Registry::default())
    }
}

impl WebhookMetrics {
    /// Creates the families and registers them in `registry`.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            requests: Family::default(),
            in_flight: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
            denials: Family::default(),
            failures: Family::default(),
        };
        let m = metrics.clone();
        registry.register(
            "controller_runtime_webhook_requests",
            "Webhook requests per path and HTTP status code of the answer",
            m.requests,
        );
        registry.register(
            "controller_runtime_webhook_requests_in_flight",
            "Webhook requests being answered, per path",
            m.in_flight,
        );
        registry.register(
            "controller_runtime_webhook_latency_seconds",
            "How long webhook requests took to answer, per path",
            m.latency,
        );
        registry.register(
            "kubeplex_webhook_denials",
            "Admission requests a handler refused, per path",
            m.denials,
        );
        registry.register(
            "kubeplex_webhook_failures",
            "Webhook requests a handler could not answer, per path and reason (panic, timeout, invalid), \
             answered by the failure policy",
            m.failures,
        );
        metrics
    }

    /// A request to `path` began: counted in flight until [`finished`](Self::finished).
    pub(crate) fn started(&self, path: &str) {
        self.in_flight
            .get_or_create(&[("webhook", path.to_owned())])
            .inc();
    }

    /// A request to `path` was answered with HTTP `code` after `seconds`.
    pub(crate) fn finished(&self, path: &str, code: u16, seconds: f64) {
        let webhook = [("webhook", path.to_owned())];
        self.in_flight.get_or_create(&webhook).dec();
        self.latency.get_or_create(&webhook).observe(seconds);
        let [webhook] = webhook;
        let code = ("code", code.to_string());
        self.requests.get_or_create(&[webhook, code]).inc();
    }

    /// A handler at `path` refused an object.
    pub(crate) fn denied(&self, path: &str) {
        self.denials
            .get_or_create(&[("webhook", path.to_owned())])
            .inc();
    }

    /// A handler at `path` could not answer, for `reason`.
    pub(crate) fn failed(&self, path: &str, reason: &'static str) {
        let labels = [("webhook", path.to_owned()), ("reason", reason.to_owned())];
        self.failures.get_or_create(&labels).inc();
    }
}
