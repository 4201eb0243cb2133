//! `contexts!`: declare a fleet's contexts once, as an enum the compiler checks everywhere.

/// Declares a [`ContextSet`](crate::ContextSet): an enum whose variants are contexts, each with its kubeconfig name.
///
/// The names are checked while compiling: each must be non-empty, free of whitespace and control
/// characters, at most 253 bytes long, and different from the others. The enum implements
/// [`Context`](crate::Context), [`ContextSet`](crate::ContextSet), `Display` (the context name) and the usual
/// value traits (`Clone`, `Copy`, `Eq`, `Ord`, `Hash`, `Debug`).
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

        impl $crate::ContextSet for $fleet {
            const ALL: &'static [Self] = &[$( Self::$variant ),+];
            const NAMES: &'static [&'static str] = &[$( $name ),+];
        }

        // Every name non-empty, without whitespace or control characters, at most 253 bytes, unique.
        const _: () = $crate::__private::check_fleet_names(
            ::core::stringify!($fleet),
            <$fleet as $crate::ContextSet>::NAMES,
        );

        impl ::core::fmt::Display for $fleet {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str($crate::Context::name(self))
            }
        }
    };
}
