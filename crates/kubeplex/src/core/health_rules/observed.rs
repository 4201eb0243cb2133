//! Whether a kind's controller has seen a child's latest spec: the first question of most rules.

use crate::core::child_health::Assessment;
use crate::core::projection::Projection;

/// Not judged yet: the kind's controller has not seen the latest spec, or not written a status at all (the
/// API server itself may write an empty one).
pub(super) fn unobserved(child: &Projection) -> Option<Assessment> {
    if child.observed_generation().is_none() {
        return Some(Assessment::progressing(
            "not observed by its controller yet",
        ));
    }
    (!child.generation_observed()).then(|| {
        Assessment::progressing(format!(
            "generation {} not observed yet (observed {})",
            child.generation().unwrap_or_default(),
            child.observed_generation().unwrap_or_default()
        ))
    })
}
