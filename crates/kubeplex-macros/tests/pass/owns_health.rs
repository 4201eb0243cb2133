//! A child kind judged by the user's health rule: `owns(Kind, health = path::to::rule)`.
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kubeplex::prelude::*;
use kubeplex::{health::Assessment, health::Projection};

kubeplex::contexts! {
    pub enum Fleet { Control = "control", ClusterA = "cluster-a" }
}

mod rules {
    use kubeplex::{health::Assessment, health::Projection};

    pub fn labelled(child: &Projection) -> Assessment {
        match child.metadata.labels.as_ref().and_then(|l| l.get("ready")) {
            Some(_) => Assessment::healthy("labelled ready"),
            None => Assessment::progressing("not labelled ready"),
        }
    }
}

fn always(_: &Projection) -> Assessment {
    Assessment::healthy("always")
}

#[controller(
    crd = ConfigMap,
    contexts = [Fleet::Control],
    owns(ConfigMap, contexts = [Fleet::ClusterA], health = rules::labelled),
    owns(k8s_openapi::api::core::v1::Secret, contexts = [Fleet::ClusterA], health = always),
)]
struct Judged;

impl Reconcile for Judged {
    type Error = kubeplex::Error;

    async fn reconcile(&self, _: Arc<ConfigMap>, cx: &Cx<Fleet>) -> Result<Action, Self::Error> {
        let _all: bool = cx.all_healthy::<ConfigMap>(Fleet::ClusterA);
        Ok(Action::await_change())
    }
}

#[test]
fn builds_its_plan() {
    let plan = <Judged as kubeplex::Controller>::plan();
    let rule = plan.children()[0].health();
    assert_eq!(rule(&Projection::default()).reason, "not labelled ready");
}
