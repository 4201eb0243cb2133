//! Section `many_members`: M members in one operator process. The members are aliases of the three test
//! API servers (as `many_contexts` aliases them as contexts), each joining by a kubeconfig Secret of its
//! own that defaults to a namespace of its own, where the operator puts the children of P parents
//! (`Child::member_default_namespace`). For each M (smallest first), a fresh operator: every child in every
//! member after the Secrets are created, its memory per member, the requests of the process in steady
//! state, and all members leaving. Then, at the largest M, a start of the operator with the M Secrets
//! present: time to ready (typed contexts only) and to every member's children.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DeleteParams, ListParams, PostParams};

use super::aliases::{Aliases, SELECTOR_VALUE};
use super::churn::settled_reading;
use super::cluster::{CONTROL, IMAGE, MemberOptions, SECRETS_NAMESPACE, SELECTOR_LABEL};
use super::many_report::{PARENTS, Restart, Size, report};
use crate::child::Side;
use crate::figures::{Goal, Section};
use crate::fleet::{
    FleetApp, FleetAppSpec, FleetSpec, Host, MembersSpec, Observer, Operator, PARENT_NAMESPACE,
    Reading, Synced,
};
use crate::harness::progress;
use crate::system::processes_seconds;

/// How long the joins, the leaves or the parents' reconciles may take before the section fails.
const LIMIT: Duration = Duration::from_secs(900);
/// Longer than an idle connection can stay in the operator's pools: one idle for 90 s is closed by the
/// pool's next check, and the checks are 90 s apart.
const POOL_IDLE: Duration = Duration::from_secs(185);
/// Longer than a watch runs: kube's watcher asks the server to end each watch after 290 s and starts
/// another. Until then a watch's decode buffer stays as large as the largest event it streamed (a
/// parent whose status listed every member).
const WATCH_RESTART: Duration = Duration::from_secs(300);
/// How often the parent looks whether the members' Secrets are gone.
const SECRET_POLL: Duration = Duration::from_millis(100);

pub(crate) async fn run(
    host: &Host<'_>,
    options: &MemberOptions,
) -> Result<(Section, Vec<Goal>), String> {
    let mut sizes = options.many.clone();
    sizes.sort_unstable();
    sizes.dedup();
    let Some(&largest) = sizes.last() else {
        return Err("many_members: at least one number of members".into());
    };
    let window = Duration::from_secs(options.window_s);
    let started = Instant::now();
    progress(&format!(
        "many_members: M = {sizes:?} members, {PARENTS} parents; namespaces for {largest} members"
    ));
    let aliases = Aliases::prepare(host, largest).await?;
    let observer = Observer::start(
        aliases.control.clone(),
        &aliases.servers,
        IMAGE,
        Vec::new(),
        0,
    )
    .await?;
    if observer.with(|w| w.parents() + w.children()) > 0 {
        return Err(format!(
            "many_members: parents in {CONTROL}/{PARENT_NAMESPACE} or children in the test clusters left \
             from an earlier section"
        ));
    }
    create_parents(&aliases).await?;
    let mut measured = Vec::new();
    for (n, &members) in sizes.iter().enumerate() {
        let size = one_size(host, &aliases, &observer, members, options, 5000 + n).await?;
        progress(&format!("many_members: M={members}: {}", size.summary()));
        measured.push(size);
    }
    let restart = restart(host, &aliases, &observer, largest).await?;
    progress(&format!(
        "many_members: restart with {largest} Secrets: ready {:.2} s, every child {:.2} s",
        restart.ready_s, restart.children_s
    ));
    let section_s = started.elapsed().as_secs_f64();
    progress(&format!("many_members: {section_s:.0} s"));
    Ok(report(&measured, &restart, window, section_s))
}

/// The operator of the member sections, its members from this section's Secrets, each member's children
/// in its own namespace.
fn spec(host: &Host<'_>) -> FleetSpec {
    FleetSpec {
        side: Side::Kubeplex,
        kubeconfig: host.kubeconfig.clone(),
        control: CONTROL.to_owned(),
        children: Vec::new(),
        namespaces: Vec::new(),
        concurrency: None,
        election: None,
        members: Some(MembersSpec {
            namespace: SECRETS_NAMESPACE.to_owned(),
            selector: format!("{SELECTOR_LABEL}={SELECTOR_VALUE}"),
            own_namespace: true,
        }),
        admission: false,
    }
}

async fn one_size(
    host: &Host<'_>,
    aliases: &Aliases,
    observer: &Observer,
    members: usize,
    options: &MemberOptions,
    n: usize,
) -> Result<Size, String> {
    let (window, quiet, step) = (
        Duration::from_secs(options.window_s),
        Duration::from_secs(options.quiet_s),
        Duration::from_millis(options.settle_step_ms),
    );
    let children = members * PARENTS;
    let mut operator = Operator::spawn(host, &spec(host), n)?;
    let synced: Synced = operator.next("its caches synced").await?;
    observer
        .until("every parent reconciled", LIMIT, |w| w.ready == PARENTS)
        .await?;
    tokio::time::sleep(quiet).await;
    let before = settled_reading(&mut operator, step).await?;
    let probe = synced
        .probe
        .clone()
        .ok_or("the operator serves no probes")?;
    let idle = rate(aliases, &probe, window).await?;
    let servers_before = processes_seconds(&host.server_pids);
    progress(&format!("many_members: M={members}: creating the Secrets"));
    let from = aliases.create_secrets(members).await?;
    let created_s = from.elapsed().as_secs_f64();
    let at = observer
        .until("every child in every member", LIMIT, |w| w.good == children)
        .await?;
    let join_s = (at - from).as_secs_f64();
    let servers_join_s = processes_seconds(&host.server_pids) - servers_before;
    progress(&format!(
        "many_members: M={members}: every child {join_s:.2} s after the Secrets' creation"
    ));
    let joined_now = operator.ask().await?;
    tokio::time::sleep(quiet).await;
    let joined = settled_reading(&mut operator, step).await?;
    let steady = steady_rate(aliases, &probe, window, options.steady_windows).await?;
    let kinds: Vec<String> = (steady.above(&idle).iter())
        .map(|(kind, rate)| format!("{kind} {rate:.1}"))
        .collect();
    progress(&format!(
        "many_members: M={members}: {:.1} requests and {:.1} pings per second in steady state ({:.1} and \
         {:.1} with no member); above those, by kind: {}",
        steady.requests,
        steady.pings,
        idle.requests,
        idle.pings,
        kinds.join(", ")
    ));
    let (leave_s, left_behind) = leave(aliases, observer).await?;
    let left = settled_reading(&mut operator, step).await?;
    let (after_idle, after_restart) = if !options.reread_heap {
        (None, None)
    } else {
        progress(&format!(
            "many_members: M={members}: reading the heap again after the pools' idle timeout and after \
             the watches' restart"
        ));
        let left_at = Instant::now();
        tokio::time::sleep(POOL_IDLE).await;
        let idle = settled_reading(&mut operator, step).await?;
        tokio::time::sleep(WATCH_RESTART.saturating_sub(left_at.elapsed())).await;
        (
            Some(idle),
            Some(settled_reading(&mut operator, step).await?),
        )
    };
    operator.exit().await?;
    Ok(Size {
        members,
        ready_s: synced.synced_s,
        created_s,
        join_s,
        join_cpu_s: joined_now.cpu_s - before.cpu_s,
        servers_join_s,
        before,
        joined,
        left,
        idle: after_idle,
        restarted: after_restart,
        idle_rate: idle.requests,
        steady_rate: steady.requests,
        idle_pings: idle.pings,
        steady_pings: steady.pings,
        steady_kinds: steady.above(&idle),
        leave_s,
        left_behind,
    })
}

/// Over `window`: requests per second the API servers counted (less the parent's own two readings), by
/// verb and resource and in all, and pings per second the operator sent (its
/// `kubeplex_cluster_healthchecks_total`, which the servers' counters leave out: a ping is a
/// `GET /version`).
async fn rate(aliases: &Aliases, probe: &str, window: Duration) -> Result<Rate, String> {
    // Each counter over the time between its own two readings: reading the servers' counters takes a
    // while (their /metrics pages are large), which a rate over `window` alone would count as pings.
    let (before, counted) = (aliases.requests().await?, Instant::now());
    let (pinged, pinged_at) = (pings(probe).await?, Instant::now());
    tokio::time::sleep(window).await;
    let (after, seconds) = (aliases.requests().await?, counted.elapsed().as_secs_f64());
    let (pinged_after, ping_seconds) = (pings(probe).await?, pinged_at.elapsed().as_secs_f64());
    let mut by_kind = after;
    for (kind, count) in before {
        *by_kind.entry(kind).or_default() -= count;
    }
    // The first reading's own request is counted by the second, once per server.
    let own = aliases.servers.len() as f64;
    *by_kind.entry(OWN_READING.to_owned()).or_default() -= own;
    by_kind.retain(|_, count| *count > 0.0);
    by_kind.values_mut().for_each(|count| *count /= seconds);
    Ok(Rate {
        requests: by_kind.values().sum(),
        pings: (pinged_after - pinged) / ping_seconds,
        by_kind,
    })
}

/// The rate once it stopped falling: windows one after another until one is at least 95 % of the one
/// before (or `most` were read). What the joins set going (their Events, a few sent at once) can still be
/// draining when the last child appears.
async fn steady_rate(
    aliases: &Aliases,
    probe: &str,
    window: Duration,
    most: usize,
) -> Result<Rate, String> {
    let mut last = rate(aliases, probe, window).await?;
    for _ in 1..most {
        let next = rate(aliases, probe, window).await?;
        let settled = next.total() >= 0.95 * last.total();
        last = next;
        if settled {
            break;
        }
    }
    Ok(last)
}

/// What the parent's reading of a server's counters is counted as.
const OWN_READING: &str = "GET ";

/// Requests per second over a window.
pub(super) struct Rate {
    /// The API servers counted, watches excepted.
    pub requests: f64,
    /// The operator's pings.
    pub pings: f64,
    /// `requests` by verb and resource.
    pub by_kind: BTreeMap<String, f64>,
}

impl Rate {
    /// Requests and pings per second.
    fn total(&self) -> f64 {
        self.requests + self.pings
    }

    /// The kinds of request whose rate rose from `idle` by at least 0.1 per second, largest first.
    fn above(&self, idle: &Rate) -> Vec<(String, f64)> {
        let mut kinds: Vec<(String, f64)> = (self.by_kind.iter())
            .map(|(kind, rate)| {
                let before = idle.by_kind.get(kind).copied().unwrap_or(0.0);
                (kind.clone(), rate - before)
            })
            .filter(|(_, added)| *added >= 0.1)
            .collect();
        kinds.sort_by(|a, b| b.1.total_cmp(&a.1));
        kinds
    }
}

/// The pings the operator has sent so far, whatever their result, from its `/metrics`.
pub(crate) async fn pings(address: &str) -> Result<f64, String> {
    Ok(healthchecks(
        &crate::harness::operator_metrics(address).await?,
    ))
}

/// The sum of `kubeplex_cluster_healthchecks_total` over its series.
pub(super) fn healthchecks(metrics: &str) -> f64 {
    (metrics.lines())
        .filter(|line| line.starts_with("kubeplex_cluster_healthchecks_total{"))
        .filter_map(|line| line.rsplit_once(' '))
        .map(|(_, value)| value.trim().parse::<f64>().unwrap_or(0.0))
        .sum()
}

/// Deletes every member's Secret and waits until no child and no Secret is left; the seconds, and the
/// children still there after [`LIMIT`] (the parent then deletes them).
async fn leave(aliases: &Aliases, observer: &Observer) -> Result<(f64, usize), String> {
    let from = Instant::now();
    aliases.delete_secrets().await?;
    let children = observer.until("no child in any member", LIMIT, |w| w.children() == 0);
    let secrets = async {
        let deadline = Instant::now() + LIMIT;
        while aliases.secrets_left().await? > 0 {
            if Instant::now() > deadline {
                return Err(format!(
                    "the members' Secrets were still there {LIMIT:?} after their delete"
                ));
            }
            tokio::time::sleep(SECRET_POLL).await;
        }
        Ok::<_, String>(())
    };
    let (children, secrets) = tokio::join!(children, secrets);
    secrets?;
    if children.is_ok() {
        return Ok((from.elapsed().as_secs_f64(), 0));
    }
    let stray: Vec<(usize, String, String)> = observer.with(|w| w.uids().into_keys().collect());
    progress(&format!(
        "many_members: {} child(ren) left behind after every member left",
        stray.len()
    ));
    for (server, namespace, name) in &stray {
        let api: Api<Deployment> = Api::namespaced(aliases.servers[*server].clone(), namespace);
        match api.delete(name, &DeleteParams::background()).await {
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            other => drop(other.map_err(|e| format!("deleting {namespace}/{name}: {e}"))?),
        }
    }
    observer
        .until("the children left behind gone", LIMIT, |w| {
            w.children() == 0
        })
        .await?;
    Ok((f64::NAN, stray.len()))
}

/// With M Secrets present and no operator running, starts the operator: until it is ready (its caches of
/// the typed contexts synced), and until every member's children are in place. Then every member leaves
/// and the parents are deleted while it runs.
async fn restart(
    host: &Host<'_>,
    aliases: &Aliases,
    observer: &Observer,
    members: usize,
) -> Result<Restart, String> {
    aliases.create_secrets(members).await?;
    let from = Instant::now();
    let mut operator = Operator::spawn(host, &spec(host), 5999)?;
    let synced: Synced = operator.next("its caches synced").await?;
    let ready_s = from.elapsed().as_secs_f64();
    let at = observer
        .until("every child in every member after the start", LIMIT, |w| {
            w.good == members * PARENTS
        })
        .await?;
    let children_s = (at - from).as_secs_f64();
    let reading: Reading = operator.ask().await?;
    let (leave_s, left_behind) = leave(aliases, observer).await?;
    delete_parents(aliases, observer).await?;
    operator.exit().await?;
    Ok(Restart {
        members,
        synced_s: synced.synced_s,
        ready_s,
        children_s,
        joined: reading,
        leave_s,
        left_behind,
    })
}

async fn create_parents(aliases: &Aliases) -> Result<(), String> {
    let api: Api<FleetApp> = Api::namespaced(aliases.control.clone(), PARENT_NAMESPACE);
    stream::iter(0..PARENTS)
        .map(|i| {
            let app = FleetApp::new(
                &format!("many-app-{i:02}"),
                FleetAppSpec {
                    image: IMAGE.to_owned(),
                    replicas: 1,
                    namespaces: Vec::new(),
                },
            );
            let api = api.clone();
            async move {
                api.create(&PostParams::default(), &app)
                    .await
                    .map(drop)
                    .map_err(|e| format!("creating parent {i}: {e}"))
            }
        })
        .buffer_unordered(PARENTS)
        .try_collect::<Vec<()>>()
        .await
        .map(drop)
}

/// Deletes the parents while the operator runs (it removes their finalizers).
async fn delete_parents(aliases: &Aliases, observer: &Observer) -> Result<(), String> {
    let api: Api<FleetApp> = Api::namespaced(aliases.control.clone(), PARENT_NAMESPACE);
    api.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .map_err(|e| format!("deleting the parents: {e}"))?;
    observer
        .until("every parent gone", LIMIT, |w| w.parents() == 0)
        .await
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pings_are_summed_over_contexts_and_results() {
        let text = "# TYPE kubeplex_cluster_healthchecks counter\n\
            kubeplex_cluster_healthchecks_total{cluster=\"control\",result=\"success\"} 12\n\
            kubeplex_cluster_healthchecks_total{cluster=\"many-0001\",result=\"failure\"} 3\n\
            kubeplex_cluster_ping_seconds_count{cluster=\"control\"} 12\n";
        assert!((healthchecks(text) - 15.0).abs() < 1e-9);
    }
}
