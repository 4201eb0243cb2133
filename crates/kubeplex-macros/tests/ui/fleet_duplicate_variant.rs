kubeplex::contexts! {
    pub enum Fleet {
        Control = "control",
        ClusterA = "cluster-a",
        Control = "control-2",
    }
}

fn main() {}
