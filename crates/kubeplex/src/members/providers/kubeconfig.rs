//! A member's kubeconfig: which context of it is meant, and a client configuration built from that
//! context alone, from the fields the allowlist lets through. What goes wrong is said in short reasons
//! without the kubeconfig's text (they reach `/readyz` and the logs).

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use k8s_openapi::ByteString;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::client::only_context;
use crate::core::kubeconfig_error;
use crate::members::kubeconfig_allowlist::KubeconfigAllowlist;

/// The client configuration of `context` in the kubeconfig `text` (its current-context when `None`, or
/// its only context), from what `allowlist` lets through.
pub(super) async fn config_from_kubeconfig(
    text: &str,
    context: Option<&str>,
    allowlist: &KubeconfigAllowlist,
) -> Result<kube::Config, String> {
    config_of(&parse(text)?, context, allowlist).await
}

/// `text` as a kubeconfig (several YAML documents are merged, as kubectl does).
fn parse(text: &str) -> Result<Kubeconfig, String> {
    Kubeconfig::from_yaml(text).map_err(|e| match &e {
        kube::config::KubeconfigError::Parse(_) => kubeconfig_error(&e),
        _ => format!("not a valid kubeconfig: {}", kubeconfig_error(&e)),
    })
}

/// The client configuration of `context` in `kubeconfig`, built from that context's cluster and user
/// only (a fleet's kubeconfig holds every cluster's credentials; a member needs its own), and of them
/// only from the fields `allowlist` lets through: kube is never given a file to read or a command to
/// run that the operator did not allow.
pub(super) async fn config_of(
    kubeconfig: &Kubeconfig,
    context: Option<&str>,
    allowlist: &KubeconfigAllowlist,
) -> Result<kube::Config, String> {
    let name = chosen_context(kubeconfig, context)?;
    let allowed = (allowlist.member_kubeconfig(kubeconfig, &name))
        .map_err(|refused| format!("context {name}: {refused}"))?;
    trusted_config_of(allowed, &name).await
}

/// The client configuration of the context `name` of `kubeconfig`, with everything it says honoured:
/// only for a kubeconfig read through the allowlist, or built from the operator's own configuration.
pub(super) async fn trusted_config_of(
    kubeconfig: Kubeconfig,
    name: &str,
) -> Result<kube::Config, String> {
    let options = KubeConfigOptions {
        context: Some(name.to_owned()),
        ..KubeConfigOptions::default()
    };
    kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| format!("context {name}: {}", kubeconfig_error(&e)))
}

/// One single-context kubeconfig per context of `kubeconfig`, named by the context, in its order.
pub(super) fn contexts_of(kubeconfig: &Kubeconfig) -> Vec<(String, Kubeconfig)> {
    kubeconfig
        .contexts
        .iter()
        .map(|c| (c.name.clone(), only_context(kubeconfig, &c.name)))
        .collect()
}

/// A fingerprint of `kubeconfig`'s content, secrets included (kube serializes them), so a provider can
/// tell a rotation without keeping the credentials. Compared only within this process, so std's hasher
/// (fixed keys) does.
pub(super) fn fingerprint(kubeconfig: &Kubeconfig) -> u64 {
    let mut hasher = DefaultHasher::new();
    // Serializing plain data cannot fail; an empty text would only make every change look alike.
    serde_json::to_string(kubeconfig)
        .unwrap_or_default()
        .hash(&mut hasher);
    hasher.finish()
}

/// The kubeconfig under `key` of a Secret's `data`, with a fingerprint of its bytes; or why there is none.
pub(super) fn kubeconfig_in<'d>(
    data: Option<&'d BTreeMap<String, ByteString>>,
    key: &str,
) -> Result<(u64, &'d str), String> {
    let Some(bytes) = data.and_then(|d| d.get(key)) else {
        let keys: Vec<&str> = data
            .iter()
            .flat_map(|d| d.keys())
            .map(String::as_str)
            .collect();
        return Err(match keys.as_slice() {
            [] => format!("has no key {key}; it has no data"),
            keys => format!("has no key {key}; its keys are: {}", keys.join(", ")),
        });
    };
    let text = std::str::from_utf8(&bytes.0).map_err(|_| format!("key {key} is not UTF-8 text"))?;
    let mut hasher = DefaultHasher::new();
    bytes.0.hash(&mut hasher);
    Ok((hasher.finish(), text))
}

/// The context meant: the one given, else the current-context, else the only one.
fn chosen_context(kubeconfig: &Kubeconfig, context: Option<&str>) -> Result<String, String> {
    let names: Vec<&str> = kubeconfig
        .contexts
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    let listed = || match names.as_slice() {
        [] => "it has no contexts".to_owned(),
        names => format!("its contexts are: {}", names.join(", ")),
    };
    let has = |name: &str| names.contains(&name);
    match (context, kubeconfig.current_context.as_deref()) {
        (Some(name), _) if has(name) => Ok(name.to_owned()),
        (Some(name), _) => Err(format!("has no context {name}; {}", listed())),
        (None, Some(current)) if !current.is_empty() => {
            if has(current) {
                Ok(current.to_owned())
            } else {
                Err(format!(
                    "its current-context {current} is not one of its contexts; {}",
                    listed()
                ))
            }
        }
        (None, _) => match names.as_slice() {
            [only] => Ok((*only).to_owned()),
            [] => Err("has no contexts".to_owned()),
            names => Err(format!(
                "names no current-context and has {} contexts",
                names.len()
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "s3cr3t-token-value";

    fn kubeconfig(contexts: &[&str], current: Option<&str>) -> String {
        let mut text = String::from("apiVersion: v1\nkind: Config\n");
        if let Some(current) = current {
            text += &format!("current-context: {current}\n");
        }
        text += "clusters:\n";
        for name in contexts {
            text +=
                &format!("- name: {name}\n  cluster:\n    server: https://{name}.example:6443\n");
        }
        text += "users:\n";
        for name in contexts {
            text += &format!("- name: {name}\n  user:\n    token: {TOKEN}-{name}\n");
        }
        text += "contexts:\n";
        for name in contexts {
            text += &format!("- name: {name}\n  context:\n    cluster: {name}\n    user: {name}\n");
        }
        text
    }

    #[tokio::test]
    async fn member_kubeconfig_context_is_the_given_the_current_or_the_only_one() {
        let strict = KubeconfigAllowlist::default();
        let two = kubeconfig(&["a", "b"], Some("b"));
        let given = config_from_kubeconfig(&two, Some("a"), &strict)
            .await
            .unwrap();
        assert_eq!(given.cluster_url.host(), Some("a.example"));
        let current = config_from_kubeconfig(&two, None, &strict).await.unwrap();
        assert_eq!(current.cluster_url.host(), Some("b.example"));
        let one = kubeconfig(&["only"], None);
        let only = config_from_kubeconfig(&one, None, &strict).await.unwrap();
        assert_eq!(only.cluster_url.host(), Some("only.example"));
    }

    #[tokio::test]
    async fn member_kubeconfig_errors_are_short_and_name_the_contexts() {
        let two = kubeconfig(&["a", "b"], None);
        let error = |text: String, context: Option<&'static str>| async move {
            config_from_kubeconfig(&text, context, &KubeconfigAllowlist::default())
                .await
                .unwrap_err()
        };
        assert_eq!(
            error(two.clone(), Some("x")).await,
            "has no context x; its contexts are: a, b"
        );
        assert_eq!(
            error(two.clone(), None).await,
            "names no current-context and has 2 contexts"
        );
        assert_eq!(
            error(kubeconfig(&["a"], Some("gone")), None).await,
            "its current-context gone is not one of its contexts; its contexts are: a"
        );
        assert_eq!(error(String::new(), None).await, "has no contexts");
        let broken = format!("users:\n- name: a\n  user:\n    token: [\"{TOKEN}\"\n");
        let parse = error(broken, None).await;
        assert!(
            parse.starts_with("not a valid kubeconfig: line "),
            "{parse}"
        );
        assert!(!parse.contains(TOKEN), "{parse}");
        let no_server = "contexts:\n- name: a\n  context:\n    cluster: a\n".to_owned();
        let built = error(no_server, None).await;
        assert!(built.starts_with("context a: "), "{built}");
    }

    #[test]
    fn member_kubeconfig_splits_into_one_kubeconfig_per_context() {
        let parsed = parse(&kubeconfig(&["a", "b"], Some("a"))).unwrap();
        let split = contexts_of(&parsed);
        let names: Vec<&str> = split.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        let (_, b) = &split[1];
        assert_eq!(b.current_context.as_deref(), Some("b"));
        assert_eq!(
            (b.contexts.len(), b.clusters.len(), b.auth_infos.len()),
            (1, 1, 1)
        );
        assert_eq!(b.clusters[0].name, "b");
        // A changed credential changes the fingerprint; the same content keeps it.
        let again = contexts_of(&parse(&kubeconfig(&["a", "b"], None)).unwrap());
        assert_eq!(fingerprint(&split[1].1), fingerprint(&again[1].1));
        let rotated = kubeconfig(&["a", "b"], None).replace("value-b", "value-b2");
        let rotated = contexts_of(&parse(&rotated).unwrap());
        assert_ne!(fingerprint(&split[1].1), fingerprint(&rotated[1].1));
        assert_eq!(fingerprint(&split[0].1), fingerprint(&rotated[0].1));
    }
}
