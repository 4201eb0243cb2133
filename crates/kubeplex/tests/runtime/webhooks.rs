//! Webhooks on a real API server: it calls the operator's validating, mutating and conversion handlers over
//! HTTPS (the webhook configurations and the CRD's conversion name them by URL, trusting a test CA); a
//! refusal reaches the client with the handler's message, a mutation is applied, an object written in one
//! version reads back in the other and unchanged, a handler that panics answers by the failure policy, and
//! the server's metrics count each; all answered by a standby replica. With the operator down, the API
//! server refuses by `failurePolicy: Fail` and admits by `Ignore`.

mod ca;

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, PostParams};
use kube::core::DynamicObject;
use kube::{CustomResource, CustomResourceExt, ResourceExt};
use kubeplex::ha::LeaderElection;
use kubeplex::webhook::{
    AdmissionRequest, Convert, FleetView, Mutate, Validate, Webhooks, mutating_path,
    validating_path,
};
use kubeplex::{ContextName, Manager};
use kubeplex_testenv::eventually;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::children::parent::{CLUSTER_A, CONTROL, Parent, ParentSpec, config_map_parents};
use crate::support::{create_namespace, http_get, polling, stop, wait_started};

/// The namespace whose Parents the webhooks see (the configurations select it, so no other test's are).
const NAMESPACE: &str = "webhooks";
/// The annotation naming the cluster a Parent is for: refused unless the fleet has it.
const CLUSTER: &str = "test.kubeplex.dev/cluster";
/// The annotation that makes the validator panic.
const PANIC: &str = "test.kubeplex.dev/panic";

config_map_parents!(
    Parents,
    "webhook-parents",
    "webhooks",
    [CLUSTER_A],
    "webhook-kids"
);

/// Refuses a Parent for a cluster the fleet does not have, or one wanting a child another Parent (in the
/// controller's cache) wants already.
struct Placement;

impl Validate for Placement {
    type Context = ContextName;
    type Kind = Parent;

    async fn validate(
        &self,
        request: &AdmissionRequest<Parent>,
        fleet: &FleetView<ContextName>,
    ) -> Result<(), String> {
        let Some(parent) = &request.object else {
            return Ok(());
        };
        if parent.annotations().contains_key(PANIC) {
            panic!("a handler's bug");
        }
        if let Some(cluster) = parent.annotations().get(CLUSTER)
            && !fleet.has_cluster(cluster)
        {
            return Err(format!("cluster {cluster} is not in the fleet"));
        }
        let others = fleet.cached::<Parent>(CONTROL).map_err(|e| e.to_string())?;
        for other in others.iter().filter(|o| o.name_any() != parent.name_any()) {
            if let Some(taken) =
                (parent.spec.children.iter()).find(|c| other.spec.children.contains(c))
            {
                return Err(format!(
                    "child {taken} is wanted by parent {} already",
                    other.name_any()
                ));
            }
        }
        Ok(())
    }
}

/// Gives a Parent without its own condition one, and a label saying so.
struct Defaults;

impl Mutate for Defaults {
    type Context = ContextName;
    type Kind = Parent;

    async fn mutate(
        &self,
        parent: &mut Parent,
        _: &AdmissionRequest<Parent>,
        _: &FleetView<ContextName>,
    ) -> Result<(), String> {
        if parent.spec.own_condition.is_none() {
            parent.spec.own_condition = Some("Defaulted".into());
            parent
                .labels_mut()
                .insert("defaulted".into(), "true".into());
        }
        Ok(())
    }
}

/// A Widget in its two versions: `replicas` at the top of the spec in v1, under `scale` in v2.
mod v1 {
    use super::*;

    #[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
    #[kube(
        group = "webhooks.test.kubeplex.dev",
        version = "v1",
        kind = "Widget",
        namespaced
    )]
    pub struct WidgetSpec {
        pub replicas: i32,
    }
}

mod v2 {
    use super::*;

    #[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
    #[kube(
        group = "webhooks.test.kubeplex.dev",
        version = "v2",
        kind = "Widget",
        namespaced
    )]
    pub struct WidgetSpec {
        pub scale: Scale,
    }

    #[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
    pub struct Scale {
        pub replicas: i32,
    }
}

struct Replicas;

impl Convert for Replicas {
    fn convert(
        &self,
        mut widget: DynamicObject,
        api_version: &str,
    ) -> Result<DynamicObject, String> {
        let spec = &mut widget.data["spec"];
        *spec = match api_version {
            "webhooks.test.kubeplex.dev/v2" => json!({ "scale": { "replicas": spec["replicas"] } }),
            "webhooks.test.kubeplex.dev/v1" => json!({ "replicas": spec["scale"]["replicas"] }),
            other => return Err(format!("no version {other}")),
        };
        Ok(widget)
    }
}

/// The Widget CRD serving both versions (v1 stored), converted by the webhook at `url`.
fn widget_crd(url: &str, ca_bundle: &str) -> CustomResourceDefinition {
    let crd =
        kube::core::crd::merge_crds(vec![v1::Widget::crd(), v2::Widget::crd()], "v1").unwrap();
    let mut crd = serde_json::to_value(crd).unwrap();
    crd["spec"]["conversion"] = json!({ "strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"],
        "clientConfig": { "url": url, "caBundle": ca_bundle } } });
    serde_json::from_value(crd).unwrap()
}

/// One webhook of a configuration, for Parents in [`NAMESPACE`], called at `url`.
fn webhook(name: &str, url: &str, ca_bundle: &str) -> serde_json::Value {
    json!({ "name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
        "failurePolicy": "Fail", "timeoutSeconds": 10,
        "clientConfig": { "url": url, "caBundle": ca_bundle },
        "namespaceSelector": { "matchLabels": { "kubernetes.io/metadata.name": NAMESPACE } },
        "rules": [{ "apiGroups": ["test.kubeplex.dev"], "apiVersions": ["v1"], "resources": ["parents"],
            "operations": ["CREATE", "UPDATE"] }] })
}

fn parent(name: &str, children: &[&str], annotations: &[(&str, &str)]) -> Parent {
    let spec = ParentSpec {
        children: children.iter().map(|c| c.to_string()).collect(),
        ..Default::default()
    };
    let mut parent = Parent::new(name, spec);
    let annotations = annotations
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()));
    parent.metadata.annotations = Some(annotations.collect::<BTreeMap<_, _>>());
    parent
}

/// Why the API server refused to create `parent`; panics if it created it.
async fn refusal(parents: &Api<Parent>, parent: &Parent) -> String {
    match parents.create(&PostParams::default(), parent).await {
        Err(kube::Error::Api(status)) => status.message,
        other => panic!("{} was not refused: {other:?}", parent.name_any()),
    }
}

#[tokio::test]
async fn the_api_server_calls_the_handlers_which_see_the_fleet() {
    let env = crate::support::clusters([("control", Parent::crd())]).await;
    let control = env.client("control").await.unwrap();
    create_namespace(&control, NAMESPACE).await;
    create_namespace(&env.client("cluster-a").await.unwrap(), "webhook-kids").await;
    let (ca, serving, key) = crate::support::certificates::localhost();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tls.crt"), serving.pem()).unwrap();
    std::fs::write(dir.path().join("tls.key"), key.serialize_pem()).unwrap();
    let webhooks = Webhooks::new("127.0.0.1:0")
        .cert_dir(dir.path())
        .validate(Placement)
        .mutate(Defaults)
        .convert::<v1::Widget, _>(Replicas);
    // A stranger holds the Lease for longer than the test: this replica stands by throughout, its
    // controller's caches warm, and answers the webhooks all the same.
    let leases: Api<Lease> = Api::namespaced(control.clone(), NAMESPACE);
    let stranger: Lease = serde_json::from_value(json!({
        "metadata": { "name": "webhooks" },
        "spec": { "holderIdentity": "stranger", "leaseDurationSeconds": i32::MAX,
            "renewTime": k8s_openapi::jiff::Timestamp::now().to_string() } }))
    .unwrap();
    leases
        .create(&PostParams::default(), &stranger)
        .await
        .unwrap();
    let election = LeaderElection::new(CONTROL, NAMESPACE, "webhooks")
        .with_identity("webhook-replica")
        .lease_duration(Duration::from_secs(600))
        .renew_deadline(Duration::from_secs(500))
        .retry_period(Duration::from_secs(1));
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .probes("127.0.0.1:0")
        .leader_election(election)
        .webhooks(webhooks)
        .controller(Parents)
        .start()
        .await
        .unwrap();
    wait_started(&running, "the operator starts").await;
    let base = format!(
        "https://127.0.0.1:{}",
        running.webhook_address().unwrap().port()
    );
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(ca.pem());
    assert_eq!(
        running.webhook_ca_bundle(),
        None,
        "a certificate directory has no bundle of ours"
    );

    let validating: ValidatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": { "name": "kubeplex-test-validate" },
        "webhooks": [webhook("placement.test.kubeplex.dev",
            &format!("{base}{}", validating_path::<Parent>()), &ca_bundle)] }))
    .unwrap();
    let mutating: MutatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": { "name": "kubeplex-test-mutate" },
        "webhooks": [webhook("defaults.test.kubeplex.dev",
            &format!("{base}{}", mutating_path::<Parent>()), &ca_bundle)] }))
    .unwrap();
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(control.clone());
    configs
        .create(&PostParams::default(), &validating)
        .await
        .unwrap();
    let configs: Api<MutatingWebhookConfiguration> = Api::all(control.clone());
    configs
        .create(&PostParams::default(), &mutating)
        .await
        .unwrap();

    // The API server takes up new configurations within a moment: wait until a dry run is refused.
    let parents: Api<Parent> = Api::namespaced(control.clone(), NAMESPACE);
    let elsewhere = parent("elsewhere", &[], &[(CLUSTER, "cluster-x")]);
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    eventually(
        "the validating webhook called",
        polling(),
        async || match parents.create(&dry_run, &elsewhere).await {
            Err(kube::Error::Api(status)) => Some(status.message),
            _ => None,
        },
    )
    .await;
    let refused = refusal(&parents, &elsewhere).await;
    assert!(
        refused.contains("cluster cluster-x is not in the fleet"),
        "{refused}"
    );
    assert!(refused.contains("placement.test.kubeplex.dev"), "{refused}");

    // A cluster of the fleet is admitted, and the mutation applied (a dry run answers with the object as
    // it would be stored: once it has the label, the API server calls the mutating webhook).
    let here = parent("here", &["shared-child"], &[(CLUSTER, "cluster-a")]);
    eventually("the mutating webhook called", polling(), async || {
        let answer = parents.create(&dry_run, &here).await.unwrap();
        answer.labels().contains_key("defaulted").then_some(())
    })
    .await;
    let created = parents.create(&PostParams::default(), &here).await.unwrap();
    assert_eq!(created.spec.own_condition.as_deref(), Some("Defaulted"));
    assert_eq!(
        created.labels().get("defaulted").map(String::as_str),
        Some("true")
    );

    // The validator reads the controller's cache: a second parent wanting the same child is refused once
    // the cache has the first.
    let second = parent("second", &["shared-child"], &[]);
    let refused = eventually("the first parent cached", polling(), async || match parents
        .create(&dry_run, &second)
        .await
    {
        Err(kube::Error::Api(status)) => Some(status.message),
        _ => None,
    })
    .await;
    assert!(
        refused.contains("child shared-child is wanted by parent here already"),
        "{refused}"
    );

    // A handler that panics answers by the failure policy (refused), saying so.
    let panics = parent("panics", &[], &[(PANIC, "yes")]);
    let refused = refusal(&parents, &panics).await;
    assert!(refused.contains("the handler panicked"), "{refused}");

    // Conversion: written in v1, read in v2, written in v2, read in v1; each unchanged.
    let url = format!("{base}/convert");
    env.install_crd("control", widget_crd(&url, &ca_bundle))
        .await
        .unwrap();
    let widgets_v1: Api<v1::Widget> = Api::namespaced(control.clone(), NAMESPACE);
    let widgets_v2: Api<v2::Widget> = Api::namespaced(control.clone(), NAMESPACE);
    let one = v1::Widget::new("one", v1::WidgetSpec { replicas: 3 });
    let one = eventually("the v1 Widget created", polling(), async || {
        widgets_v1.create(&PostParams::default(), &one).await.ok()
    })
    .await;
    let read = widgets_v2.get("one").await.unwrap();
    assert_eq!(read.spec.scale.replicas, 3);
    assert_eq!(read.metadata.uid, one.metadata.uid);
    let two = v2::Widget::new(
        "two",
        v2::WidgetSpec {
            scale: v2::Scale { replicas: 5 },
        },
    );
    widgets_v2
        .create(&PostParams::default(), &two)
        .await
        .unwrap();
    assert_eq!(widgets_v1.get("two").await.unwrap().spec.replicas, 5);
    assert_eq!(widgets_v2.get("two").await.unwrap().spec.scale.replicas, 5);

    let metrics = http_get(running.probe_address().unwrap(), "/metrics")
        .await
        .body;
    let validate = validating_path::<Parent>();
    for series in [
        format!("controller_runtime_webhook_requests_total{{webhook=\"{validate}\",code=\"200\"}}"),
        format!("kubeplex_webhook_denials_total{{webhook=\"{validate}\"}}"),
        format!("kubeplex_webhook_failures_total{{webhook=\"{validate}\",reason=\"panic\"}}"),
        "controller_runtime_webhook_requests_total{webhook=\"/convert\",code=\"200\"}".into(),
        format!("controller_runtime_webhook_latency_seconds_count{{webhook=\"{validate}\"}}"),
    ] {
        assert!(metrics.contains(&series), "no {series} in:\n{metrics}");
    }

    let standby = running.readiness().leadership.map(|l| l.role);
    assert_eq!(
        standby,
        Some("standby"),
        "the replica answered as a standby"
    );

    // With the operator down, the API server refuses by `failurePolicy: Fail`, and admits by `Ignore`.
    stop(running).await;
    let unchecked = parent("unchecked", &[], &[(CLUSTER, "cluster-x")]);
    let refused = refusal(&parents, &unchecked).await;
    assert!(refused.contains("failed calling webhook"), "{refused}");
    let configs: Api<MutatingWebhookConfiguration> = Api::all(control.clone());
    configs
        .delete("kubeplex-test-mutate", &DeleteParams::default())
        .await
        .unwrap();
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(control.clone());
    let mut ignored = validating.clone();
    ignored.webhooks.as_mut().unwrap()[0].failure_policy = Some("Ignore".into());
    ignored.metadata.resource_version = configs
        .get("kubeplex-test-validate")
        .await
        .unwrap()
        .metadata
        .resource_version;
    configs
        .replace("kubeplex-test-validate", &PostParams::default(), &ignored)
        .await
        .unwrap();
    eventually("admitted by failurePolicy: Ignore", polling(), async || {
        parents.create(&dry_run, &unchecked).await.ok()
    })
    .await;
    configs
        .delete("kubeplex-test-validate", &DeleteParams::default())
        .await
        .unwrap();
}
