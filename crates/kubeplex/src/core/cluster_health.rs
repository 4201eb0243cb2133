//! A parent's children in one cluster, summed up for its status: how many are healthy, and the worst one.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::child_health::{ChildHealth, Health, worst};

/// The health of a parent's children in one cluster: the worst child's health, how many children are in
/// each health, and the worst child with its reason (`namespace-b/web: 0/3 replicas available`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ClusterHealth {
    /// The worst child's health (`Healthy` when every child is).
    pub state: Health,
    /// Children healthy.
    #[schemars(with = "i32")]
    pub healthy: u32,
    /// Children suspended (held on purpose).
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(with = "i32")]
    pub suspended: u32,
    /// Children progressing.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(with = "i32")]
    pub progressing: u32,
    /// Children being deleted.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(with = "i32")]
    pub terminating: u32,
    /// Children whose health is unknown (the cluster is unreachable, or not listed yet).
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(with = "i32")]
    pub unknown: u32,
    /// Children declared but not in the cluster.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(with = "i32")]
    pub missing: u32,
    /// Children degraded.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(with = "i32")]
    pub degraded: u32,
    /// The worst child that is not healthy and why (`namespace-b/web: 0/3 replicas available`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worst: Option<String>,
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if"
)]
fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl ClusterHealth {
    /// The summary of `children` (their order decides between children equally bad); `None` when there are
    /// none.
    pub(crate) fn of(children: &[ChildHealth]) -> Option<Self> {
        let worst = worst(children)?;
        let mut summary = Self {
            state: worst.health,
            healthy: 0,
            suspended: 0,
            progressing: 0,
            terminating: 0,
            unknown: 0,
            missing: 0,
            degraded: 0,
            worst: (worst.health != Health::Healthy)
                .then(|| format!("{}: {}", worst.full_name(), worst.reason)),
        };
        for child in children {
            *summary.count_mut(child.health) += 1;
        }
        Some(summary)
    }

    fn count_mut(&mut self, health: Health) -> &mut u32 {
        match health {
            Health::Healthy => &mut self.healthy,
            Health::Suspended => &mut self.suspended,
            Health::Progressing => &mut self.progressing,
            Health::Terminating => &mut self.terminating,
            Health::Unknown => &mut self.unknown,
            Health::Missing => &mut self.missing,
            Health::Degraded => &mut self.degraded,
        }
    }

    /// How many children are in `health`.
    pub fn count(&self, health: Health) -> u32 {
        match health {
            Health::Healthy => self.healthy,
            Health::Suspended => self.suspended,
            Health::Progressing => self.progressing,
            Health::Terminating => self.terminating,
            Health::Unknown => self.unknown,
            Health::Missing => self.missing,
            Health::Degraded => self.degraded,
        }
    }

    /// How many children were judged.
    pub fn children(&self) -> u32 {
        (self.healthy + self.suspended + self.progressing + self.terminating)
            + (self.unknown + self.missing + self.degraded)
    }

    /// One line for people: `Progressing: 1/2 children healthy (namespace-b/web: 0/3 replicas available)`.
    pub fn summary(&self) -> String {
        let counted = format!(
            "{}: {}/{} children healthy",
            self.state.as_str(),
            self.healthy,
            self.children()
        );
        match &self.worst {
            Some(worst) => format!("{counted} ({worst})"),
            None => counted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::child_health::Assessment;

    fn child(name: &str, health: Health, reason: &str) -> ChildHealth {
        ChildHealth::without_projection(Some("namespace-b"), name, Assessment::new(health, reason))
    }

    #[test]
    fn the_summary_counts_and_names_the_worst_child() {
        let summary = ClusterHealth::of(&[
            child("api", Health::Healthy, "1/1 replicas available"),
            child("web", Health::Progressing, "0/3 replicas available"),
        ])
        .unwrap();
        assert_eq!(
            summary.summary(),
            "Progressing: 1/2 children healthy (namespace-b/web: 0/3 replicas available)"
        );
        assert_eq!((summary.healthy, summary.progressing), (1, 1));
        let healthy = ClusterHealth::of(&[child("api", Health::Healthy, "ready")]).unwrap();
        assert_eq!(healthy.summary(), "Healthy: 1/1 children healthy");
        assert_eq!(
            serde_json::to_value(&healthy).unwrap(),
            serde_json::json!({ "state": "Healthy", "healthy": 1 })
        );
        assert_eq!(ClusterHealth::of(&[]), None);
    }
}
