//! The example member Secrets of `deploy/members/`: what the operator's `--members-from-secrets` selects, where
//! its Role lets it read them, in the format the Secret provider reads.

use kube::config::Kubeconfig;
use kubeplex::{Context as _, ContextSet as _, members::MEMBER_NAME_LABEL};
use kubeplex_fleet::Fleet;
use serde_json::Value;

use super::OPERATOR_NAMESPACE;
use super::manifest::Manifest;

/// Each member Secret is one the operator running `container` selects, in the namespace it reads (where
/// the members Role is), naming a member that is not a fixed context, with a placeholder kubeconfig of one
/// context.
pub(crate) fn assert_member_secrets(members: &[Manifest], container: &Value) {
    assert!(!members.is_empty(), "deploy/members/ has no example");
    let args: Vec<&str> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("a string argument"))
        .collect();
    let selector = args
        .iter()
        .position(|a| *a == "--members-from-secrets")
        .map(|i| args[i + 1])
        .expect("the operator takes members from Secrets");
    let (key, value) = selector.split_once('=').expect("a key=value selector");
    let namespace = args
        .iter()
        .position(|a| *a == "--members-namespace")
        .map_or(kubeplex_fleet::MEMBERS_NAMESPACE, |i| args[i + 1]);
    assert_eq!(
        namespace, OPERATOR_NAMESPACE,
        "the operator reads member Secrets where its members Role is"
    );
    for secret in members {
        let what = secret.describe();
        assert_eq!(secret.kind(), "Secret", "{what}");
        assert_eq!(secret.namespace(), Some(namespace), "{what}");
        let labels = &secret.value["metadata"]["labels"];
        assert_eq!(labels[key], value, "{what}: not selected by {selector}");
        let member = labels[MEMBER_NAME_LABEL]
            .as_str()
            .unwrap_or_else(|| panic!("{what}: no {MEMBER_NAME_LABEL} label"));
        assert!(
            !Fleet::ALL.iter().any(|c| c.name() == member),
            "{what}: member {member} would shadow a fixed context"
        );
        assert!(
            secret.value.get("data").is_none(),
            "{what}: the placeholder goes in stringData"
        );
        let text = secret
            .str_at("/stringData/kubeconfig")
            .unwrap_or_else(|| panic!("{what}: no kubeconfig under the key `kubeconfig`"));
        assert!(
            text.contains("PLACEHOLDER") && text.contains("REPLACE_WITH_"),
            "{what}: the kubeconfig must be marked as a placeholder"
        );
        let kubeconfig = Kubeconfig::from_yaml(text).expect("the placeholder is a kubeconfig");
        let contexts: Vec<&str> = kubeconfig
            .contexts
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(contexts, [member], "{what}: one context, the member's");
        assert_eq!(kubeconfig.current_context.as_deref(), Some(member));
    }
}
