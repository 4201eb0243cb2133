//! The plan builders: what a generated or hand-written plan watches after each adjustment.

use super::*;
use crate::core::ContextName;

fn plan(name: impl Into<Cow<'static, str>>) -> Plan<ContextName> {
    Plan::new(name).with_contexts([ContextName::new("control")])
}

#[test]
fn the_default_finalizer_is_named_after_the_controller_when_it_has_children() {
    let owning = plan("web").owns(
        Child::of::<k8s_openapi::api::core::v1::ConfigMap>().with_contexts([ContextName::new("a")]),
    );
    assert_eq!(
        owning.managed_finalizer().as_deref(),
        Some("kubeplex.dev/web")
    );
    assert_eq!(plan("web").managed_finalizer(), None);
    let named = plan("web").with_finalizer("example.com/cleanup");
    assert_eq!(
        named.managed_finalizer().as_deref(),
        Some("example.com/cleanup")
    );
}

#[test]
fn namespaces_replace_those_named_before_and_all_namespaces_forgets_them() {
    let generated = plan("web").with_namespaces(["from-the-attribute"]);
    let configured = generated.clone().with_namespaces(["team-a", "team-b"]);
    let control = ContextName::new("control");
    assert_eq!(
        configured.primary_watches().collect::<Vec<_>>(),
        [(control, Some("team-a")), (control, Some("team-b"))]
    );
    let everywhere = configured.all_namespaces();
    assert!(everywhere.namespaces().is_empty());
    assert_eq!(
        everywhere.primary_watches().collect::<Vec<_>>(),
        [(control, None)]
    );
    // Owned strings work as well as literals: flags and Helm values arrive as `String`s.
    let from_flag: Vec<String> = "x,y".split(',').map(str::to_owned).collect();
    assert_eq!(
        generated.with_namespaces(from_flag).namespaces(),
        ["x", "y"]
    );
}

#[test]
fn child_namespaces_replace_them_for_every_owns_of_the_kind() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::ConfigMap;

    let (a, b) = (ContextName::new("a"), ContextName::new("b"));
    let generated = plan("web")
        .owns(
            Child::of::<Deployment>()
                .with_contexts([a])
                .with_namespaces(["old"]),
        )
        .owns(Child::of::<Deployment>().with_contexts([b]))
        .owns(
            Child::of::<ConfigMap>()
                .with_contexts([a])
                .with_namespaces(["kept"]),
        );
    let configured = generated.child_namespaces::<Deployment>(["x", "y"]);
    let namespaces: Vec<Vec<&str>> = configured
        .children()
        .iter()
        .map(|c| c.namespaces().iter().map(AsRef::as_ref).collect())
        .collect();
    assert_eq!(namespaces, [vec!["x", "y"], vec!["x", "y"], vec!["kept"]]);
    assert_eq!(
        configured.children()[1].watches().collect::<Vec<_>>(),
        [(b, Some("x")), (b, Some("y"))]
    );
    let everywhere = configured.child_all_namespaces::<Deployment>();
    assert_eq!(
        everywhere.children()[0].watches().collect::<Vec<_>>(),
        [(a, None)]
    );
    assert_eq!(everywhere.children()[2].namespaces(), ["kept"]);
    // The child builders replace too.
    let child = Child::<ContextName>::of::<ConfigMap>()
        .with_namespaces(["one"])
        .with_namespaces(["two"]);
    assert_eq!(child.namespaces(), ["two"]);
    assert!(child.all_namespaces().namespaces().is_empty());
}

#[test]
fn a_kind_in_each_members_default_namespace_is_watched_and_granted_there() {
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    let own = Child::<ContextName>::of::<ConfigMap>()
        .with_namespaces(["declared"])
        .member_default_namespace();
    assert!(own.in_members() && own.in_member_default_namespace());
    assert_eq!(own.member_namespaces("team-b"), [Some("team-b")]);
    let declared = Child::<ContextName>::of::<ConfigMap>()
        .with_namespaces(["declared"])
        .members();
    assert_eq!(declared.member_namespaces("team-b"), [Some("declared")]);
    // A cluster-scoped kind has no namespace to default to.
    let cluster_scoped = Child::<ContextName>::of::<Namespace>().member_default_namespace();
    assert_eq!(cluster_scoped.member_namespaces("team-b"), [None]);
    let plan = Plan::new("p")
        .with_contexts([ContextName::new("a")])
        .owns(own.with_contexts([ContextName::new("a")]));
    let grants = plan.grants(&kube::core::ApiResource::erase::<ConfigMap>(&()), true);
    let children: Vec<(Option<&str>, Option<&str>)> = (grants.iter())
        .filter(|g| g.resource == "configmaps" && g.verbs.iter().any(|v| v == "delete"))
        .map(|g| (g.context.as_deref(), g.namespace.as_deref()))
        .collect();
    // In the context, the declared namespace; in every member, wherever its own namespace is.
    assert_eq!(children, [(Some("a"), Some("declared")), (None, None)]);
}

#[test]
fn a_watched_kind_is_granted_list_and_watch_and_checked_where_it_is_watched() {
    use k8s_openapi::api::core::v1::{ConfigMap, Node, Secret};

    use crate::plan::Watch;
    let a = ContextName::new("a");
    let plan = Plan::new("p")
        .with_contexts([a])
        .watches(Watch::of::<Node>().with_contexts([a]).members())
        .watches(Watch::of::<Secret>().members().with_namespaces(["apps"]));
    assert_eq!(plan.problem(), None);
    assert!(plan.works_in_members() && !plan.in_members());
    let grants = plan.grants(&kube::core::ApiResource::erase::<ConfigMap>(&()), true);
    let watched: Vec<String> = (grants.iter())
        .filter(|g| g.resource == "nodes" || g.resource == "secrets")
        .map(|g| {
            let (context, namespace) = (g.context.as_deref(), g.namespace.as_deref());
            format!(
                "{context:?} {namespace:?} {} {}",
                g.resource,
                g.verbs.join(",")
            )
        })
        .collect();
    assert_eq!(
        watched,
        [
            r#"Some("a") None nodes get,list,watch"#,
            "None None nodes get,list,watch",
            r#"None Some("apps") secrets get,list,watch"#,
        ]
    );
    let nowhere = Plan::new("p")
        .with_contexts([a])
        .watches(Watch::of::<Node>().with_namespaces(["apps"]));
    assert_eq!(
        nowhere.problem().unwrap(),
        "watches(Node/v1): it is watched nowhere; give it contexts, `members`, or both; \
         watches(Node/v1): `Node/v1` is cluster-scoped, so it cannot be watched or owned in \
         `namespaces`: a cluster-scoped kind is watched and owned across the whole cluster"
    );
}
