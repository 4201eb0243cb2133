use kubeplex::controller;

#[controller(contexts = ["control"])]
struct NoCrd;

fn main() {}
