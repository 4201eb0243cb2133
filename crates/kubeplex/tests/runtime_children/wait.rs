//! Creating a parent, and polling a parent or a child until it is as a test wants it.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Resource;
use kube::api::{Api, PostParams};
use kubeplex_testenv::{Polling, eventually};

use super::parent::{Parent, ParentSpec};
use crate::support::{WAIT, create_namespace};

pub async fn create_parent(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    spec: ParentSpec,
) -> Parent {
    create_namespace(client, namespace).await;
    let api: Api<Parent> = Api::namespaced(client.clone(), namespace);
    api.create(&PostParams::default(), &Parent::new(name, spec))
        .await
        .unwrap()
}

/// Polls the parent until `done` holds; panics with its last status after [`WAIT`].
pub async fn wait_parent(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    what: &str,
    done: impl Fn(&Parent) -> bool,
) -> Parent {
    let api: Api<Parent> = Api::namespaced(client.clone(), namespace);
    eventually(what, polling(), async || {
        let parent = api.get(name).await.unwrap();
        if done(&parent) {
            Ok(parent)
        } else {
            Err(format!("{:#?}", parent.status))
        }
    })
    .await
}

/// Within [`WAIT`], every 200 ms.
fn polling() -> Polling {
    Polling::within(WAIT).every(Duration::from_millis(200))
}

pub fn condition<'a>(parent: &'a Parent, type_: &str) -> Option<&'a kubeplex::Condition> {
    parent
        .status
        .as_ref()?
        .fleet
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
}

pub async fn wait_child(api: &Api<ConfigMap>, name: &str) -> ConfigMap {
    eventually(format!("child {name} appearing"), polling(), async || {
        let child = api.get_opt(name).await.unwrap();
        child.filter(|child| child.meta().deletion_timestamp.is_none())
    })
    .await
}
