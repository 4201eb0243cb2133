use kubeplex::controller;

// Written by hand instead of with `kubeplex::contexts!`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Fleet {
    Control,
}

#[controller(crd = k8s_openapi::api::core::v1::ConfigMap, contexts = [Fleet::Control])]
struct ByHand;

fn main() {}
