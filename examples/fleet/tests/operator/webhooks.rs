//! The example's webhooks on the shared clusters: the API server refuses an AppDeployment whose rollout
//! order names a cluster the fleet does not have, or whose namespaces the operator does not own, saying
//! which; writes a rollout's strategy in; serves `v2` converted by the operator, an object written in
//! either version reconciled and read in the other; and trusts the operator by the CA it keeps in the
//! configurations' and the CRD's `caBundle` (`fleet webhooks` and `fleet crd` print them, with a URL here as
//! the operator runs in this process).

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt as _;
use kube::api::{Api, DeleteParams, PostParams};
use kubeplex_fleet::admission::{self, CONFIGURATION, Endpoint};
use kubeplex_fleet::{AppDeployment, AppDeploymentSpec, Rollout, RolloutStrategy, v2};

use crate::support::{eventually, stage, started, stop};

fn app(name: &str, namespaces: &[&str], order: &[&str]) -> AppDeployment {
    let rollout = (!order.is_empty()).then(|| Rollout {
        strategy: None,
        order: order.iter().map(|o| o.to_string()).collect(),
    });
    let spec = AppDeploymentSpec {
        image: "nginx:1.27".into(),
        replicas: 1,
        namespaces: namespaces.iter().map(|n| n.to_string()).collect(),
        rollout,
    };
    AppDeployment::new(name, spec)
}

#[tokio::test]
async fn an_app_deployment_the_fleet_cannot_fulfil_is_refused_when_written() {
    let stage = stage("webhooks").await;
    let owns = stage.children.to_vec();
    let webhooks = admission::webhooks(owns, "127.0.0.1:0".into(), None, &stage.parents, vec![]);
    let running = started(stage.manager().webhooks(webhooks)).await;
    let port = running.webhook_address().unwrap().port();
    let endpoint = Endpoint::Url(format!("https://127.0.0.1:{port}"));
    let (validating, mutating) = admission::configurations(&endpoint, &stage.parents, "Fail", 10);
    let control = stage.control().await;
    let _cluster_wide = crate::support::CLUSTER_WIDE.lock().await;
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(control.clone());
    let mutations: Api<MutatingWebhookConfiguration> = Api::all(control.clone());
    // A run that failed earlier on these clusters (they may be attached to) can have left them.
    configs
        .delete(CONFIGURATION, &DeleteParams::default())
        .await
        .ok();
    mutations
        .delete(CONFIGURATION, &DeleteParams::default())
        .await
        .ok();
    configs
        .create(&PostParams::default(), &validating)
        .await
        .unwrap();
    mutations
        .create(&PostParams::default(), &mutating)
        .await
        .unwrap();

    let apps = stage.apps().await;
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    // Once the operator wrote its CA into the caBundle and the API server took the configuration up: until
    // then the call fails ("failed calling webhook": the server does not trust the operator's certificate
    // yet), which is not the webhook's answer.
    let elsewhere = app("elsewhere", &[], &["cluster-b", "cluster-x"]);
    let refused = eventually("the webhook called", async || {
        match apps.create(&dry_run, &elsewhere).await {
            Err(kube::Error::Api(status))
                if status.message.contains("validate.demo.kubeplex.dev")
                    && !status.message.contains("failed calling webhook") =>
            {
                Ok(format!("{} {}", status.code, status.message))
            }
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert!(
        refused.contains(
            "spec.rollout.order names clusters the fleet does not have: cluster-x (it has"
        ),
        "{refused}"
    );
    assert!(
        refused.starts_with("403 "),
        "a refusal is Forbidden: {refused}"
    );
    let unowned = app("unowned", &["kube-system"], &[]);
    let refused = apps
        .create(&PostParams::default(), &unowned)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("namespaces kube-system are not owned by this operator"),
        "{refused}"
    );

    let ordered = app("ordered", &[], &["cluster-b"]);
    let created = apps.create(&PostParams::default(), &ordered).await.unwrap();
    let rollout = created.spec.rollout.unwrap();
    assert_eq!(rollout.strategy, Some(RolloutStrategy::OneClusterAtATime));
    assert_eq!(rollout.order, ["cluster-b"]);

    served_in_v2(&apps, &endpoint, &stage.children[0]).await;

    stop(running).await;
    configs
        .delete(CONFIGURATION, &DeleteParams::default())
        .await
        .unwrap();
    mutations
        .delete(CONFIGURATION, &DeleteParams::default())
        .await
        .unwrap();
    apps.delete("ordered", &DeleteParams::default())
        .await
        .unwrap();
}

/// Replaces the CRD with `crd`.
async fn install(crds: &Api<CustomResourceDefinition>, mut crd: CustomResourceDefinition) {
    let name = AppDeployment::crd_name();
    crd.metadata.resource_version = crds.get(name).await.unwrap().metadata.resource_version;
    crds.replace(name, &PostParams::default(), &crd)
        .await
        .unwrap();
}

/// With the CRD as `fleet crd --url` prints it: `ordered`, written in v1, reads in v2 as converted; an
/// object written in v2 is checked and defaulted by the webhooks (which see v1), reconciled, and reads in
/// v1 as written. Then the CRD is put back as the suite installs it (v2 not served), for the tests beside.
async fn served_in_v2(apps: &Api<AppDeployment>, endpoint: &Endpoint, namespace: &str) {
    let control = apps.clone().into_client();
    let crds: Api<CustomResourceDefinition> = Api::all(control.clone());
    install(&crds, admission::crd(Some(endpoint))).await;
    let apps_v2: Api<v2::AppDeployment> = Api::namespaced(control, apps.namespace().unwrap());
    let ordered = apps.get("ordered").await.unwrap();
    // Once the API server serves v2 and the operator wrote its CA into the CRD's conversion.
    let read = eventually("v2 served and converted", async || {
        (apps_v2.get("ordered").await).map_err(|e| e.to_string())
    })
    .await;
    assert_eq!(read.spec, v2::AppDeploymentSpec::from(ordered.spec.clone()));

    let shape = |order: &str| v2::AppDeploymentSpec {
        workload: v2::Workload {
            image: "redis:7.4".into(),
            replicas: 2,
        },
        placement: v2::Placement {
            namespaces: vec![namespace.to_owned()],
            rollout: Some(Rollout {
                strategy: None,
                order: vec![order.to_owned()],
            }),
        },
    };
    let refused = (apps_v2.create(
        &PostParams::default(),
        &v2::AppDeployment::new("elsewhere", shape("cluster-x")),
    ))
    .await
    .unwrap_err()
    .to_string();
    assert!(
        refused.contains("spec.rollout.order names clusters the fleet does not have: cluster-x"),
        "{refused}"
    );
    let shaped = v2::AppDeployment::new("shaped", shape("cluster-a"));
    let created = apps_v2
        .create(&PostParams::default(), &shaped)
        .await
        .unwrap();
    let rollout = created.spec.placement.rollout.as_ref().unwrap();
    assert_eq!(rollout.strategy, Some(RolloutStrategy::OneClusterAtATime));
    let in_v1 = apps.get("shaped").await.unwrap();
    assert_eq!(v2::AppDeploymentSpec::from(in_v1.spec), created.spec);
    // Reconciled, its status read in v2.
    eventually("shaped applied, read in v2", async || {
        let status = (apps_v2
            .get("shaped")
            .await
            .map_err(|e| e.to_string())?
            .status)
            .ok_or("no status")?;
        let applied = status
            .fleet
            .conditions
            .iter()
            .find(|c| c.type_ == "Applied");
        match applied {
            Some(c) if c.status == "True" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    apps_v2
        .delete("shaped", &DeleteParams::default())
        .await
        .unwrap();
    eventually("shaped gone", async || {
        match apps_v2.get_opt("shaped").await {
            Ok(None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    install(&crds, admission::crd(None)).await;
}
