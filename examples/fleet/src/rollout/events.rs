//! Which changes of a rollout deserve a Kubernetes Event on the parent: it halts, it resumes, it completes.
//! Each is told once, when `status.rollout` changes so, never on every reconcile.

use crate::app::{RolloutPhase, RolloutStatus};

/// An Event a rollout's change calls for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RolloutEvent {
    /// `Warning` (a halt) rather than `Normal`.
    pub warning: bool,
    /// `RolloutHalted`, `RolloutResumed` or `RolloutComplete`.
    pub reason: &'static str,
    /// What happened, naming the cluster and why.
    pub message: String,
}

/// The Events a rollout going from `before` (the parent's `status.rollout` before this reconcile) to `now`
/// calls for: `RolloutHalted` when it halts (or halts at another cluster or for a rollout of another
/// image); `RolloutResumed` when a halted rollout of the same image is no longer halted; `RolloutComplete`
/// when a rollout that was progressing or halted, or that had another image, has given its image to every
/// cluster. Nothing without a rollout before (a new parent, or `spec.rollout` just added: nothing was
/// rolled out).
pub fn rollout_events(before: Option<&RolloutStatus>, now: &RolloutStatus) -> Vec<RolloutEvent> {
    let Some(before) = before else {
        return match now.phase {
            RolloutPhase::Halted => vec![halted(now)],
            _ => Vec::new(),
        };
    };
    let same_image = before.image == now.image;
    let mut events = Vec::new();
    let was_halted = before.phase == RolloutPhase::Halted;
    if was_halted && same_image && now.phase != RolloutPhase::Halted {
        let cluster = before.cluster.as_deref().unwrap_or("its cluster");
        events.push(RolloutEvent {
            warning: false,
            reason: "RolloutResumed",
            message: format!(
                "rollout of {}: {cluster} is no longer Degraded; {}",
                now.image, now.message
            ),
        });
    }
    let halted_so = was_halted && same_image && before.cluster == now.cluster;
    if now.phase == RolloutPhase::Halted && !halted_so {
        events.push(halted(now));
    }
    let completed = before.phase == RolloutPhase::Complete && same_image;
    if now.phase == RolloutPhase::Complete && !completed {
        events.push(RolloutEvent {
            warning: false,
            reason: "RolloutComplete",
            message: format!("rollout of {}: {}", now.image, now.message),
        });
    }
    events
}

fn halted(now: &RolloutStatus) -> RolloutEvent {
    RolloutEvent {
        warning: true,
        reason: "RolloutHalted",
        message: format!("rollout of {}: {}", now.image, now.message),
    }
}
