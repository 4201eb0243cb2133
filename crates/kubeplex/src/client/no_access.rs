//! Why a cluster's credentials could not be read: the one error of reading them, whichever part failed
//! (the TLS settings, the authorization, an exec plugin).

use crate::core::{chain, may_pass};

/// Why a cluster's credentials could not be read, and whether that may pass by itself (an exec plugin
/// that failed) or lasts until the configuration changes (one kube cannot use).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NoAccess {
    /// The failure in words, without an exec plugin's output.
    pub(crate) reason: String,
    /// Trying again, with the same configuration, may succeed.
    pub(crate) may_pass: bool,
}

impl NoAccess {
    /// The failure `error` describes.
    pub(crate) fn of(error: &(dyn std::error::Error + 'static)) -> Self {
        Self {
            reason: chain(error),
            may_pass: may_pass(error),
        }
    }
}

/// A failure of the configuration itself: it lasts until the configuration changes.
impl From<String> for NoAccess {
    fn from(reason: String) -> Self {
        Self {
            reason,
            may_pass: false,
        }
    }
}

impl std::fmt::Display for NoAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}
