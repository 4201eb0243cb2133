//! A Pod's health, from its phase, its conditions and its containers' states, as the kubelet and the
//! scheduler write them: a Pod that crash-loops, cannot pull its image or cannot be scheduled is never
//! healthy.

use crate::core::child_health::Assessment;
use crate::core::projection::{ContainerView, Projection};

/// Why a container waits when it will not start by itself: the kubelet's words for a broken image, a
/// broken configuration, or a container that keeps crashing.
const STUCK: [&str; 8] = [
    "CrashLoopBackOff",
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
];

/// A Pod: `Healthy` when it runs and is ready (or has succeeded), `Degraded` when it failed, cannot be
/// scheduled, or a container is stuck (one of [`STUCK`]), else `Progressing`.
pub(crate) fn pod(child: &Projection) -> Assessment {
    if child.status.is_null() {
        return Assessment::progressing("no status yet");
    }
    let stuck = (child.containers(true).into_iter())
        .chain(child.containers(false))
        .find(|c| STUCK.contains(&c.waiting));
    let phase = child.status_str("phase").unwrap_or_default();
    match phase {
        "Succeeded" => return Assessment::healthy("succeeded"),
        "Failed" => {
            let said = [child.status_str("message"), child.status_str("reason")];
            let why = said.into_iter().flatten().find(|s| !s.is_empty());
            return Assessment::degraded(format!(
                "failed: {}",
                why.unwrap_or("its containers ended")
            ));
        }
        _ => {}
    }
    if let Some(container) = stuck {
        return Assessment::degraded(stuck_words(&container));
    }
    if let Some(scheduled) = child.condition("PodScheduled")
        && !scheduled.is_true()
    {
        let words = scheduled.words("PodScheduled");
        return match scheduled.reason {
            "Unschedulable" => Assessment::degraded(format!("unschedulable: {words}")),
            _ => Assessment::progressing(format!("not scheduled yet: {words}")),
        };
    }
    match child.condition("Ready") {
        Some(ready) if ready.is_true() && phase == "Running" => {
            Assessment::healthy("running, ready")
        }
        Some(ready) => Assessment::progressing(format!(
            "{}, not ready: {}",
            lower(phase),
            ready.words("Ready")
        )),
        None => Assessment::progressing(format!("{}, not ready yet", lower(phase))),
    }
}

/// `container web: CrashLoopBackOff (restarted 5 times)`.
fn stuck_words(container: &ContainerView<'_>) -> String {
    let restarts = match container.restart_count {
        0 => String::new(),
        1 => " (restarted once)".to_owned(),
        n => format!(" (restarted {n} times)"),
    };
    format!(
        "container {}: {}{restarts}",
        container.name, container.waiting
    )
}

/// A phase as a word in a sentence; `pending` for none.
fn lower(phase: &str) -> String {
    if phase.is_empty() {
        "pending".to_owned()
    } else {
        phase.to_lowercase()
    }
}
