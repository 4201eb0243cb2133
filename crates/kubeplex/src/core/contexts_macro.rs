//! `contexts!`: declare a fleet's contexts once, as an enum the compiler checks everywhere.

/// Declares a [`ContextSet`](crate::ContextSet): an enum whose variants are contexts, each with its kubeconfig name.
///
/// The names are checked while compiling: each must be non-empty, free of whitespace and control
/// characters, at most 253 bytes long, and different from the others; a variant or a name declared twice is
/// an error at the duplicate. The enum implements [`Context`](crate::Context),
/// [`ContextSet`](crate::ContextSet), `Display` (the context name), `FromStr` and `TryFrom<&str>` (from the
/// context name; the error names the unknown name and the fleet's names) and the usual value traits
/// (`Clone`, `Copy`, `Eq`, `Ord`, `Hash`, `Debug`).
///
/// ```
/// kubeplex::contexts! {
///     /// The clusters this operator runs across.
///     pub enum Fleet {
///         Control = "control",
///         ClusterA = "cluster-a",
///     }
/// }
/// use kubeplex::Context;
/// assert_eq!(Fleet::ClusterA.name(), "cluster-a");
/// assert_eq!(Fleet::ClusterA.to_string(), "cluster-a");
///
/// // A name from a flag or a status maps back to its variant.
/// assert_eq!("cluster-a".parse::<Fleet>().unwrap(), Fleet::ClusterA);
/// assert_eq!(Fleet::try_from("control").unwrap(), Fleet::Control);
/// let unknown = "cluster-z".parse::<Fleet>().unwrap_err();
/// assert_eq!(unknown.name(), "cluster-z");
/// assert_eq!(
///     unknown.to_string(),
///     "`cluster-z` is not a context of `Fleet`; its contexts are: control, cluster-a"
/// );
/// ```
#[macro_export]
macro_rules! contexts {
    ($($input:tt)*) => {
        // The proc macro gets kubeplex's own path first, so that what it generates resolves from anywhere.
        $crate::__private::contexts! { $crate; $($input)* }
    };
}
