//! What the API servers' audit logs say a replica wrote, and when its fence closed at the latest.

use k8s_openapi::jiff::Timestamp;
use kubeplex::Context as _;
use kubeplex_fleet::Fleet;
use kubeplex_testenv::TestEnv;

use crate::{CLUSTERS, LEASE, TIMINGS};

const WRITE_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

/// One request of the audit logs that changed (or tried to change) something.
#[derive(Debug)]
pub struct Write {
    pub cluster: Fleet,
    pub verb: String,
    pub what: String,
    pub at: Timestamp,
    /// When the server answered it (the event's stage time): a late write's receipt and answer together tell
    /// a request the server read late from one it worked on late.
    pub answered: Timestamp,
    pub code: i64,
}

/// Every write `identity` made, in any cluster, as the API servers recorded them (request received time).
pub fn writes_of(env: &TestEnv, identity: &str) -> Vec<Write> {
    let agent = format!("({identity})");
    let mut writes = Vec::new();
    for cluster in CLUSTERS {
        for event in env.audit_events(cluster.name()).unwrap() {
            let verb = event["verb"].as_str().unwrap_or_default();
            let by = event["userAgent"].as_str().unwrap_or_default();
            if !WRITE_VERBS.contains(&verb) || !by.ends_with(&agent) {
                continue;
            }
            let object = &event["objectRef"];
            let field = |k: &str| object[k].as_str().unwrap_or_default().to_owned();
            writes.push(Write {
                cluster,
                verb: verb.to_owned(),
                what: format!(
                    "{}{}{} {}/{}",
                    field("resource"),
                    if field("subresource").is_empty() {
                        ""
                    } else {
                        "/"
                    },
                    field("subresource"),
                    field("namespace"),
                    field("name")
                ),
                at: event["requestReceivedTimestamp"]
                    .as_str()
                    .unwrap()
                    .parse()
                    .unwrap(),
                answered: event["stageTimestamp"].as_str().unwrap().parse().unwrap(),
                code: event["responseStatus"]["code"].as_i64().unwrap_or_default(),
            });
        }
    }
    writes.sort_by_key(|w| w.at);
    writes
}

/// When `identity`'s fence closed at the latest: the last renewal of its Lease that the server accepted
/// (received time, after the replica took its send time) plus the renew deadline.
pub fn fence_deadline(writes: &[Write], namespace: &str) -> Timestamp {
    lease_deadline(writes, namespace, LEASE)
}

/// [`fence_deadline`] for the Lease `namespace/name` (a sharded replica's member Lease).
pub fn lease_deadline(writes: &[Write], namespace: &str, name: &str) -> Timestamp {
    let lease = format!("leases {namespace}/{name}");
    let renewed = writes
        .iter()
        .filter(|w| w.what == lease && (200..300).contains(&w.code))
        .map(|w| w.at)
        .max()
        .expect("the replica renewed its Lease at least once");
    renewed + TIMINGS.renew_deadline
}

/// The writes after `deadline`, as readable lines.
pub fn after(writes: &[Write], deadline: Timestamp) -> Vec<String> {
    writes
        .iter()
        .filter(|w| w.at > deadline)
        .map(Write::line)
        .collect()
}

impl Write {
    /// The write as a readable line: received, where, what, the answer and when.
    pub fn line(&self) -> String {
        format!(
            "{} {} {} {} -> {} at {}",
            self.at, self.cluster, self.verb, self.what, self.code, self.answered
        )
    }
}
