//! The apply order and its reverse.

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ResourceQuota, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Resource;

use super::*;

fn of<K: Resource<DynamicType = ()>>() -> ApiResource {
    ApiResource::erase::<K>(&())
}

/// A custom kind whose name is a core kind's, in a group of its own.
fn impostor() -> ApiResource {
    ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Namespace".into(),
        plural: "namespaces".into(),
    }
}

fn kinds(resources: &[(ApiResource, &str)]) -> Vec<String> {
    resources
        .iter()
        .map(|(r, name)| format!("{}/{name}", r.kind))
        .collect()
}

#[test]
fn kinds_others_depend_on_come_first_and_the_rest_keep_their_declared_order() {
    let mut children = vec![
        (of::<Deployment>(), "web"),
        (of::<ValidatingWebhookConfiguration>(), "hook"),
        (of::<ResourceQuota>(), "quota"),
        (of::<ConfigMap>(), "settings"),
        (impostor(), "custom"),
        (of::<RoleBinding>(), "binding"),
        (of::<Deployment>(), "api"),
        (of::<Secret>(), "token"),
        (of::<ClusterRole>(), "role"),
        (of::<ServiceAccount>(), "runner"),
        (of::<CustomResourceDefinition>(), "crd"),
        (of::<Namespace>(), "team"),
    ];
    sort_for_apply(&mut children, |(r, _)| r);
    assert_eq!(
        kinds(&children),
        [
            "Namespace/team",
            "CustomResourceDefinition/crd",
            "ResourceQuota/quota",
            "ServiceAccount/runner",
            "ClusterRole/role",
            "RoleBinding/binding",
            "ConfigMap/settings",
            "Secret/token",
            "Deployment/web",
            "Namespace/custom",
            "Deployment/api",
            "ValidatingWebhookConfiguration/hook",
        ]
    );
}

#[test]
fn deleting_goes_in_the_reverse_order() {
    let mut children = vec![
        (of::<Namespace>(), "team"),
        (of::<ServiceAccount>(), "runner"),
        (of::<Deployment>(), "web"),
        (of::<ResourceQuota>(), "quota"),
        (of::<Deployment>(), "api"),
    ];
    sort_for_delete(&mut children, |(r, _)| r);
    assert_eq!(
        kinds(&children),
        [
            "Deployment/web",
            "Deployment/api",
            "ServiceAccount/runner",
            "ResourceQuota/quota",
            "Namespace/team",
        ]
    );
}
