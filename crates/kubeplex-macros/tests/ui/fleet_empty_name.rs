kubeplex::contexts! {
    pub enum Fleet {
        Control = "",
    }
}

fn main() {}
