//! Four writers of one parent's status, in generated orders, on a real API server: kubeplex (its clusters
//! and `Applied`/`Ready`, by server-side apply), the user's reconciler (a condition of its own, by
//! server-side apply under its own field manager), another controller (its conditions, the same way) and a
//! writer that reads, edits and replaces the status (`Audited`, again on a conflict). Whatever the order, no
//! write removes another writer's conditions; once the writes stop, the status holds each writer's last
//! word, and a reconcile that changes nothing writes nothing.

use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kubeplex::{Manager, status::Condition};
use kubeplex_testenv::{TestEnv, eventually};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use super::parent::{Parent, ParentSpec, StatusWriters, reconciles};
use super::wait::{condition, create_parent};
use crate::support::{audit, create_namespace, polling, wait_started};

const NAMESPACE: &str = "status-writers";
/// The conditions the other controller may write.
const OTHERS: [&str; 2] = ["Scheduled", "Quota"];
/// The conditions the user's reconciler may write, one at a time.
const OWN: [&str; 2] = ["Configured", "Tuned"];

/// One write, in the order a case gives them.
#[derive(Clone, Debug)]
enum Write {
    /// The spec changes: the user's reconciler writes `own` (dropping the one it wrote before), and kubeplex
    /// its part, failed or not.
    Spec { fail: bool, own: &'static str },
    /// The other controller applies these conditions (type, `True`?) and no others of its own.
    Other(Vec<(&'static str, bool)>),
    /// The status is read, `Audited` set to `True` or `False`, and the status replaced.
    Audited(bool),
}

fn write() -> impl Strategy<Value = Write> {
    let other = prop::sample::subsequence(OTHERS.to_vec(), 0..=2)
        .prop_flat_map(|types| {
            let n = types.len();
            (Just(types), prop::collection::vec(any::<bool>(), n))
        })
        .prop_map(|(types, statuses)| Write::Other(types.into_iter().zip(statuses).collect()));
    prop_oneof![
        (any::<bool>(), prop::sample::select(OWN.to_vec()))
            .prop_map(|(fail, own)| Write::Spec { fail, own }),
        other,
        any::<bool>().prop_map(Write::Audited),
    ]
}

/// What the status must hold once the writes stop: each writer's last word.
#[derive(Debug)]
struct Expected {
    fail: bool,
    own: &'static str,
    other: Vec<(&'static str, bool)>,
    audited: Option<bool>,
}

fn condition_of(type_: &str, status: bool, reason: &str) -> Condition {
    Condition {
        type_: type_.to_owned(),
        status: if status { "True" } else { "False" }.to_owned(),
        reason: reason.to_owned(),
        message: format!("set by {reason}"),
        last_transition_time: Time(Timestamp::UNIX_EPOCH),
        observed_generation: None,
    }
}

/// Whether `parent` has exactly the other controller's `expected` conditions.
fn has_others(parent: &Parent, expected: &[(&str, bool)]) -> Result<(), String> {
    for type_ in OTHERS {
        let want = expected.iter().find(|(t, _)| *t == type_).map(|(_, s)| *s);
        let got = condition(parent, type_).map(|c| c.status == "True");
        if want != got {
            return Err(format!("{type_}: wanted {want:?}, found {got:?}"));
        }
    }
    Ok(())
}

/// Whether `parent` has `Audited` as `expected`.
fn has_audited(parent: &Parent, expected: Option<bool>) -> Result<(), String> {
    let got = condition(parent, "Audited").map(|c| c.status == "True");
    match got == expected {
        true => Ok(()),
        false => Err(format!("Audited: wanted {expected:?}, found {got:?}")),
    }
}

/// Whether every writer's last word is in `parent`'s status, and nothing else.
fn settled(parent: &Parent, expected: &Expected) -> Result<(), String> {
    let generation = parent.metadata.generation;
    let applied = condition(parent, "Applied").ok_or("no Applied")?;
    if applied.observed_generation != generation {
        return Err(format!(
            "Applied is of generation {:?}",
            applied.observed_generation
        ));
    }
    let status = if expected.fail { "False" } else { "True" };
    for type_ in ["Applied", "Ready"] {
        let found = condition(parent, type_).map(|c| c.status.as_str());
        if found != Some(status) {
            return Err(format!("{type_} is {found:?}, not {status}"));
        }
    }
    for own in OWN {
        if condition(parent, own).is_some() != (own == expected.own) {
            return Err(format!(
                "the reconciler's {own}: wanted only {}",
                expected.own
            ));
        }
    }
    has_others(parent, &expected.other)?;
    has_audited(parent, expected.audited)?;
    let count = parent
        .status
        .as_ref()
        .map_or(0, |s| s.fleet.conditions.len());
    let wanted = 3 + expected.other.len() + usize::from(expected.audited.is_some());
    match count == wanted {
        true => Ok(()),
        false => Err(format!("{count} conditions, not {wanted}")),
    }
}

/// Sets `Audited` by reading the status, editing it and replacing it; again on a conflict.
async fn audit_status(api: &Api<Parent>, name: &str, status: bool) {
    eventually("the status replaced with Audited", polling(), async || {
        let mut parent = api.get_status(name).await.unwrap();
        let conditions = &mut parent.status.get_or_insert_default().fleet.conditions;
        conditions.retain(|c| c.type_ != "Audited");
        conditions.push(condition_of("Audited", status, "auditor"));
        match api
            .replace_status(name, &PostParams::default(), &parent)
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => Err("409".to_owned()),
            Err(error) => panic!("replacing the status: {error}"),
        }
    })
    .await;
}

/// Runs `writes` on a new parent, checking after each that no other writer's conditions were lost, then
/// that the status settles on every writer's last word and that an idle reconcile writes nothing.
async fn case(env: &TestEnv, control: &Client, name: &str, writes: Vec<Write>) {
    let api: Api<Parent> = Api::namespaced(control.clone(), NAMESPACE);
    let mut expected = Expected {
        fail: false,
        own: OWN[0],
        other: Vec::new(),
        audited: None,
    };
    let spec = |fail, own: &str| ParentSpec {
        children: vec![format!("{name}-child")],
        fail,
        own_condition: Some(own.to_owned()),
    };
    create_parent(control, NAMESPACE, name, spec(false, OWN[0])).await;
    for write in writes {
        match write {
            Write::Spec { fail, own } => {
                let patch = serde_json::json!({ "spec": spec(fail, own) });
                api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .unwrap();
                (expected.fail, expected.own) = (fail, own);
            }
            Write::Other(conditions) => {
                let list: Vec<Condition> = (conditions.iter())
                    .map(|(type_, status)| condition_of(type_, *status, "other"))
                    .collect();
                let status = serde_json::json!({
                    "apiVersion": "test.kubeplex.dev/v1", "kind": "Parent",
                    "status": { "conditions": list },
                });
                let params = PatchParams::apply("other-controller");
                api.patch_status(name, &params, &Patch::Apply(&status))
                    .await
                    .unwrap();
                expected.other = conditions;
            }
            Write::Audited(status) => {
                audit_status(&api, name, status).await;
                expected.audited = Some(status);
            }
        }
        // Whatever kubeplex and the reconciler wrote meanwhile, the other writers' conditions are there.
        let parent = api.get_status(name).await.unwrap();
        has_others(&parent, &expected.other).unwrap();
        has_audited(&parent, expected.audited).unwrap();
    }
    eventually("every writer's last word", polling(), async || {
        let parent = api.get_status(name).await.unwrap();
        settled(&parent, &expected).map(|()| parent)
    })
    .await;

    // Settled: a reconcile writes nothing. The second nudge's reconcile begins only once the first's ended
    // (one reconcile of a parent at a time), status write included.
    let before = Timestamp::now();
    for round in 1..=2 {
        let started = reconciles(NAMESPACE, name);
        let nudge = serde_json::json!({ "metadata": { "annotations": { "test.kubeplex.dev/nudge": round.to_string() } } });
        api.patch(name, &PatchParams::default(), &Patch::Merge(&nudge))
            .await
            .unwrap();
        eventually("a reconcile after the nudge", polling(), async || {
            (reconciles(NAMESPACE, name) > started).then_some(())
        })
        .await;
    }
    let subject = format!("/{NAMESPACE}/{name}");
    let idle_writes: Vec<_> = (audit::writes(env, "control").into_iter())
        .filter(|w| w.at >= before && w.what.ends_with(&subject))
        .filter(|w| w.uri.contains("fieldManager=status-writers"))
        .collect();
    assert!(
        idle_writes.is_empty(),
        "a reconcile with nothing to change wrote the status:\n{}",
        audit::lines(&idle_writes)
    );
    let parent = api.get_status(name).await.unwrap();
    settled(&parent, &expected).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_writer_loses_its_conditions_to_another_in_any_order_of_writes() {
    let env = super::env().await;
    let control = env.client("control").await.unwrap();
    let cluster_a = env.client("cluster-a").await.unwrap();
    create_namespace(&cluster_a, "kids").await;
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(StatusWriters)
        .start()
        .await
        .unwrap();
    wait_started(&running, "status-writers started").await;

    // Proptest's cases are plain functions: they run on a blocking thread, each driven on this runtime.
    let runtime = tokio::runtime::Handle::current();
    let cases = AtomicUsize::new(0);
    let outcome = tokio::task::spawn_blocking(move || {
        let config = Config {
            cases: 12,
            failure_persistence: None,
            max_shrink_iters: 16,
            ..Config::default()
        };
        let writes = prop::collection::vec(write(), 1..8);
        TestRunner::new(config).run(&writes, |writes| {
            let name = format!("writers-{}", cases.fetch_add(1, Ordering::Relaxed));
            runtime.block_on(case(env, &control, &name, writes));
            Ok(())
        })
    })
    .await
    .unwrap();
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
    crate::support::stop(running).await;
}
