//! What is wrong with a plan: the checks `Manager::start` runs on every plan before it starts anything.
//!
//! `#[controller]` checks what is written in its attribute while compiling; these catch plans written by
//! hand and values given at run time (`Manager::controller_with`). Where the two check the same thing, both
//! call the same rule of `kubeplex-names`, so the words are the same.

use std::borrow::Cow;
use std::time::Duration;

use indexmap::IndexSet;
use kubeplex_names::{EMPTY_NAMESPACES, controller_name, duplicate_namespace, invalid_namespace};

use super::child::Child;
use super::dispatch::Dispatch;
use super::plan::{Plan, child_kind};
use super::watch::Watch;
use crate::core::Context;

impl<C: Context> Plan<C> {
    /// What is wrong with the plan, if anything: every problem, separated by `; `. The manager checks this
    /// when it starts ([`Error::InvalidPlan`](crate::Error::InvalidPlan)); call it yourself to check
    /// run-time configuration earlier.
    pub fn problem(&self) -> Option<String> {
        let mut problems = Vec::new();
        if let Err(problem) = controller_name(&self.name) {
            problems.push(problem);
        }
        if self.contexts.is_empty() {
            problems.push("the plan watches no context; give it at least one".into());
        }
        namespaces_problems(self.namespaces.as_deref(), "", &mut problems);
        for child in &self.children {
            child_problems(child, &mut problems);
        }
        for watch in &self.watches {
            watch_problems(watch, &mut problems);
        }
        for kind in &self.unowned {
            problems.push(format!(
                "`child_namespaces::<{kind}>` names a kind the plan does not own; it owns {}",
                owned_kinds(&self.children)
            ));
        }
        if self.concurrency == Some(0) {
            problems.push(
                "`concurrency = 0` would never reconcile; omit `concurrency` for unbounded, or give a \
                 limit from 1 to 65535"
                    .into(),
            );
        }
        if self.concurrency_per_cluster == Some(0) {
            problems.push(
                "`concurrency_per_cluster = 0` would never reconcile; omit `concurrency_per_cluster` for \
                 unbounded, or give a limit from 1 to 65535"
                    .into(),
            );
        }
        if self.concurrency_per_cluster.is_some() && self.dispatch == Dispatch::Fifo {
            problems.push(
                "`concurrency_per_cluster` needs `Dispatch::Fair` (the default): in due order the \
                 reconciles do not take turns by cluster"
                    .into(),
            );
        }
        let durations = [
            ("debounce", self.debounce),
            ("requeue_after", self.requeue_after),
            ("error_requeue", self.error_requeue),
            ("abandon_unreachable_after", self.abandon_unreachable_after),
            ("abandon_terminating_after", self.abandon_terminating_after),
        ];
        for (key, delay) in durations {
            if delay == Some(Duration::ZERO) {
                problems.push(format!("invalid `{key}`: it is zero; omit it instead"));
            }
        }
        (!problems.is_empty()).then(|| problems.join("; "))
    }
}

/// Why `kind` (`Kind.group/version`), a cluster-scoped kind, cannot be given namespaces: the attribute's
/// words.
pub(crate) fn cluster_scoped(kind: &str) -> String {
    format!(
        "`{kind}` is cluster-scoped, so it cannot be watched or owned in `namespaces`: a cluster-scoped \
         kind is watched and owned across the whole cluster"
    )
}

/// The problems of one `owns`: its namespaces, prefixed with `owns(Kind.group/version): `.
fn child_problems<C: Context>(child: &Child<C>, problems: &mut Vec<String>) {
    let kind = child_kind(&child.resource);
    let prefix = format!("owns({kind}): ");
    if !child.namespaced && child.namespaces.is_some() {
        problems.push(format!("{prefix}{}", cluster_scoped(&kind)));
        return;
    }
    namespaces_problems(child.namespaces.as_deref(), &prefix, problems);
}

/// The problems of one `watches`: where it watches, its namespaces, prefixed with
/// `watches(Kind.group/version): `.
fn watch_problems<C: Context>(watch: &Watch<C>, problems: &mut Vec<String>) {
    let kind = child_kind(watch.resource());
    let prefix = format!("watches({kind}): ");
    if watch.contexts().is_empty() && !watch.in_members() {
        problems.push(format!(
            "{prefix}it is watched nowhere; give it contexts, `members`, or both"
        ));
    }
    if !watch.is_namespaced() && watch.namespaces.is_some() {
        problems.push(format!("{prefix}{}", cluster_scoped(&kind)));
        return;
    }
    namespaces_problems(watch.namespaces.as_deref(), &prefix, problems);
}

/// Namespaces are DNS-1123 labels, each listed once, and the list is not empty (`None` is every
/// namespace): the attribute's `check_namespaces`, in its words.
fn namespaces_problems(
    namespaces: Option<&[Cow<'static, str>]>,
    prefix: &str,
    problems: &mut Vec<String>,
) {
    let Some(namespaces) = namespaces else {
        return;
    };
    if namespaces.is_empty() {
        problems.push(format!(
            "{prefix}{EMPTY_NAMESPACES}; name at least one namespace, or call `all_namespaces()` to \
             watch every namespace"
        ));
    }
    for (i, namespace) in namespaces.iter().enumerate() {
        if let Some(why) = invalid_namespace(namespace) {
            problems.push(format!("{prefix}{why}"));
        } else if namespaces[..i].contains(namespace) {
            problems.push(format!("{prefix}{}", duplicate_namespace(namespace)));
        }
    }
}

/// The kinds a plan owns, for a problem that names one it does not.
fn owned_kinds<C: Context>(children: &[Child<C>]) -> String {
    let kinds: IndexSet<String> = children.iter().map(|c| child_kind(&c.resource)).collect();
    if kinds.is_empty() {
        "no kind (add it with `owns`)".into()
    } else {
        Vec::from_iter(kinds).join(", ")
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};

    use super::*;
    use crate::core::ContextName;

    fn plan(name: impl Into<Cow<'static, str>>) -> Plan<ContextName> {
        Plan::new(name).with_contexts([ContextName::new("control")])
    }

    fn owning() -> Plan<ContextName> {
        plan("web").owns(
            Child::of::<Deployment>()
                .with_contexts([ContextName::new("a")])
                .with_namespaces(["apps"]),
        )
    }

    #[test]
    fn controller_names_follow_the_attributes_rule() {
        assert_eq!(plan("app-deployer").problem(), None);
        assert_eq!(plan("a".repeat(63)).problem(), None);
        for bad in [
            "a".repeat(64),
            "-leading".into(),
            "has space".into(),
            "Upper".into(),
            String::new(),
        ] {
            assert_eq!(
                plan(bad.clone()).problem(),
                controller_name(&bad).err(),
                "{bad:?}"
            );
        }
        assert!(
            Plan::<ContextName>::new("x")
                .problem()
                .unwrap()
                .contains("no context")
        );
    }

    #[test]
    fn namespaces_given_at_run_time_are_checked_in_the_attributes_words() {
        assert_eq!(
            plan("web").with_namespaces(["team-a", "b2"]).problem(),
            None
        );
        for bad in ["Bad_NS", "", "-a", "a_b", &"a".repeat(64)] {
            let problem = plan("web").with_namespaces([bad.to_owned()]).problem();
            assert_eq!(problem, invalid_namespace(bad), "{bad:?}");
        }
        assert_eq!(
            plan("web")
                .with_namespaces(["a", "b", "a"])
                .problem()
                .unwrap(),
            duplicate_namespace("a")
        );
        let empty = plan("web").with_namespaces(Vec::<String>::new()).problem();
        assert!(
            empty.unwrap().starts_with(EMPTY_NAMESPACES),
            "an empty list is not every namespace"
        );
        // Every problem at once, not only the first.
        let both = plan("web").with_namespaces(["X", "Y"]).problem().unwrap();
        assert!(both.contains("\"X\"") && both.contains("\"Y\""), "{both}");
    }

    #[test]
    fn child_namespaces_are_checked_and_named_by_kind() {
        assert_eq!(owning().problem(), None);
        let problem = owning()
            .child_namespaces::<Deployment>(["ok", "Bad_NS"])
            .problem()
            .unwrap();
        assert_eq!(
            problem,
            format!(
                "owns(Deployment.apps/v1): {}",
                invalid_namespace("Bad_NS").unwrap()
            )
        );
        let empty = owning()
            .child_namespaces::<Deployment>(Vec::<String>::new())
            .problem()
            .unwrap();
        assert!(
            empty.starts_with("owns(Deployment.apps/v1): `namespaces = []` watches nothing"),
            "{empty}"
        );
        let unowned = owning()
            .child_namespaces::<ConfigMap>(["x"])
            .problem()
            .unwrap();
        assert_eq!(
            unowned,
            "`child_namespaces::<ConfigMap/v1>` names a kind the plan does not own; it owns \
             Deployment.apps/v1"
        );
    }

    #[test]
    fn a_cluster_scoped_child_cannot_have_namespaces() {
        let everywhere =
            plan("ns").owns(Child::of::<Namespace>().with_contexts([ContextName::new("a")]));
        assert_eq!(everywhere.problem(), None);
        let problem = everywhere
            .child_namespaces::<Namespace>(["x"])
            .problem()
            .unwrap();
        assert!(
            problem.starts_with(
                "owns(Namespace/v1): `Namespace/v1` is cluster-scoped, so it cannot be watched or \
                 owned in `namespaces`"
            ),
            "{problem}"
        );
    }

    #[test]
    fn zero_concurrency_and_zero_delays_are_refused() {
        let problem = plan("web").with_concurrency(0).problem().unwrap();
        assert!(
            problem.starts_with("`concurrency = 0` would never reconcile"),
            "{problem}"
        );
        let problem = plan("web")
            .with_requeue_after(Duration::ZERO)
            .problem()
            .unwrap();
        assert_eq!(
            problem,
            "invalid `requeue_after`: it is zero; omit it instead"
        );
        assert_eq!(
            plan("web")
                .with_concurrency(1)
                .with_debounce(Duration::from_millis(1))
                .problem(),
            None
        );
    }
}
