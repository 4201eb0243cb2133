//! Admission webhooks are served by every replica, not only the leader: with the configurations calling a
//! standby, the API server's admission calls are answered by it before and while the leader is frozen.

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use kubeplex_fleet::AppDeployment;
use kubeplex_fleet::admission::{self, CONFIGURATION, Endpoint};
use serde_json::json;

use super::replica::{Replica, logs, until};
use crate::{WAIT, one_leader, setup};

/// The validating webhook's words for a rollout order naming a cluster the fleet does not have.
const REFUSAL: &str = "spec.rollout.order names clusters the fleet does not have: cluster-x";
/// Until the first refusal: a replica tries again within seconds to write its CA into configurations that
/// did not exist at its first look; a minute for a loaded machine.
const CA_WRITTEN: Duration = Duration::from_secs(60);

/// An AppDeployment `name` with this rollout order and no strategy (the mutating webhook's to write in),
/// untyped: what the API server gets, whatever the crate's struct.
fn app(resource: &ApiResource, name: &str, order: &[&str]) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": resource.api_version, "kind": resource.kind,
        "metadata": { "name": name },
        "spec": { "image": "nginx:1.27", "replicas": 1, "rollout": { "order": order } },
    }))
    .unwrap()
}

/// Why the API server refused to create `app` (in a dry run), or what it did instead.
async fn refused(apps: &Api<DynamicObject>, app: &DynamicObject) -> Result<String, String> {
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    match apps.create(&dry_run, app).await {
        Err(kube::Error::Api(status)) if status.message.contains(REFUSAL) => Ok(status.message),
        other => Err(format!("{other:?}")),
    }
}

/// Registers both webhook configurations for AppDeployments of `namespace`, calling `port` on loopback;
/// the replicas write their CA into the `caBundle`.
async fn register(control: &Client, namespace: &str, port: u16) {
    let endpoint = Endpoint::Url(format!("https://127.0.0.1:{port}"));
    let (validating, mutating) = admission::configurations(&endpoint, namespace, "Fail", 10);
    let post = PostParams::default();
    // A run that failed earlier on these clusters (they may be attached to) can have left them.
    let delete = DeleteParams::default();
    let api = Api::<ValidatingWebhookConfiguration>::all(control.clone());
    api.delete(CONFIGURATION, &delete).await.ok();
    api.create(&post, &validating).await.unwrap();
    let api = Api::<MutatingWebhookConfiguration>::all(control.clone());
    api.delete(CONFIGURATION, &delete).await.ok();
    api.create(&post, &mutating).await.unwrap();
}

/// Deletes both configurations, which are cluster-scoped. A failed test leaves them: their namespaceSelector
/// confines them to its own namespace, and the next registration on these clusters deletes them first.
async fn unregister(control: &Client) {
    let delete = DeleteParams::default();
    let api = Api::<ValidatingWebhookConfiguration>::all(control.clone());
    api.delete(CONFIGURATION, &delete).await.unwrap();
    let api = Api::<MutatingWebhookConfiguration>::all(control.clone());
    api.delete(CONFIGURATION, &delete).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_standby_answers_the_webhooks_while_the_leader_is_frozen() {
    let (env, ns, control) = setup("ha-hook").await;
    let replicas: Vec<Replica> = (1..=2)
        .map(|n| Replica::start_with_webhooks(env, &ns, &format!("hook-{n}")))
        .collect();
    let all: Vec<&Replica> = replicas.iter().collect();
    let leader_at = one_leader(&control, &ns, &all).await;
    let (leader, standby) = (&replicas[leader_at], &replicas[1 - leader_at]);
    let port = until("the standby serves webhooks", WAIT, &all, async || {
        standby
            .webhook_port()
            .ok_or("no webhook line yet".to_owned())
    })
    .await;
    // Only the standby is called: were webhooks served by the leader alone, nothing would answer.
    register(&control, &ns, port).await;

    let resource = ApiResource::erase::<AppDeployment>(&());
    let apps = Api::<DynamicObject>::namespaced_with(control.clone(), &ns, &resource);
    let elsewhere = app(&resource, "elsewhere", &["cluster-x"]);
    let what = "the standby's refusal, once its CA is in the caBundle";
    let registered = tokio::time::Instant::now();
    let first = until(what, CA_WRITTEN, &all, async || {
        refused(&apps, &elsewhere).await
    })
    .await;
    let waited = registered.elapsed();
    eprintln!(
        "{} (standby) refused {waited:?} after the registration: {first}",
        standby.identity
    );
    // It answered as a standby: the leadership did not move meanwhile.
    let role = standby.role().await;
    let expected = ("standby".to_owned(), leader.identity.clone());
    assert_eq!(role, Some(expected), "{}", logs(&all));

    leader.signal("STOP");
    let stopped = tokio::time::Instant::now();
    // One call each, no retry: the standby answers at once, frozen leader or not (the Drop of a replica
    // kills it even if stopped, should an assertion fail before the SIGCONT).
    let refusal = refused(&apps, &elsewhere).await;
    let created = apps
        .create(
            &PostParams::default(),
            &app(&resource, "ordered", &["cluster-a"]),
        )
        .await;
    let answered = stopped.elapsed();
    // The freeze was real: the leader's probes do not answer either.
    let frozen = leader.role().await;
    leader.signal("CONT");
    assert_eq!(frozen, None, "the stopped leader answered its probe");
    let refusal = refusal.unwrap_or_else(|other| panic!("not refused: {other}\n{}", logs(&all)));
    let created = created.unwrap_or_else(|e| panic!("not admitted: {e}\n{}", logs(&all)));
    let rollout = &created.data["spec"]["rollout"];
    assert_eq!(
        rollout["strategy"], "OneClusterAtATime",
        "the mutating webhook did not write the strategy in: {rollout}"
    );
    assert_eq!(rollout["order"], json!(["cluster-a"]), "{rollout}");
    eprintln!(
        "{} frozen: {} refused ({refusal}) and admitted one with the strategy written in, in {answered:?}",
        leader.identity, standby.identity
    );
    unregister(&control).await;
}
