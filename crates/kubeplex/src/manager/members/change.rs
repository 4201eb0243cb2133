//! One member change carried out by the member runner: a join (or a credential change), a problem, or a
//! leave, each on its own task, so that members never wait for each other.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;
use std::time::Duration;

use tokio::sync::oneshot;

use crate::client::{NoAccess, PoolConfig};
use crate::core::Error;
use crate::core::name_problem;
use crate::members::{LeaveOutcome, LeavePolicy, LeaveProgress, Slot};
use crate::readiness::{Asked, Phase, Pings, ask_identity};
use crate::runtime::Runtime;

/// What every change of the runner shares.
pub(super) struct Changes {
    pub(super) runtime: Arc<Runtime>,
    pub(super) pool: PoolConfig,
    pub(super) pings: Arc<Pings>,
    pub(super) policy: LeavePolicy,
    /// The fixed contexts: a member never takes one's name.
    pub(super) fixed: Vec<String>,
    /// After how long a leave stops waiting for a member that does not answer (`None`: never).
    pub(super) give_up_after: Option<Duration>,
    /// The last problem reported per member, so that a provider repeating it is logged once.
    pub(super) problems: Mutex<BTreeMap<String, String>>,
    /// The joins that failed for a cause that may pass, with their configuration and the cause, until the
    /// runner takes them to try again.
    pub(super) may_retry: Mutex<BTreeMap<String, (Box<kube::Config>, String)>>,
}

impl Changes {
    /// Joins `name` with `config`, or, when it is a member, rebuilds its client and lists its watches again.
    pub(super) async fn join(&self, name: String, config: Box<kube::Config>, slot: Slot) {
        let mut rejoined = self.runtime.members.client(&name).is_some();
        let change = if rejoined { "credentials" } else { "join" };
        let built = match name_problem(&name, &self.fixed) {
            Some(problem) => Err(NoAccess::from(problem)),
            // Kept for a retry: the plugin runs again with the same configuration.
            None => self
                .pool
                .build(&name, (*config).clone())
                .await
                .map_err(|failed| {
                    let context = name.clone();
                    let reason = Error::ClientConfig {
                        context,
                        reason: failed.reason,
                    };
                    NoAccess {
                        reason: reason.to_string(),
                        ..failed
                    }
                }),
        };
        let (client, access) = match built {
            Ok(built) => built,
            Err(failed) => {
                // The runner logs a failure it tries again; here it is only reported.
                self.report(&name, failed.reason.clone(), !failed.may_pass);
                if failed.may_pass {
                    let mut may_retry = self.may_retry.lock();
                    may_retry.insert(name.clone(), (config, failed.reason));
                }
                self.runtime
                    .metrics
                    .member_changes()
                    .ended(change, "failed");
                return;
            }
        };
        // Before the member is written to through these credentials: which cluster do they reach?
        let health = &self.runtime.readiness;
        let asked = ask_identity(client.clone(), health.identities().source()).await;
        let was = rejoined.then(|| health.identities().of(&name)).flatten();
        if let (Some(was), Asked::Known(now)) = (was, &asked)
            && was != *now
        {
            tracing::warn!(cluster = %name, identity = %now, %was, "member's credentials now reach another cluster: the member as it was leaves by the leave policy (through its old credentials), and the new cluster joins under its name");
            self.leave(name.clone(), slot, Vec::new()).await;
            self.runtime.members.expect(&name, true);
            rejoined = false;
        }
        health.declare(&name, false);
        health.connected(&name, None);
        health
            .identities()
            .declare_member(&name, access.identity().clone());
        health.identifying(&name);
        health.identified(&name, asked);
        self.lock().remove(&name);
        let answers = access.answers();
        self.pings.add(&name, access);
        if rejoined {
            // Its watches list again with the new client: nothing is missed.
            self.close_watches(&name);
        } else {
            health.member_phase(&name, Some(Phase::Joining));
        }
        self.runtime.members.answers_on(&name, answers);
        self.runtime.members.joined(&name, client).await;
        // Requests go through the new client from now on, the shards' included.
        self.runtime.forget_member_clients(&name);
        self.runtime.members.expect(&name, false);
        if rejoined {
            tracing::info!(cluster = %name, "member's credentials changed: its client is rebuilt and its watches list again");
        } else {
            tracing::info!(cluster = %name, "member joined: its children are put there once its watches have listed");
        }
        self.runtime.metrics.member_changes().ended(change, "done");
    }

    /// Member `name` cannot be used: `reason` shows in `/readyz`; logged when it changes.
    pub(super) fn unhealthy(&self, name: &str, reason: String) {
        self.report(name, reason, true);
    }

    /// As [`unhealthy`](Self::unhealthy), logged only when `log` says so.
    fn report(&self, name: &str, reason: String, log: bool) {
        let health = &self.runtime.readiness;
        health.declare(name, false);
        let error = Error::Member {
            member: name.to_owned(),
            reason: reason.clone(),
        };
        health.connected(name, Some(&error));
        if !self.runtime.members.contains(name) {
            // It holds nothing this process put there: no parent's deletion waits for it.
            self.runtime.members.expect(name, false);
            health.member_phase(name, Some(Phase::Joining));
        }
        let mut problems = self.lock();
        if problems.get(name) != Some(&reason) {
            if log {
                tracing::warn!(cluster = %name, problem = %reason, "member cannot be used");
            }
            problems.insert(name.to_owned(), reason);
        }
    }

    /// `name` leaves: the leave policy is carried out (waiting, under `delete`, for a member that does not
    /// answer, without holding `slot`), then every trace of it goes: watches, pings, readiness, metrics.
    pub(super) async fn leave(
        &self,
        name: String,
        slot: Slot,
        done: Vec<oneshot::Sender<LeaveOutcome>>,
    ) {
        let runtime = &self.runtime;
        let mut outcome = LeaveOutcome::Done;
        if runtime.members.client(&name).is_some() {
            runtime
                .readiness
                .member_phase(&name, Some(Phase::Leaving(None)));
            let health = runtime.readiness.clone();
            let progress = LeaveProgress::new(&name, slot, self.give_up_after, health);
            outcome = runtime
                .members
                .leave(&name, self.policy, Arc::new(progress))
                .await;
            self.close_watches(&name);
            match &outcome {
                LeaveOutcome::Abandoned(reason) => {
                    tracing::warn!(cluster = %name, policy = ?self.policy, problem = %reason, "member left the fleet; its children there were abandoned");
                }
                _ => {
                    tracing::info!(cluster = %name, policy = ?self.policy, "member left the fleet")
                }
            }
        }
        runtime.members.expect(&name, false);
        runtime.forget_member_clients(&name);
        self.pings.remove(&name);
        runtime.readiness.member_phase(&name, None);
        runtime.readiness.forget_context(&name);
        // No series names it any more: a fleet that turns over does not grow /metrics.
        runtime.metrics.context_left(&name);
        self.lock().remove(&name);
        let result = match outcome {
            LeaveOutcome::Abandoned(_) => "abandoned",
            _ => "done",
        };
        runtime.metrics.member_changes().ended("leave", result);
        for done in done {
            let _ = done.send(outcome.clone());
        }
    }

    /// Closes every watch in member `name`, whichever controllers share it: their tasks end and their
    /// caches are freed.
    pub(super) fn close_watches(&self, name: &str) {
        (self.runtime.watches).release_matching(|key| key.context == name);
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, BTreeMap<String, String>> {
        self.problems.lock()
    }
}
