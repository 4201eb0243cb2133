//! How a Secret's handling ends: the finalizer set, and a failure retried with backoff and logged when it
//! changes, with the member the Secret names.

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;

use super::super::secret_finalizer::{MEMBER_FINALIZER, set_member_finalizer};
use super::Secrets;
use crate::core::chain;

impl Secrets {
    /// Adds or removes [`MEMBER_FINALIZER`]; one that could not be is tried again with backoff (the
    /// Secret is read again and handled as it is then).
    pub(super) async fn set_finalizer(&mut self, secret: &Secret, present: bool) {
        let name = secret.name_any();
        match set_member_finalizer(&self.api, secret, present).await {
            Ok(()) => self.handled(&name),
            Err(error) => {
                let doing = if present { "adding" } else { "removing" };
                let what = format!("{doing} finalizer {MEMBER_FINALIZER} failed");
                self.failed(&name, &what, &chain(&error));
            }
        }
    }

    /// `secret` was handled: nothing of it is pending; a failure logged before is said to be over.
    pub(super) fn handled(&mut self, secret: &str) {
        if self.retries.succeeded(secret) {
            let member = self.secrets.get(secret).map_or(secret, String::as_str);
            let name = self.secret_name(secret);
            tracing::info!(cluster = %member, secret = %name, "handling the Secret succeeded again");
        }
    }

    /// Handling `secret` failed: it is tried again with backoff. Logged at `warn` with the member it names
    /// when the failure changes and once in a while after, else at `debug`.
    pub(super) fn failed(&mut self, secret: &str, what: &str, problem: &str) {
        let failed = self.retries.failed(secret, &format!("{what}: {problem}"));
        let member = self.secrets.get(secret).map_or(secret, String::as_str);
        let (name, retry_in) = (self.secret_name(secret), failed.retry_in);
        match failed.warn {
            true => {
                tracing::warn!(cluster = %member, secret = %name, %problem, ?retry_in, "{what}; trying again with backoff")
            }
            false => {
                tracing::debug!(cluster = %member, secret = %name, %problem, ?retry_in, "{what}; trying again with backoff")
            }
        }
    }
}
