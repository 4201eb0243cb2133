//! AppDeployments whose spec cannot be fulfilled: the API server refuses them with the schema's reason; one
//! the schema lets through but the operator cannot fulfil (a namespace it does not own, which only the
//! operator knows) gets a status and an Event that say why, and no hot loop.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use kubeplex::Context as _;
use kubeplex_fleet::{AppDeployment, AppDeploymentSpec, Fleet};
use kubeplex_testenv::{Polling, eventually};

const WAIT: Duration = Duration::from_secs(60);

/// Within [`WAIT`], every 200 ms.
fn polling() -> Polling {
    Polling::within(WAIT).every(Duration::from_millis(200))
}

fn spec(image: &str, replicas: i32, namespaces: &[&str]) -> AppDeploymentSpec {
    AppDeploymentSpec {
        image: image.into(),
        replicas,
        namespaces: namespaces.iter().map(|n| (*n).to_owned()).collect(),
        rollout: None,
    }
}

#[tokio::test]
async fn the_api_server_refuses_specs_that_cannot_be_fulfilled_with_the_reason() {
    // The shared clusters' CRD has the rules; nothing runs on what this writes.
    let api = crate::support::stage("invalid").await.apps().await;
    for (name, spec, reason) in [
        (
            "spaces",
            spec("nginx 1.27", 1, &["namespace-a"]),
            "spec.image",
        ),
        ("empty-image", spec("", 1, &["namespace-a"]), "spec.image"),
        (
            "negative",
            spec("nginx", -1, &["namespace-a"]),
            "spec.replicas",
        ),
        // Which namespaces the operator owns is known only when it runs (checked by the reconcile, below);
        // the schema refuses what is no namespace name at all.
        (
            "bad-namespace-name",
            spec("nginx", 1, &["Bad_NS"]),
            "spec.namespaces[0]",
        ),
    ] {
        let refused = api
            .create(&PostParams::default(), &AppDeployment::new(name, spec))
            .await
            .expect_err(name);
        let kube::Error::Api(status) = refused else {
            panic!("{name}: {refused}")
        };
        assert_eq!(status.code, 422, "{name}: {status:?}");
        assert!(
            status.message.contains(reason),
            "{name}: {}",
            status.message
        );
    }
    api.create(
        &PostParams::default(),
        &AppDeployment::new("valid", spec("nginx:1.27", 1, &["namespace-b"])),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_stored_invalid_spec_gets_a_status_and_an_event_and_waits_for_a_fix() {
    let stage = crate::support::stage("stored-invalid").await;
    let control = stage.control().await;
    let api = stage.apps().await;
    let [owned, other] = &stage.children;
    let invalid = AppDeployment::new("invalid", spec("nginx:1.27", 1, &["kube-system"]));
    api.create(&PostParams::default(), &invalid).await.unwrap();

    let running = stage.operator(None).await;
    let ready = |app: &AppDeployment| {
        app.status.as_ref().and_then(|s| {
            s.fleet
                .conditions
                .iter()
                .find(|c| c.type_ == "Applied")
                .cloned()
        })
    };
    let failed = eventually("Applied=False", polling(), async || {
        let app = api.get("invalid").await.unwrap();
        match ready(&app).filter(|c| c.status == "False") {
            Some(condition) => Ok((app, condition)),
            None => Err(format!("{:?}", app.status)),
        }
    })
    .await;
    let (app, condition) = failed;
    assert_eq!(condition.reason, "ReconcileFailed");
    assert_eq!(
        condition.message,
        format!(
            "invalid spec: namespaces kube-system are not owned by this operator (it owns {owned}, {other})"
        )
    );

    // No retry and no hot loop: nothing changes while the spec stays as it is — watched past two error
    // requeues, when a retry would have come (and recorded a second Event) had the spec been retried.
    tokio::time::sleep(2 * kubeplex::plan::DEFAULT_ERROR_REQUEUE + Duration::from_secs(1)).await;
    let later = api.get("invalid").await.unwrap();
    assert_eq!(
        later.resource_version(),
        app.resource_version(),
        "{:?}",
        later.status
    );
    let events: Api<Event> = Api::namespaced(control.clone(), &stage.parents);
    let failures: Vec<Event> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("ReconcileFailed"))
        .collect();
    assert_eq!(failures.len(), 1, "{failures:#?}");
    assert!(
        failures[0]
            .note
            .as_deref()
            .unwrap_or_default()
            .contains("kube-system")
    );
    assert!(
        failures[0].series.is_none(),
        "one reconcile, one event: {:?}",
        failures[0].series
    );
    assert_eq!(
        failures[0].regarding.as_ref().and_then(|r| r.uid.clone()),
        app.meta().uid
    );

    // Fixed: reconciled at once, Applied.
    let fixed = serde_json::json!({ "spec": { "namespaces": [owned] } });
    api.patch("invalid", &PatchParams::default(), &Patch::Merge(&fixed))
        .await
        .unwrap();
    eventually("Applied", polling(), async || {
        let app = api.get("invalid").await.unwrap();
        match ready(&app).is_some_and(|c| c.status == "True") {
            true => Ok(()),
            false => Err(format!("{:?}", app.status)),
        }
    })
    .await;

    // Broken again, now with a child in place: the failed reconcile declares nothing, and nothing is
    // pruned. Had the runtime taken the failure for "no children", the owned namespace's Deployment would go
    // in the same reconcile that writes Ready=False.
    let child = || async {
        let cluster = stage.env.client(Fleet::ClusterA.name()).await.unwrap();
        Api::<Deployment>::namespaced(cluster, owned)
            .get_opt("invalid")
            .await
            .unwrap()
    };
    assert!(
        child().await.is_some(),
        "the fixed spec's child in cluster-a"
    );
    let broken = serde_json::json!({ "spec": { "namespaces": [other, "kube-system"] } });
    api.patch("invalid", &PatchParams::default(), &Patch::Merge(&broken))
        .await
        .unwrap();
    eventually("Applied=False again", polling(), async || {
        let app = api.get("invalid").await.unwrap();
        match ready(&app).is_some_and(|c| c.status == "False") {
            true => Ok(()),
            false => Err(format!("{:?}", app.status)),
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        child().await.is_some(),
        "a failed reconcile pruned the parent's child in {owned}"
    );
    crate::support::stop(running).await;
}
