use kubeplex::controller;

#[controller(crd = "ConfigMap", contexts = ["control"])]
struct Quoted;

fn main() {}
