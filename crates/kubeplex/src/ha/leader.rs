//! Leader election on a `coordination.k8s.io/v1` Lease in one context: only the holder reconciles; the
//! others keep their watches and caches warm and take over when the holder stops renewing.
//!
//! Why not `kube-lease-manager`: it reports only whether this replica holds the lease, not when the last
//! renewal was sent, and fencing needs exactly that. The holder may write until *the time it sent its last
//! successful renewal* plus the renew deadline; another replica takes over only after it has seen the Lease
//! unchanged for a whole lease duration, which starts no earlier than that send. With renew deadline < lease
//! duration the old holder's fence ([`Fence`]) closes before anyone else can hold the lease — also when the
//! holder was frozen or cut off and never learnt it lost: its monotonic clock ran on.
//!
//! The decisions are a pure function of the Lease read ([`decide`]); the loop that reads and writes the Lease
//! is tested in paused time against a stand-in Lease server, and on real API servers.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use tokio::sync::watch;
// tokio's clock: the fence's, so paused-time tests drive both.
use tokio::time::Instant;

use crate::client::{Fence, Role};
use crate::core::Context;
use crate::core::{chain, namespaced_name};

/// How long a Lease holds without renewal (client-go's default).
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
/// How long the holder goes on writing after it sent its last successful renewal (client-go's default).
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// How often the Lease is renewed, or tried by a standby (client-go's default).
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);

/// Leader election: where the Lease is, who this replica is, and the timings.
///
/// ```
/// # kubeplex::contexts! { enum Fleet { Control = "control" } }
/// let election = kubeplex::ha::LeaderElection::new(Fleet::Control, "operators", "app-deployer");
/// let manager = kubeplex::Manager::new().leader_election(election);
/// # let _ = manager;
/// ```
#[derive(Clone, Debug)]
pub struct LeaderElection {
    pub(crate) context: String,
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) identity: String,
    pub(crate) lease_duration: Duration,
    pub(crate) renew_deadline: Duration,
    pub(crate) retry_period: Duration,
}

impl LeaderElection {
    /// The Lease `namespace/name` in `context`; this replica is named by `POD_NAME` or the host name, plus a
    /// random suffix (two processes on one host are two replicas).
    pub fn new(
        context: impl Context,
        namespace: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        Self {
            context: context.name().to_owned(),
            namespace: namespace.into(),
            name: name.into(),
            identity: default_identity(),
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
        }
    }

    /// This replica's name in the Lease (and in its requests' `User-Agent`).
    pub fn with_identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = identity.into();
        self
    }

    /// How long the Lease holds without renewal (default [`DEFAULT_LEASE_DURATION`]).
    pub fn lease_duration(mut self, duration: Duration) -> Self {
        self.lease_duration = duration;
        self
    }

    /// How long the holder writes after its last renewal was sent (default [`DEFAULT_RENEW_DEADLINE`]);
    /// shorter than the lease duration.
    pub fn renew_deadline(mut self, deadline: Duration) -> Self {
        self.renew_deadline = deadline;
        self
    }

    /// How often the Lease is renewed or tried (default [`DEFAULT_RETRY_PERIOD`]); shorter than the renew
    /// deadline.
    pub fn retry_period(mut self, period: Duration) -> Self {
        self.retry_period = period;
        self
    }

    /// This replica's identity, as [`with_identity`](Self::with_identity) set it or the default.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// `namespace/name` of the Lease, as errors name it.
    pub(crate) fn lease(&self) -> String {
        namespaced_name(Some(&self.namespace), &self.name)
    }

    /// Why these timings cannot fence, if they cannot.
    pub(crate) fn problem(&self) -> Option<String> {
        let whole_seconds = |d: Duration| d.as_secs() >= 1 && d.subsec_nanos() == 0;
        if self.identity.is_empty() {
            Some("the identity is empty".into())
        } else if !whole_seconds(self.lease_duration) {
            Some(
                "the lease duration must be a whole number of seconds (a Lease holds seconds)"
                    .into(),
            )
        } else if self.renew_deadline >= self.lease_duration {
            Some(format!(
                "the renew deadline ({:?}) must be shorter than the lease duration ({:?}), or a replica that \
                 lost the lease could still write",
                self.renew_deadline, self.lease_duration
            ))
        } else if self.retry_period.is_zero() || self.retry_period >= self.renew_deadline {
            Some(format!(
                "the retry period ({:?}) must be above zero and shorter than the renew deadline ({:?})",
                self.retry_period, self.renew_deadline
            ))
        } else {
            None
        }
    }
}

fn default_identity() -> String {
    let host = std::env::var("POD_NAME")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "kubeplex".into());
    let suffix = std::hash::BuildHasher::hash_one(
        &std::collections::hash_map::RandomState::new(),
        (std::process::id(), Instant::now()),
    );
    format!("{host}-{:05x}", suffix & 0xf_ffff)
}

/// What a standby remembers of the Lease: its record, and when (locally) it last saw the record change.
#[derive(Clone, Debug, Default)]
pub(super) struct Observed {
    record: Option<(Option<String>, Option<MicroTime>, Option<i32>)>,
    since: Option<Instant>,
}

/// What to do after reading the Lease.
#[derive(Debug, PartialEq)]
pub(super) enum Decision {
    /// There is none: create it, held by us.
    Create,
    /// Write this spec over it (renew ours, or take over an expired or released one).
    Write(LeaseSpec),
    /// Someone else holds it.
    Wait(String),
}

/// Decides from the Lease as read now. Expiry is judged by the local time the record last changed, not
/// by the timestamps in it, so clocks of different hosts never have to agree.
pub(super) fn decide(
    lease: Option<&Lease>,
    election: &LeaderElection,
    observed: &mut Observed,
    now: Instant,
) -> Decision {
    let Some(lease) = lease else {
        return Decision::Create;
    };
    let spec = lease.spec.clone().unwrap_or_default();
    let record = (
        spec.holder_identity.clone(),
        spec.renew_time.clone(),
        spec.lease_transitions,
    );
    if observed.record.as_ref() != Some(&record) {
        observed.record = Some(record);
        observed.since = Some(now);
    }
    let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
    let stamp = MicroTime(Timestamp::now());
    match holder {
        Some(holder) if holder == election.identity => Decision::Write(LeaseSpec {
            renew_time: Some(stamp),
            lease_duration_seconds: Some(seconds(election.lease_duration)),
            ..spec
        }),
        Some(holder) => {
            let duration = foreign_duration(spec.lease_duration_seconds, election.lease_duration);
            let seen = observed.since.unwrap_or(now);
            if now.saturating_duration_since(seen) < duration {
                Decision::Wait(holder)
            } else {
                Decision::Write(taken_over(spec, election, stamp))
            }
        }
        // Released by its holder: free at once.
        None => Decision::Write(taken_over(spec, election, stamp)),
    }
}

/// How long another holder's Lease holds unchanged: its `leaseDurationSeconds`, at most `own` (this
/// replica's configured duration) — anyone who may write the Lease could otherwise stop every take-over
/// for good with a huge one (replicas of one operator share their timings). A duration the API server
/// would refuse (0 or negative) or none counts as `own`, never a take-over at once from a holder that may
/// still be writing.
pub(super) fn foreign_duration(seconds: Option<i32>, own: Duration) -> Duration {
    seconds
        .and_then(|s| u64::try_from(s).ok())
        .filter(|s| *s > 0)
        .map_or(own, Duration::from_secs)
        .min(own)
}

pub(super) fn taken_over(
    spec: LeaseSpec,
    election: &LeaderElection,
    stamp: MicroTime,
) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(election.identity.clone()),
        acquire_time: Some(stamp.clone()),
        renew_time: Some(stamp),
        lease_duration_seconds: Some(seconds(election.lease_duration)),
        lease_transitions: Some(spec.lease_transitions.unwrap_or(0).saturating_add(1)),
        ..spec
    }
}

fn seconds(duration: Duration) -> i32 {
    i32::try_from(duration.as_secs()).unwrap_or(i32::MAX)
}

/// Runs the election until `stop` turns true, then releases the Lease if held. `fence` opens while this
/// replica holds it; `role` says who holds it.
pub(super) async fn run(
    api: Api<Lease>,
    election: LeaderElection,
    fence: Fence,
    role: watch::Sender<Role>,
    mut stop: watch::Receiver<bool>,
) {
    let mut observed = Observed::default();
    let mut last_problem: Option<String> = None;
    loop {
        let sent = Instant::now();
        // Bounded: kube's client has no read timeout, and a Lease request that hangs (a silently dropping
        // link to the control cluster) would freeze the role as it was — the fence closes on time anyway, but
        // the controllers would go on running and the probes would say "leader".
        let bounded = tokio::time::timeout(
            election.renew_deadline,
            attempt(&api, &election, &mut observed),
        );
        let outcome = match bounded.await {
            Ok(outcome) => outcome,
            Err(_) => Err(format!(
                "no answer within {:?} from context {}",
                election.renew_deadline, election.context
            )),
        };
        let leader = match &outcome {
            Ok(None) => {
                fence.open_for(sent, election.renew_deadline);
                true
            }
            // Until the deadline of the last renewal passes, the holder still is the holder.
            Ok(Some(_)) | Err(_) => fence.allows_writes(),
        };
        let holder = match &outcome {
            Ok(None) => Some(election.identity.clone()),
            Ok(Some(other)) => Some(other.clone()),
            Err(_) => role.borrow().holder.clone(),
        };
        let problem = outcome.as_ref().err().cloned();
        if problem != last_problem {
            if let Some(problem) = &problem {
                tracing::warn!(cluster = %election.context, lease = %election.name, %problem, "leader election: the Lease cannot be read or written");
            }
            last_problem = problem;
        }
        role.send_if_modified(|current| {
            let next = Role { leader, holder };
            if *current == next {
                return false;
            }
            if next.leader != current.leader {
                let holder = next.holder.as_deref().unwrap_or("nobody");
                tracing::info!(cluster = %election.context, identity = %election.identity, leader = next.leader, %holder, "leadership changed");
            }
            *current = next;
            true
        });
        tokio::select! {
            _ = stop.wait_for(|stopped| *stopped) => break,
            () = tokio::time::sleep(election.retry_period) => {}
        }
    }
    if role.borrow().leader {
        fence.close();
        release(&api, &election).await;
    }
}

/// One read and, if called for, one write of the Lease: `None` when this replica holds it now, else the
/// holder; an error in words when the Lease cannot be read or written.
async fn attempt(
    api: &Api<Lease>,
    election: &LeaderElection,
    observed: &mut Observed,
) -> Result<Option<String>, String> {
    let lease = api.get_opt(&election.name).await.map_err(|e| chain(&e))?;
    // Seen when the answer came, not when the round began: a slow read shows the Lease as it was on arrival,
    // and counting from the round's start would take another's Lease over early by the read's delay, while
    // its holder's fence may still be open.
    let seen = Instant::now();
    match decide(lease.as_ref(), election, observed, seen) {
        Decision::Wait(holder) => Ok(Some(holder)),
        Decision::Create => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(election.name.clone()),
                    namespace: Some(election.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(taken_over(
                    LeaseSpec::default(),
                    election,
                    MicroTime(Timestamp::now()),
                )),
            };
            written(api.create(&PostParams::default(), &lease).await)
        }
        Decision::Write(spec) => {
            // The resourceVersion read is kept: a replica that wrote meanwhile makes this a 409.
            let mut lease = lease.expect("a write follows a read lease");
            lease.spec = Some(spec);
            written(
                api.replace(&election.name, &PostParams::default(), &lease)
                    .await,
            )
        }
    }
}

fn written(result: kube::Result<Lease>) -> Result<Option<String>, String> {
    match result {
        Ok(_) => Ok(None),
        // Someone else wrote first: theirs, for now.
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(Some("another replica".into())),
        Err(error) => Err(chain(&error)),
    }
}

/// Gives the Lease up on shutdown, so a successor takes over at once instead of after a lease duration.
async fn release(api: &Api<Lease>, election: &LeaderElection) {
    let Ok(Some(mut lease)) = api.get_opt(&election.name).await else {
        return;
    };
    let Some(spec) = lease.spec.as_mut() else {
        return;
    };
    if spec.holder_identity.as_deref() != Some(election.identity.as_str()) {
        return;
    }
    spec.holder_identity = None;
    spec.lease_duration_seconds = Some(1);
    if let Err(error) = api
        .replace(&election.name, &PostParams::default(), &lease)
        .await
    {
        tracing::warn!(cluster = %election.context, error = %chain(&error), "releasing the Lease failed; a successor waits for it to expire");
    }
}

#[cfg(test)]
mod tests;
