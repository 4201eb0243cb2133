//! The preconditions an [`Attempt`] applies under, against a real API server: a free name lets the
//! create through and a taken one is refused (409); an apply pinned to a UID goes through to that object,
//! and is refused when it is gone (409) or another object has the name (422).

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PatchParams, PostParams};
use kubeplex_testenv::{SharedTestEnv, TestEnv};

use super::*;

static CLUSTERS: SharedTestEnv = SharedTestEnv::new(|| TestEnv::builder().clusters(["cluster-a"]));

/// A ConfigMap child named `name` in `namespace`.
fn desired(namespace: &str, name: &str) -> DesiredChild {
    DesiredChild {
        resource: ApiResource::erase::<ConfigMap>(&()),
        namespace: Some(namespace.to_owned()),
        name: name.to_owned(),
        object: serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": { "name": name, "namespace": namespace },
            "data": { "key": "value" },
        }),
    }
}

fn attempt(precondition: Precondition) -> Attempt {
    Attempt {
        precondition,
        before: None,
    }
}

#[tokio::test]
async fn a_real_server_lets_an_attempt_through_only_as_its_precondition_says() {
    let env = CLUSTERS.get().await.unwrap();
    let namespace = env.create_namespace(&["cluster-a"], "claim").await.unwrap();
    let client = env.client("cluster-a").await.unwrap();
    let resource = ApiResource::erase::<ConfigMap>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &resource);
    let params = PatchParams::apply("claim-test").force();
    let mut child = desired(&namespace, "web");

    // A free name: created by the one apply.
    let created = attempt(Precondition::Absent)
        .apply(&api, &params, &mut child)
        .await
        .unwrap()
        .expect("a free name lets the create through");
    let uid = created.metadata.uid.clone().unwrap();
    // The precondition is not left in the child for the next apply.
    assert!(child.object["metadata"].get("resourceVersion").is_none());
    // Taken now: refused, nothing written.
    let refused = attempt(Precondition::Absent)
        .apply(&api, &params, &mut child)
        .await
        .unwrap();
    assert!(refused.is_none(), "{refused:?}");

    // Pinned to its UID: applied to that object.
    let same = attempt(Precondition::Same(uid.clone()))
        .apply(&api, &params, &mut child)
        .await
        .unwrap()
        .expect("the object of the UID lets the apply through");
    assert_eq!(same.metadata.uid.as_deref(), Some(uid.as_str()));
    assert!(child.object["metadata"].get("uid").is_none());

    // Gone: refused (409), and nothing created in its place.
    api.delete("web", &DeleteParams::default()).await.unwrap();
    let gone = attempt(Precondition::Same(uid.clone()))
        .apply(&api, &params, &mut child)
        .await
        .unwrap();
    assert!(gone.is_none(), "{gone:?}");
    assert!(api.get_opt("web").await.unwrap().is_none());

    // Another object with the name: refused (422), and that object left as it was.
    let configmaps: Api<ConfigMap> = Api::namespaced(client, &namespace);
    let stranger = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some("web".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let stranger = configmaps
        .create(&PostParams::default(), &stranger)
        .await
        .unwrap();
    let taken = attempt(Precondition::Same(uid))
        .apply(&api, &params, &mut child)
        .await
        .unwrap();
    assert!(taken.is_none(), "{taken:?}");
    let now = configmaps.get("web").await.unwrap();
    assert_eq!(now.metadata.uid, stranger.metadata.uid);
    assert_eq!(
        now.metadata.resource_version,
        stranger.metadata.resource_version
    );
    assert_eq!(now.data, None);
}
