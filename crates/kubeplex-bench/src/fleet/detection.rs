//! Section `detection`: how soon a cluster that stops answering is noticed, and what noticing costs at rest.
//! The fleet section's kubeplex operator runs with its children in one child cluster. Over a window at rest,
//! the requests that cluster's API server answered (its own counters, watches excepted) and the pings the
//! operator sent are counted. Then, again and again, the parent freezes the child cluster's API server
//! (SIGSTOP: its connections stay open, nothing answers) at a random point of the operator's cycles, polls
//! the operator's `/readyz` until it says a cluster is not ready, thaws the server and waits until every
//! cluster is ready again.

use std::time::{Duration, Instant};

use kube::Client;
use serde::Serialize;

use super::child::Synced;
use super::process::Operator;
use super::setup::{Host, control_and_child, one_child_spec};
use crate::figures::{Figure, Goal, Section, percentile};
use crate::harness::{jitter, progress};

const CONTROL: &str = "cluster-0";
const CHILD: &str = "cluster-1";
const NAMESPACE: &str = "detection";
/// Goal: a frozen cluster is not ready in `/readyz` within this many seconds, at the 95th percentile.
const GOAL_S: f64 = 6.0;
/// How long one round (noticed, or ready again) may take before the section fails.
const ROUND: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(50);

#[derive(Clone, Debug, Serialize)]
pub(crate) struct DetectionOptions {
    /// How many times the child cluster is frozen.
    pub freezes: usize,
    /// The window the requests at rest are counted over.
    pub at_rest: Duration,
    /// The longest random wait before a freeze (so that freezes fall anywhere in the ping period).
    pub before_freeze: Duration,
}

impl DetectionOptions {
    pub fn full() -> Self {
        Self {
            freezes: 20,
            ..Self::quick()
        }
    }

    pub fn quick() -> Self {
        Self {
            freezes: 8,
            at_rest: Duration::from_secs(10),
            before_freeze: Duration::from_secs(10),
        }
    }

    /// Whether the section runs: short windows, whose counts are not figures to read.
    pub fn smoke() -> Self {
        Self {
            freezes: 1,
            at_rest: Duration::from_secs(1),
            before_freeze: Duration::from_secs(1),
        }
    }
}

pub(crate) async fn run(
    host: &Host<'_>,
    options: &DetectionOptions,
) -> Result<(Section, Goal), String> {
    if options.freezes == 0 {
        return Err("detection: at least one freeze".into());
    }
    let (_, child) = control_and_child(host, (CONTROL, CHILD), NAMESPACE).await?;
    let spec = one_child_spec(host, (CONTROL, CHILD), NAMESPACE);
    let mut operator = Operator::spawn(host, &spec, 2000)?;
    let synced: Synced = operator.next("its caches synced").await?;
    let probe = synced.probe.ok_or("the operator serves no probes")?;
    until_ready(&probe, true).await?;

    let (requests, pings) = at_rest(&child, &probe, options.at_rest).await?;
    progress(&format!(
        "detection: at rest, {requests:.1} requests per 10 s to {CHILD}, {pings:.1} pings per 10 s"
    ));
    let mut noticed_s = Vec::new();
    for freeze in 0..options.freezes {
        tokio::time::sleep(jitter(options.before_freeze)).await;
        host.env.freeze(CHILD).map_err(|e| e.to_string())?;
        let frozen = Instant::now();
        let noticed = until_ready(&probe, false).await;
        host.env.thaw(CHILD).map_err(|e| e.to_string())?;
        noticed?;
        let seconds = frozen.elapsed().as_secs_f64();
        progress(&format!(
            "detection: freeze {}/{}: not ready after {seconds:.1} s",
            freeze + 1,
            options.freezes
        ));
        noticed_s.push(seconds);
        until_ready(&probe, true).await?;
    }
    operator.kill().await?;
    Ok(report(options, &noticed_s, requests, pings))
}

fn report(
    options: &DetectionOptions,
    noticed_s: &[f64],
    requests: f64,
    pings: f64,
) -> (Section, Goal) {
    let (p50, p95) = (percentile(noticed_s, 50.0), percentile(noticed_s, 95.0));
    let section = Section {
        title: "noticing a cluster that stops answering".into(),
        method: format!(
            "the fleet operator (kubeplex side) with its children in {CHILD}; at rest, over {} s, the \
             requests {CHILD}'s API server answered (apiserver_request_total, watches and the bench's own \
             readings excepted) and the operator's pings (kubeplex_cluster_healthchecks_total, every cluster); \
             then {} times: after a random 0-{} s, SIGSTOP {CHILD}'s API server, poll the operator's /readyz \
             every {} ms until it says a cluster is not ready, SIGCONT, wait until every cluster is ready.",
            options.at_rest.as_secs(),
            options.freezes,
            options.before_freeze.as_secs(),
            POLL.as_millis()
        ),
        figures: vec![Figure::new(
            "freeze -> /readyz not ready",
            "s",
            &[],
            noticed_s,
        )],
        notes: vec![
            format!(
                "noticed after p50 {p50:.1} s, p95 {p95:.1} s over {} freezes",
                noticed_s.len()
            ),
            format!(
                "at rest: {requests:.1} requests per 10 s answered by {CHILD}, {pings:.1} pings per 10 s \
                 sent by the operator (all clusters); HTTP/2 PINGs are frames, not requests"
            ),
        ],
    };
    let goal = Goal {
        section: "detection",
        goal: format!("a frozen cluster is not ready within {GOAL_S} s (p95)"),
        measured: format!("p50 {p50:.1} s, p95 {p95:.1} s"),
        met: p95 <= GOAL_S,
    };
    (section, goal)
}

/// Requests answered by the child cluster's API server and pings sent by the operator, per 10 s at rest.
async fn at_rest(child: &Client, probe: &str, window: Duration) -> Result<(f64, f64), String> {
    let answered = async || {
        let text = crate::system::server_metrics(child).await?;
        Ok::<_, String>(crate::member::answered_total(&text))
    };
    let (before, pinged) = (answered().await?, crate::member::pings(probe).await?);
    let counted = Instant::now();
    tokio::time::sleep(window).await;
    let (after, pinged_after) = (answered().await?, crate::member::pings(probe).await?);
    let per_10_s = 10.0 / counted.elapsed().as_secs_f64();
    // The first reading is counted by the second.
    let requests = (after - before - 1.0).max(0.0) * per_10_s;
    Ok((requests, (pinged_after - pinged) * per_10_s))
}

/// Polls `/readyz` until it answers 200 (`ready`) or anything else.
async fn until_ready(probe: &str, ready: bool) -> Result<(), String> {
    let started = Instant::now();
    loop {
        let (ok, answer) = readyz(probe).await;
        if ok == ready {
            return Ok(());
        }
        if started.elapsed() > ROUND {
            let wanted = if ready { "ready" } else { "not ready" };
            return Err(format!(
                "detection: /readyz not {wanted} within {ROUND:?}; it said: {answer}"
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Whether the operator's `/readyz?verbose` answers 200, and its answer; an operator that does not answer
/// counts as not ready.
async fn readyz(address: &str) -> (bool, String) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let read = async {
        let mut stream = tokio::net::TcpStream::connect(address).await?;
        stream
            .write_all(
                b"GET /readyz?verbose HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
            )
            .await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        Ok::<_, std::io::Error>(response)
    };
    match tokio::time::timeout(Duration::from_secs(2), read).await {
        Ok(Ok(response)) => (
            response.starts_with(b"HTTP/1.1 200"),
            String::from_utf8_lossy(&response).into_owned(),
        ),
        Ok(Err(error)) => (false, error.to_string()),
        Err(_) => (false, "no answer within 2 s".into()),
    }
}
