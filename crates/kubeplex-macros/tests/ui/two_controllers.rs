// A struct is one controller: a second `#[controller]` is rejected at its path.
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kubeplex::controller;

#[controller(crd = ConfigMap, contexts = ["control"])]
#[controller(crd = Secret, contexts = ["control"])]
struct Both;

fn main() {}
