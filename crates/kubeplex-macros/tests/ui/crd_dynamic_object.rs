use kube::api::DynamicObject;
use kubeplex::controller;

#[controller(crd = DynamicObject, contexts = ["control"])]
struct AnyKind;

fn main() {}
