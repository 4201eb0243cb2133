//! A member's leave, as its Secret's deletion starts it: reported without waiting for it, the finalizer
//! removed once it has ended, and children abandoned recorded in an Event on the Secret.

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;

use super::super::kubeconfig::{config_from_kubeconfig, kubeconfig_in};
use super::super::secret_finalizer::{abandoned_event, has_finalizer};
use super::{Owned, Secrets};
use crate::core::chain;
use crate::members::changes::LeaveOutcome;
use crate::members::provider::LeavePolicy;

impl Secrets {
    /// The Secret is being deleted: its member leaves, then the finalizer goes.
    pub(super) async fn release(&mut self, secret: &Secret, member: &str) {
        let name = secret.name_any();
        if self.released.insert(name.clone()) {
            // Found being deleted by a process that never joined it (a restart): it joins with the
            // credentials the finalizer kept, so that its children can be deleted.
            if !self.members.contains_key(member)
                && self.sink.leave_policy() == LeavePolicy::Delete
                && has_finalizer(secret)
                && let Ok((_, text)) = kubeconfig_in(secret.data.as_ref(), &self.provider.key)
                && let allowlist = self.sink.kubeconfig_allowlist()
                && let Ok(config) = config_from_kubeconfig(text, None, allowlist).await
            {
                self.sink.join(member, config).await;
                self.members.insert(member.to_owned(), Owned::default());
            }
            if self.members.remove(member).is_some() {
                tracing::debug!(cluster = %member, secret = %name, "member's Secret is deleted; leaving");
                self.start_leave(member, &name).await;
                self.leaving.insert(name.clone());
                return; // The finalizer goes once the member has left.
            }
        }
        if self.leaving.contains(&name) {
            return;
        }
        self.set_finalizer(secret, false).await;
    }

    /// Reports that `member`, given by Secret `secret`, leaves, without waiting for the leave to end.
    pub(super) async fn start_leave(&mut self, member: &str, secret: &str) {
        let left = self.sink.leave_started(member).await;
        let (secret, member) = (secret.to_owned(), member.to_owned());
        self.leaves
            .push(Box::pin(async move { (secret, member, left.await) }));
    }

    /// `member`'s leave ended: its Secret's finalizer can go (the Secret is read again for that); children
    /// abandoned are recorded in an Event on the Secret.
    pub(super) async fn left(&mut self, secret: String, member: String, outcome: LeaveOutcome) {
        if let LeaveOutcome::Abandoned(reason) = &outcome {
            let (api, namespace) = (&self.api, &self.provider.namespace);
            if let Err(error) = abandoned_event(api, namespace, &secret, &member, reason).await {
                tracing::warn!(cluster = %member, error = %chain(&error), "recording the abandoned children in an Event failed");
            }
        }
        if self.leaving.remove(&secret) {
            self.revisit.push_back(secret.clone());
        }
        self.revisit_others(&member, &secret);
    }
}
