kubeplex::contexts! {
    pub enum Fleet {
        Control = "control plane",
    }
}

fn main() {}
