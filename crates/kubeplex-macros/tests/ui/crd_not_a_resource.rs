use kubeplex::controller;

#[controller(crd = String, contexts = ["control"])]
struct NotAResource;

fn main() {}
