//! Which of a ClusterProfile's conditions its member's join waits for, and what each says.

use serde::Deserialize;

/// The condition every ClusterProfile version defines: the cluster's control plane is healthy.
pub(super) const CONTROL_PLANE_HEALTHY: &str = "ControlPlaneHealthy";
/// The condition the Cluster Inventory API's KEP and conformance suite speak of, which some producers write.
pub(super) const JOINED: &str = "Joined";

/// What one ClusterProfile condition means for its member joining, set with
/// [`ClusterProfiles::join_condition`](super::ClusterProfiles::join_condition). By default
/// `ControlPlaneHealthy` is [`Required`](Self::Required) and `Joined` is [`IfPresent`](Self::IfPresent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum JoinCondition {
    /// The member joins only while the condition is present and `True`.
    Required,
    /// A condition not every producer writes: `False` or `Unknown` keeps the member from joining, a
    /// profile without it joins.
    IfPresent,
    /// Not looked at.
    Ignored,
}

/// One condition of a profile's status, as kubeplex reads it.
#[derive(Debug, Deserialize)]
pub(super) struct Condition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

/// The conditions a join waits for, in the order they are checked.
#[derive(Clone, Debug)]
pub(super) struct JoinConditions(Vec<(String, JoinCondition)>);

impl Default for JoinConditions {
    fn default() -> Self {
        Self(vec![
            (CONTROL_PLANE_HEALTHY.to_owned(), JoinCondition::Required),
            (JOINED.to_owned(), JoinCondition::IfPresent),
        ])
    }
}

impl JoinConditions {
    /// Condition `type_` now means `rule`.
    pub(super) fn set(&mut self, type_: String, rule: JoinCondition) {
        match self.0.iter_mut().find(|(t, _)| *t == type_) {
            Some(entry) => entry.1 = rule,
            None => self.0.push((type_, rule)),
        }
    }

    /// `None` when `conditions` let the member join; else why not, for the first condition that does not.
    pub(super) fn unmet(&self, conditions: &[Condition]) -> Option<String> {
        self.0.iter().find_map(|(type_, rule)| {
            let found = conditions.iter().find(|c| c.type_ == *type_);
            match (rule, found) {
                (JoinCondition::Ignored, _) | (JoinCondition::IfPresent, None) => None,
                (JoinCondition::Required, None) => Some(format!("it has no {type_} condition yet")),
                (_, Some(c)) if c.status == "True" => None,
                (_, Some(c)) => Some(c.why_not(type_)),
            }
        })
    }
}

impl Condition {
    /// `its Joined condition is False (Reason: message)`.
    fn why_not(&self, type_: &str) -> String {
        let mut reason = format!("its {type_} condition is {}", self.status);
        if let Some(why) = self.reason.as_deref().filter(|r| !r.is_empty()) {
            reason += &format!(" ({why}");
            if let Some(message) = self.message.as_deref().filter(|m| !m.is_empty()) {
                reason += &format!(": {message}");
            }
            reason += ")";
        }
        reason
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conditions(list: &[(&str, &str)]) -> Vec<Condition> {
        let list = list.iter().map(|(type_, status)| {
            serde_json::json!({ "type": type_, "status": status, "reason": "Seen", "message": "so" })
        });
        serde_json::from_value(serde_json::Value::Array(list.collect())).unwrap()
    }

    #[test]
    fn control_plane_healthy_is_required_and_joined_heeded_where_written() {
        let default = JoinConditions::default();
        let unmet = |list: &[(&str, &str)]| default.unmet(&conditions(list));
        assert_eq!(unmet(&[("ControlPlaneHealthy", "True")]), None);
        assert_eq!(
            unmet(&[]).as_deref(),
            Some("it has no ControlPlaneHealthy condition yet")
        );
        assert_eq!(
            unmet(&[("ControlPlaneHealthy", "Unknown")]).as_deref(),
            Some("its ControlPlaneHealthy condition is Unknown (Seen: so)")
        );
        assert_eq!(
            unmet(&[("ControlPlaneHealthy", "True"), ("Joined", "False")]).as_deref(),
            Some("its Joined condition is False (Seen: so)")
        );
        assert_eq!(
            unmet(&[("Joined", "True"), ("ControlPlaneHealthy", "True")]),
            None
        );
    }

    #[test]
    fn a_rule_set_replaces_the_default_or_adds_a_condition() {
        let mut rules = JoinConditions::default();
        rules.set(JOINED.to_owned(), JoinCondition::Required);
        rules.set(CONTROL_PLANE_HEALTHY.to_owned(), JoinCondition::Ignored);
        rules.set("Approved".to_owned(), JoinCondition::IfPresent);
        let unmet = |list: &[(&str, &str)]| rules.unmet(&conditions(list));
        assert_eq!(
            unmet(&[("ControlPlaneHealthy", "False")]).as_deref(),
            Some("it has no Joined condition yet")
        );
        assert_eq!(
            unmet(&[("ControlPlaneHealthy", "False"), ("Joined", "True")]),
            None
        );
        assert_eq!(
            unmet(&[("Joined", "True"), ("Approved", "False")]).as_deref(),
            Some("its Approved condition is False (Seen: so)")
        );
    }
}
