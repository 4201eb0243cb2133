//! `contexts!`: declare a fleet's contexts once, as an enum the compiler checks everywhere.

/// Declares a [`Fleet`](crate::Fleet): an enum whose variants are contexts, each with its kubeconfig name.
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
/// ```
#[macro_export]
macro_rules! contexts {
    (
        $(#[$meta:meta])*
        $vis:vis enum $fleet:ident {
            $( $(#[$variant_meta:meta])* $variant:ident = $name:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
        $vis enum $fleet {
            $( $(#[$variant_meta])* #[doc = concat!("The context `", $name, "`.")] $variant ),+
        }

        impl $crate::Context for $fleet {
            fn name(&self) -> &'static str {
                match self { $( Self::$variant => $name ),+ }
            }
        }

        impl $crate::Fleet for $fleet {
            const ALL: &'static [Self] = &[$( Self::$variant ),+];
        }

        impl ::core::fmt::Display for $fleet {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str($crate::Context::name(self))
            }
        }
    };
}
