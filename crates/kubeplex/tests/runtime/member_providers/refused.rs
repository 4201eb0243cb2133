//! A member that answers but refuses its leave's deletes (its credentials may create the children, not
//! delete them): under `delete` the leave does not end quietly. It is tried again and reported — the member
//! `leaving` with the refusal in `/readyz` and in the parents' status, a warning naming it in the log — and
//! its Secret keeps the finalizer while its children stay; once the deletes are allowed the children go, for
//! good, and so does the Secret.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use kube::runtime::watcher;
use kubeplex::prelude::*;
use kubeplex::{members::LeavePolicy, members::MEMBER_FINALIZER};
use kubeplex_testenv::eventually;
use parking_lot::Mutex;

use super::accounts::{MEMBER, account_token_without_delete, grant_delete, text, token_kubeconfig};
use super::unreachable::{finalizers, wait_leaving, wait_state};
use super::{env, member_secret, secrets_provider, start};
use crate::spread::{Spread, children, create_spread, prepare, spreader, wait_child};
use crate::support::audit::{deletes_of, lines, writes};
use crate::support::logs::Logs;
use crate::support::{Fleet, WAIT};

spreader!(RefusedLeave, "spread-refused");

/// The member's name (its Secret's label); the cluster behind it is cluster-c.
pub const REFUSING: &str = "cluster-c-refusing";

/// How long the member is watched once its leave ended, for a child put back: longer than two of the
/// leave's tries (one each 5 s) and a reconcile of every parent.
const SETTLE: Duration = Duration::from_secs(12);

#[tokio::test]
async fn a_leave_whose_deletes_are_refused_is_retried_and_reported_until_they_are_allowed() {
    let (logs, _logging) = Logs::capture(tracing::Level::WARN);
    let env = env().await;
    prepare(env).await;
    let accounts = env.create_namespace(&[MEMBER], "refused").await.unwrap();
    let token = account_token_without_delete(env, &accounts, "member").await;
    let user = format!("system:serviceaccount:{accounts}:member");
    let (secrets, provider) = secrets_provider(env).await;
    let running = start(env, RefusedLeave, provider, LeavePolicy::Delete).await;
    create_spread(env, "spread-refused", "web").await;
    let child = "web-refused-leave";
    let kubeconfig = text(&token_kubeconfig(env, &token));
    let secret = member_secret(REFUSING, Some(REFUSING), &kubeconfig);
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    wait_child(env, MEMBER, child, true).await;

    // Watched from now on: a child put back after the leave ended would show as an event.
    let members_children = children(env, MEMBER).await;
    let history = ChildHistory::follow(members_children.clone(), child).await;

    secrets
        .delete(REFUSING, &DeleteParams::default())
        .await
        .unwrap();
    let why = wait_leaving(&running, REFUSING).await;
    println!("/readyz: {REFUSING} leaving, waiting for {why}");
    assert!(why.contains("403") && why.contains(child), "{why}");
    let message = wait_state(env, "spread-refused", REFUSING, "Leaving").await;
    assert!(message.contains("403"), "{message}");
    // And an Event on the parent: what `kubectl describe` shows.
    let events: Api<Event> =
        Api::namespaced(env.client("control").await.unwrap(), "spread-refused");
    let event = eventually("a MemberLeaveWaits Event on the parent", WAIT, async || {
        let list = events.list(&Default::default()).await;
        let items = list.map_err(|e| e.to_string())?.items;
        let seen: Vec<String> = items
            .iter()
            .map(|e| {
                format!(
                    "{:?} on {:?}",
                    e.reason,
                    e.regarding.as_ref().and_then(|r| r.name.clone())
                )
            })
            .collect();
        let found = items.into_iter().find(|e| {
            e.reason.as_deref() == Some("MemberLeaveWaits")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("web")
        });
        found.ok_or_else(|| format!("none yet among {seen:?}"))
    })
    .await;
    let note = event.note.unwrap_or_default();
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert!(note.contains(REFUSING) && note.contains("403"), "{note}");
    let context = format!("cluster={REFUSING}");
    let warning = eventually("a warning naming the member", WAIT, async || {
        let lines = logs.lines();
        let found = lines
            .iter()
            .find(|l| l.contains(" WARN ") && l.contains(&context) && l.contains("403"));
        found.cloned().ok_or_else(|| lines.join("\n"))
    })
    .await;
    println!("log: {warning}");

    // Tried again, and held meanwhile: the member's audit log shows its refused deletes of the child (a try
    // each 5 s); the Secret keeps its finalizer and the child stays throughout.
    let refused = async || {
        let member = writes(env, MEMBER);
        let tries = deletes_of(&member, child).filter(|w| w.user == user && w.code == 403);
        tries.count()
    };
    let what = "three refused deletes of the child";
    eventually(what, WAIT, async || {
        let count = refused().await;
        assert_eq!(
            finalizers(&secrets, REFUSING).await,
            Some(vec![MEMBER_FINALIZER.to_owned()]),
            "the Secret was released while the child could not be deleted"
        );
        assert!(crate::spread::has_child(env, MEMBER, child).await);
        match count >= 3 {
            true => Ok(()),
            false => Err(format!("{count} so far")),
        }
    })
    .await;
    let (_, body) = crate::support::probe(running.probe_address().unwrap(), "/readyz").await;
    assert_eq!(
        body["clusters"][REFUSING]["member"]["phase"], "leaving",
        "{body:#}"
    );

    // Allowed: the next try deletes the child, then the Secret goes.
    grant_delete(env, &accounts, "member").await;
    eventually("the child deleted and the Secret gone", WAIT, async || {
        let found = members_children.get_opt(child).await;
        let found = found.map_err(|e| e.to_string())?;
        match (found, finalizers(&secrets, REFUSING).await) {
            (None, None) => Ok(()),
            (Some(_), None) => panic!("the Secret went while the child was still there"),
            (child, held) => Err(format!(
                "child present: {}, Secret: {held:?}",
                child.is_some()
            )),
        }
    })
    .await;
    let member = writes(env, MEMBER);
    let deleted = deletes_of(&member, child).filter(|w| w.user == user);
    assert!(
        deleted.clone().any(|w| w.accepted()),
        "the child went, but not by the member's delete:\n{}",
        lines(deleted)
    );
    let report = running.readiness();
    assert!(!report.clusters.contains_key(REFUSING), "{report:#?}");

    // And it stays gone: the child's events from before the leave until a while after it ended.
    tokio::time::sleep(SETTLE).await;
    assert_eq!(history.seen(), ["present", "deleted"]);
    crate::support::stop(running).await;
}

/// What a watch of one child saw, in order: `present` when it appeared or changed (after a step of another
/// kind), `deleted` when it went.
pub struct ChildHistory {
    seen: Arc<Mutex<Vec<&'static str>>>,
    task: tokio::task::JoinHandle<()>,
}

impl ChildHistory {
    /// Watches the child `name` of `api` from now on; returns once the watch has listed.
    pub async fn follow(api: kube::Api<ConfigMap>, name: &str) -> Self {
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let mut events = watcher(api, config).boxed();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (listed, started) = tokio::sync::oneshot::channel();
        let record = seen.clone();
        let task = tokio::spawn(async move {
            let mut listed = Some(listed);
            while let Some(event) = events.next().await {
                let step = match event {
                    Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) => {
                        match object.metadata.deletion_timestamp {
                            None => "present",
                            Some(_) => "deleting",
                        }
                    }
                    Ok(watcher::Event::Delete(_)) => "deleted",
                    Ok(watcher::Event::InitDone) => {
                        listed.take().map(|l| l.send(()));
                        continue;
                    }
                    Ok(watcher::Event::Init) => continue,
                    Err(error) => panic!("watching the child: {error}"),
                };
                let mut seen = record.lock();
                if seen.last() != Some(&step) {
                    seen.push(step);
                }
            }
        });
        tokio::time::timeout(WAIT, started).await.unwrap().unwrap();
        Self { seen, task }
    }

    pub fn seen(&self) -> Vec<&'static str> {
        self.seen.lock().clone()
    }
}

impl Drop for ChildHistory {
    fn drop(&mut self) {
        self.task.abort();
    }
}
