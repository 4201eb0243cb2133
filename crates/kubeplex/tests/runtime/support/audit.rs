//! What an API server's audit log says it was asked: each request (or only each create, update, patch or
//! delete) it received, by whom (the user, and the `User-Agent` that names a replica: `kubeplex/<version> (<identity>)`), when, and
//! how it was answered.

use k8s_openapi::jiff::Timestamp;
use kubeplex_testenv::TestEnv;

const WRITE_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

/// One request the server received.
#[derive(Clone, Debug)]
pub struct Request {
    pub verb: String,
    /// `resource[/subresource] namespace/name`.
    pub what: String,
    /// The path and query it was sent to.
    pub uri: String,
    pub user: String,
    pub agent: String,
    /// When the server received it.
    pub at: Timestamp,
    pub code: i64,
}

impl Request {
    /// Whether the replica `identity` sent it (its `User-Agent` names it).
    pub fn by(&self, identity: &str) -> bool {
        self.agent.ends_with(&format!("({identity})"))
    }

    /// Whether it was accepted.
    pub fn accepted(&self) -> bool {
        (200..300).contains(&self.code)
    }
}

impl std::fmt::Display for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self {
            verb,
            what,
            uri: _,
            user,
            agent,
            at,
            code,
        } = self;
        write!(f, "{at} {verb} {what} -> {code} by {user} ({agent})")
    }
}

/// Every write `cluster`'s API server received so far, oldest first.
pub fn writes(env: &TestEnv, cluster: &str) -> Vec<Request> {
    let mut writes = requests(env, cluster);
    writes.retain(|r| WRITE_VERBS.contains(&r.verb.as_str()));
    writes
}

/// Every request `cluster`'s API server received so far (reads too), oldest first.
pub fn requests(env: &TestEnv, cluster: &str) -> Vec<Request> {
    let mut requests = Vec::new();
    for event in env.audit_events(cluster).unwrap() {
        let verb = event["verb"].as_str().unwrap_or_default();
        // One event per request: the last stage's (a watch also has `ResponseStarted`).
        if event["stage"] != "ResponseComplete" {
            continue;
        }
        let object = &event["objectRef"];
        let field = |k: &str| object[k].as_str().unwrap_or_default().to_owned();
        let subresource = match field("subresource") {
            none if none.is_empty() => none,
            some => format!("/{some}"),
        };
        let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
        requests.push(Request {
            verb: verb.to_owned(),
            what: format!(
                "{}{subresource} {}/{}",
                field("resource"),
                field("namespace"),
                field("name")
            ),
            uri: text(&event["requestURI"]),
            user: text(&event["user"]["username"]),
            agent: text(&event["userAgent"]),
            at: text(&event["requestReceivedTimestamp"]).parse().unwrap(),
            code: event["responseStatus"]["code"].as_i64().unwrap_or_default(),
        });
    }
    requests.sort_by_key(|r| r.at);
    requests
}

/// The deletes of `child` (a namespaced object named so) among `writes`.
pub fn deletes_of<'a>(
    writes: &'a [Request],
    child: &str,
) -> impl Iterator<Item = &'a Request> + Clone {
    let suffix = format!("/{child}");
    let deletes = writes.iter().filter(|w| w.verb == "delete");
    deletes.filter(move |w| w.what.ends_with(&suffix))
}

/// `requests` as lines, for a failure's message.
pub fn lines<'a>(requests: impl IntoIterator<Item = &'a Request>) -> String {
    let lines: Vec<String> = requests.into_iter().map(Request::to_string).collect();
    lines.join("\n")
}
