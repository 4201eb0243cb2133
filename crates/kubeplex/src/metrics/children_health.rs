//! Children by health, per controller and cluster: read from the child caches at scrape time, not counted
//! as children change (a rollout changes health often; a scrape is rare), so a member that leaves, and
//! its caches with it, drops out.

/// A controller's children by the cluster they live in and their health, read at scrape time.
pub(crate) trait ChildrenByHealth: Send + Sync {
    /// `(cluster, health, children)` for every cluster with a child cache and every health.
    fn children_by_health(&self) -> Vec<(String, &'static str, u32)>;
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Weak};

    use crate::metrics::Metrics;

    use parking_lot::Mutex;
    use prometheus_client::registry::Registry;

    use super::*;

    /// Children by health as a test sets them.
    struct Fixed(Mutex<Vec<(String, &'static str, u32)>>);

    impl ChildrenByHealth for Fixed {
        fn children_by_health(&self) -> Vec<(String, &'static str, u32)> {
            self.0.lock().clone()
        }
    }

    fn scrape(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
        text
    }

    #[test]
    fn children_by_health_are_read_at_scrape_time_and_dropped_with_their_source() {
        let mut registry = Registry::default();
        let metrics = Metrics::register(&mut registry);
        let source = Arc::new(Fixed(Mutex::new(vec![
            ("cluster-a".into(), "Healthy", 2),
            ("member-b".into(), "Degraded", 1),
        ])));
        let weak: Weak<dyn ChildrenByHealth> = Arc::downgrade(&source) as _;
        metrics.report_children_health("apps", weak);
        let text = scrape(&registry);
        for line in [
            r#"kubeplex_children{controller="apps",cluster="cluster-a",health="Healthy"} 2"#,
            r#"kubeplex_children{controller="apps",cluster="member-b",health="Degraded"} 1"#,
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
        // The member left: its caches went, and its series with them.
        source
            .0
            .lock()
            .retain(|(context, _, _)| context != "member-b");
        assert!(!scrape(&registry).contains("member-b"));
        drop(source);
        assert!(
            !scrape(&registry).contains("kubeplex_children"),
            "the controller stopped"
        );
    }
}
