//! Support for the code `#[controller]` and `contexts!` generate. Not a public API: anything here may change
//! in any release.
//!
//! The checks are `const fn`s so that a mistake is reported while compiling (as an `evaluation panicked`
//! error pointing at the offending literal), never at run time.

use std::marker::PhantomData;

use kube::core::NamespaceResourceScope;

use crate::core::ContextSet;

pub use crate::core::UnknownContext;
/// For the traits `#[controller]` declares locally (their message is made for the type at hand).
pub use kube::Resource as KubeResource;
/// `kubeplex::contexts!` forwards to it.
pub use kubeplex_macros::contexts;

/// A kind `crd = ..` and `owns(..)` accept: `#[controller]` checks `<K as Resource>::Itself` before its
/// `impl Controller`, so that this message, at the user's type, is the first error.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a Kubernetes resource type known at compile time",
    label = "not a `kube::Resource<DynamicType = ()>`",
    note = "`crd` and `owns` take a kind: a k8s-openapi type such as `k8s_openapi::api::apps::v1::Deployment`, or the type `#[derive(CustomResource)]` generates (named after its `kind`, not the `..Spec` struct)"
)]
pub trait Resource {
    /// The kind itself.
    type Itself: kube::Resource<DynamicType = ()>;
}

// `do_not_recommend`: report `K: Resource` (the message above) rather than the k8s-openapi bound deep
// inside kube's blanket impl.
#[diagnostic::do_not_recommend]
impl<K: kube::Resource<DynamicType = ()>> Resource for K {
    type Itself = K;
}

/// Well-formed only for a namespaced kind: what `#[controller]` checks where `namespaces` is given.
pub struct Namespaced<K: kube::Resource>(PhantomData<K>)
where
    K::Scope: NamespacedScope<K>;

/// The scope of a namespaced kind `K`.
#[diagnostic::on_unimplemented(
    message = "`{K}` is cluster-scoped, so it cannot be watched or owned in `namespaces`",
    label = "`{K}` is cluster-scoped: its objects have no namespace",
    note = "remove `namespaces` here: a cluster-scoped kind is watched and owned across the whole cluster"
)]
pub trait NamespacedScope<K: ?Sized> {}

impl<K: ?Sized> NamespacedScope<K> for NamespaceResourceScope {}

/// A fleet typed contexts come from: `#[controller]` checks `<F as Fleet>::Itself`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not declared with `kubeplex::contexts!`",
    label = "typed contexts are variants of a `kubeplex::contexts!` enum",
    note = "declare the enum with `kubeplex::contexts! {{ pub enum {Self} {{ Control = \"control\" }} }}` instead of writing it by hand"
)]
pub trait Fleet {
    /// The fleet itself.
    type Itself: ContextSet;
}

#[diagnostic::do_not_recommend]
impl<F: ContextSet> Fleet for F {
    type Itself = F;
}

/// The longest context name accepted (a kubeconfig context name is usually a DNS subdomain).
pub const MAX_CONTEXT_NAME: usize = kubeplex_names::MAX_CONTEXT_NAME;

/// Fails compilation unless every name is a context of the fleet `F` (named `fleet` in messages), with a
/// "did you mean" suggestion for the closest declared name.
pub const fn check_members<F: ContextSet>(fleet: &str, names: &[&str]) {
    let declared = F::NAMES;
    let mut i = 0;
    while i < names.len() {
        let name = names[i];
        let mut best = 0;
        let mut best_distance = usize::MAX;
        let mut k = 0;
        let mut found = false;
        while k < declared.len() {
            if str_eq(declared[k], name) {
                found = true;
            }
            let d = edit_distance(declared[k].as_bytes(), name.as_bytes());
            if d < best_distance {
                best_distance = d;
                best = k;
            }
            k += 1;
        }
        if !found {
            let mut m = Msg::new();
            m.push("context `")
                .push(name)
                .push("` is not declared in fleet `")
                .push(fleet)
                .push("`; ");
            if !declared.is_empty() && best_distance <= name.len() / 3 + 1 {
                m.push("did you mean `").push(declared[best]).push("`?");
            } else {
                m.push("add it to the `contexts!` declaration or use one of its names");
            }
            panic!("{}", m.as_str());
        }
        i += 1;
    }
}

/// The context of fleet `F` called `name`; `check_members` has already proven it exists.
pub fn member<F: ContextSet>(name: &str) -> F {
    match F::ALL.iter().find(|c| c.name() == name) {
        Some(&context) => context,
        None => panic!("context `{name}` is not declared in its fleet"),
    }
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Levenshtein distance of two strings of at most 253 bytes (longer ones compare as very distant).
const fn edit_distance(a: &[u8], b: &[u8]) -> usize {
    if a.len() > MAX_CONTEXT_NAME || b.len() > MAX_CONTEXT_NAME {
        return usize::MAX / 2;
    }
    let mut prev = [0usize; MAX_CONTEXT_NAME + 1];
    let mut cur = [0usize; MAX_CONTEXT_NAME + 1];
    let mut j = 0;
    while j <= b.len() {
        prev[j] = j;
        j += 1;
    }
    let mut i = 1;
    while i <= a.len() {
        cur[0] = i;
        let mut j = 1;
        while j <= b.len() {
            let substitution = prev[j - 1] + if a[i - 1] == b[j - 1] { 0 } else { 1 };
            let deletion = prev[j] + 1;
            let insertion = cur[j - 1] + 1;
            let mut best = substitution;
            if deletion < best {
                best = deletion;
            }
            if insertion < best {
                best = insertion;
            }
            cur[j] = best;
            j += 1;
        }
        let mut k = 0;
        while k <= b.len() {
            prev[k] = cur[k];
            k += 1;
        }
        i += 1;
    }
    prev[b.len()]
}

/// A compile-time error message, built byte by byte (const code cannot format).
struct Msg {
    buf: [u8; 1024],
    len: usize,
}

impl Msg {
    const fn new() -> Self {
        Self {
            buf: [0; 1024],
            len: 0,
        }
    }

    const fn push(&mut self, s: &str) -> &mut Self {
        let bytes = s.as_bytes();
        let mut i = 0;
        while i < bytes.len() && self.len < self.buf.len() {
            self.buf[self.len] = bytes[i];
            self.len += 1;
            i += 1;
        }
        self
    }

    /// The message so far (cut at a character boundary if the buffer filled up).
    const fn as_str(&self) -> &str {
        let (mut head, _) = self.buf.split_at(self.len);
        loop {
            match core::str::from_utf8(head) {
                Ok(message) => return message,
                Err(e) => head = head.split_at(e.valid_up_to()).0,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(edit_distance(b"cluster-a", b"clustr-a"), 1);
        assert_eq!(edit_distance(b"", b"abc"), 3);
        assert_eq!(edit_distance(b"control", b"control"), 0);
        assert_eq!(edit_distance(b"kitten", b"sitting"), 3);
    }
}
