use kubeplex::controller;

#[controller(crd = k8s_openapi::api::core::v1::ConfigMap, contexts = ["control"])]
union NotAStruct {
    a: u32,
}

fn main() {}
