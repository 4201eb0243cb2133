// With `namespaces` given, an enum written by hand is still one error.
use kubeplex::controller;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Fleet {
    Control,
}

#[controller(
    crd = k8s_openapi::api::core::v1::ConfigMap,
    contexts = [Fleet::Control],
    namespaces = ["crds"],
)]
struct ByHand;

fn main() {}
