use kubeplex::controller;

#[controller(kind = ConfigMap, contexts = ["control"])]
struct UnknownKey;

fn main() {}
