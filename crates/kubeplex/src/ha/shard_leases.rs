//! The Lease loop of sharded mode. Each round, one list of the group's Leases, then:
//! 1. renew this replica's member Lease — while that succeeds in time, the replica is a member and its
//!    clients may write at all (the pool's fence, as with leader election);
//! 2. the live members are those whose Lease changed within a lease duration (judged by the local clock
//!    when the change was seen, as in [`super::leader::decide`]);
//! 3. for each shard, rendezvous hashing over the live members names its owner; the owner takes or renews
//!    the shard's Lease (opening the shard's fence until the renewal's deadline), and a replica that holds a
//!    shard it no longer owns closes the fence *first* and then releases the Lease, so its successor takes
//!    over at its next round.
//!
//! A replica that dies stops renewing: its member Lease goes stale, so the others stop counting it, and its
//! shard Leases go stale, so their new owners take them after a lease duration. On shutdown a replica
//! releases its shards and deletes its member Lease, and the others take over at once.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;

use super::leader::{Decision, LeaderElection, Observed, decide, taken_over};
use super::shard_state::ShardState;
use super::sharding::{GROUP_LABEL, KIND_LABEL, Sharding};
use crate::client::{Fence, Role};
use crate::core::chain;
use crate::readiness::{Readiness, ShardingReport};

/// What a replica remembers between rounds.
struct Memory {
    /// Per member Lease name: its record and when it last changed.
    members: HashMap<String, Observed>,
    /// Per shard: the same, for its Lease.
    shards: Vec<Observed>,
    /// Per shard: the election that stands for its Lease (name and timings).
    elections: Vec<LeaderElection>,
}

/// What the Lease loop works with.
pub(super) struct Group {
    /// Leases in the group's namespace, through a client the fences do not hold back.
    pub(crate) api: Api<Lease>,
    pub(crate) sharding: Sharding,
    /// Each shard's Lease name, in the order of `state`'s shards.
    pub(crate) leases: Vec<String>,
    pub(crate) state: Arc<ShardState>,
    /// The pool's fence: open while this replica's member Lease is renewed.
    pub(crate) member: Fence,
    /// Whether this replica is a member now: its controllers run while it is.
    pub(crate) role: watch::Sender<Role>,
    pub(crate) readiness: Arc<Readiness>,
}

/// Runs sharded mode until `stop` turns true, then gives everything up.
pub(super) async fn run(group: Group, mut stop: watch::Receiver<bool>) {
    let Group {
        api,
        sharding,
        leases,
        state,
        member,
        role,
        readiness,
    } = group;
    let lease = &sharding.lease;
    let mut memory = Memory {
        members: HashMap::new(),
        shards: leases.iter().map(|_| Observed::default()).collect(),
        elections: leases
            .iter()
            .map(|name| LeaderElection {
                name: name.clone(),
                ..lease.clone()
            })
            .collect(),
    };
    let mut last_problem: Option<String> = None;
    loop {
        let sent = Instant::now();
        let bounded = tokio::time::timeout(
            lease.renew_deadline,
            round(&api, &sharding, &state, &member, &mut memory, sent),
        );
        let outcome = bounded.await.unwrap_or_else(|_| {
            Err(format!(
                "no answer within {:?} from context {}",
                lease.renew_deadline, lease.context
            ))
        });
        let members = outcome.as_ref().ok().cloned();
        let problem = outcome.err();
        if problem != last_problem {
            if let Some(problem) = &problem {
                tracing::warn!(cluster = %lease.context, group = %sharding.group(), %problem, "sharding: the Leases cannot be read or written");
            }
            last_problem = problem;
        }
        let held: Vec<bool> = (0..state.names().len()).map(|s| state.holds(s)).collect();
        let owned: Vec<String> = state
            .names()
            .iter()
            .zip(&held)
            .filter(|(_, h)| **h)
            .map(|(n, _)| n.clone())
            .collect();
        state.set_held(held);
        let mut report = ShardingReport {
            identity: lease.identity.clone(),
            ..readiness.sharding().unwrap_or_default()
        };
        if let Some(members) = members {
            report.members = members;
        }
        if report.shards != owned {
            tracing::info!(cluster = %lease.context, identity = %lease.identity, shards = ?owned, "shards held changed");
        }
        report.shards = owned;
        readiness.set_sharding(report);
        role.send_if_modified(|current| {
            let next = Role {
                leader: member.allows_writes(),
                holder: None,
            };
            let changed = *current != next;
            *current = next;
            changed
        });
        tokio::select! {
            _ = stop.wait_for(|stopped| *stopped) => break,
            () = tokio::time::sleep(lease.retry_period) => {}
        }
    }
    leave(&api, &sharding, &state, &member, &memory).await;
}

/// One round; the live members on success, else why not, in words.
async fn round(
    api: &Api<Lease>,
    sharding: &Sharding,
    state: &ShardState,
    member: &Fence,
    memory: &mut Memory,
    sent: Instant,
) -> Result<Vec<String>, String> {
    let lease = &sharding.lease;
    let selector = format!("{GROUP_LABEL}={}", lease.name);
    let listed = api
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| chain(&e))?;
    // Fences count from when the round was sent, other replicas' records from when the list came back
    // (a slow list shows them as they were on arrival): both err on the side of no two writers.
    let seen = Instant::now();
    let by_name: BTreeMap<String, Lease> = listed
        .items
        .into_iter()
        .filter_map(|l| Some((l.metadata.name.clone()?, l)))
        .collect();
    let own = sharding.member_lease(&lease.identity);
    let renewed = renew_member(api, sharding, &own, by_name.get(&own)).await;
    if renewed.is_ok() {
        member.open_for(sent, lease.renew_deadline);
    }
    let mut members: Vec<String> = Vec::new();
    memory.members.retain(|name, _| by_name.contains_key(name));
    for (name, item) in &by_name {
        if !is_kind(item, "member") || *name == own {
            continue;
        }
        // A member Lease is named after its holder: one named otherwise is no replica's (someone else
        // wrote it), and counting its holder would hand shards to a member that never reconciles them.
        let holder = item
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref());
        if holder.is_none_or(|holder| sharding.member_lease(holder) != *name) {
            continue;
        }
        let observed = memory.members.entry(name.clone()).or_default();
        // Read as another replica's Lease: `decide` says `Wait` (for its holder) while its record is fresh.
        if let Decision::Wait(holder) = decide(Some(item), lease, observed, seen) {
            members.push(holder);
        }
    }
    if member.allows_writes() {
        members.push(lease.identity.clone());
    }
    members.sort();
    members.dedup();
    for (shard, name) in state.names().iter().enumerate() {
        let election = &memory.elections[shard];
        let found = by_name.get(&election.name);
        let decision = decide(found, election, &mut memory.shards[shard], seen);
        let ours = member.allows_writes()
            && super::rendezvous::owner(name, &members) == Some(lease.identity.as_str());
        let fence = state.fence(shard);
        if !ours {
            let held_by_us = found
                .and_then(|l| l.spec.as_ref())
                .and_then(|s| s.holder_identity.as_deref())
                == Some(lease.identity.as_str());
            if held_by_us || fence.allows_writes() {
                fence.close();
                if let Some(found) = found.filter(|_| held_by_us) {
                    release(api, &lease.context, found.clone()).await;
                }
            }
            continue;
        }
        let written = match decision {
            Decision::Wait(_) => continue,
            Decision::Create => {
                let lease = Lease {
                    metadata: labelled(&election.name, &lease.namespace, &lease.name, "shard"),
                    spec: Some(taken_over(
                        LeaseSpec::default(),
                        election,
                        MicroTime(Timestamp::now()),
                    )),
                };
                api.create(&PostParams::default(), &lease).await
            }
            Decision::Write(spec) => {
                let mut lease = found.cloned().expect("a write follows a read lease");
                lease.spec = Some(spec);
                api.replace(&election.name, &PostParams::default(), &lease)
                    .await
            }
        };
        match written {
            Ok(_) => fence.open_for(sent, lease.renew_deadline),
            // Another replica wrote first: its, for now; we try again next round.
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => return Err(format!("shard Lease {}: {}", election.name, chain(&error))),
        }
    }
    renewed.map(|()| members)
}

fn is_kind(lease: &Lease, kind: &str) -> bool {
    lease
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(KIND_LABEL))
        .is_some_and(|k| k == kind)
}

fn labelled(name: &str, namespace: &str, group: &str, kind: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        labels: Some(
            [
                (GROUP_LABEL.to_owned(), group.to_owned()),
                (KIND_LABEL.to_owned(), kind.to_owned()),
            ]
            .into(),
        ),
        ..ObjectMeta::default()
    }
}

/// Creates or renews this replica's member Lease.
async fn renew_member(
    api: &Api<Lease>,
    sharding: &Sharding,
    own: &str,
    found: Option<&Lease>,
) -> Result<(), String> {
    let lease = &sharding.lease;
    let stamp = MicroTime(Timestamp::now());
    let spec = |transitions| LeaseSpec {
        holder_identity: Some(lease.identity.clone()),
        renew_time: Some(stamp.clone()),
        lease_duration_seconds: i32::try_from(lease.lease_duration.as_secs()).ok(),
        lease_transitions: transitions,
        ..LeaseSpec::default()
    };
    let result = match found {
        None => {
            let new = Lease {
                metadata: labelled(own, &lease.namespace, &lease.name, "member"),
                spec: Some(spec(Some(0))),
            };
            api.create(&PostParams::default(), &new).await
        }
        Some(found) => {
            let mut renewed = found.clone();
            let transitions = found.spec.as_ref().and_then(|s| s.lease_transitions);
            renewed.spec = Some(spec(transitions));
            api.replace(own, &PostParams::default(), &renewed).await
        }
    };
    result
        .map(drop)
        .map_err(|e| format!("member Lease {own}: {}", chain(&e)))
}

/// Gives a shard's Lease up: its next owner takes it at once.
async fn release(api: &Api<Lease>, context: &str, mut lease: Lease) {
    let Some(name) = lease.metadata.name.clone() else {
        return;
    };
    if let Some(spec) = lease.spec.as_mut() {
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
    }
    if let Err(error) = api.replace(&name, &PostParams::default(), &lease).await {
        tracing::debug!(cluster = %context, lease = %name, error = %chain(&error), "releasing a shard Lease failed; its next owner waits for it to expire");
    }
}

/// On shutdown: no writes from here on, every held shard released, the member Lease deleted.
async fn leave(
    api: &Api<Lease>,
    sharding: &Sharding,
    state: &ShardState,
    member: &Fence,
    memory: &Memory,
) {
    let lease = &sharding.lease;
    for shard in 0..state.names().len() {
        state.fence(shard).close();
    }
    member.close();
    let leaving = async {
        // One list of the group's Leases, not a read per shard.
        let selector = format!("{GROUP_LABEL}={}", lease.name);
        let listed = api.list(&ListParams::default().labels(&selector)).await;
        let shards: Vec<&str> = memory.elections.iter().map(|e| e.name.as_str()).collect();
        for found in listed.map(|l| l.items).unwrap_or_default() {
            let name = found.metadata.name.as_deref().unwrap_or_default();
            let holder = found
                .spec
                .as_ref()
                .and_then(|s| s.holder_identity.as_deref());
            if shards.contains(&name) && holder == Some(lease.identity.as_str()) {
                release(api, &lease.context, found).await;
            }
        }
        let own = sharding.member_lease(&lease.identity);
        if let Err(error) = api.delete(&own, &DeleteParams::default()).await {
            tracing::debug!(cluster = %lease.context, lease = %own, error = %chain(&error), "deleting the member Lease failed; the others stop counting it after a lease duration");
        }
    };
    // Bounded: a control cluster that does not answer must not hold the shutdown.
    let _ = tokio::time::timeout(lease.renew_deadline, leaving).await;
}

#[cfg(test)]
mod tests;
