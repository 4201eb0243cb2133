kubeplex::contexts! {
    pub enum Fleet {
        Control = "control",
        ClusterA = "control",
    }
}

fn main() {}
