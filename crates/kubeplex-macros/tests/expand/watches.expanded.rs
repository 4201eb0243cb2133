pub struct Placer;
const _: () = {
    fn kind(_: <Placement as ::kubeplex::__private::Resource>::Itself) {}
};
const _: () = {
    fn kind(_: <Node as ::kubeplex::__private::Resource>::Itself) {}
};
const _: () = {
    fn kind(_: <Secret as ::kubeplex::__private::Resource>::Itself) {}
};
const _: () = {
    struct Kind<K>(::core::marker::PhantomData<K>);
    impl<K: ::kubeplex::__private::KubeResource> Kind<K> {
        fn namespaced(&self)
        where
            K::Scope: ::kubeplex::__private::NamespacedScope<K>,
        {}
    }
    trait NotAResource {
        fn namespaced(&self) {}
    }
    impl<K> NotAResource for Kind<K> {}
    fn namespaced() {
        Kind::<Placement>(::core::marker::PhantomData).namespaced();
        Kind::<Secret>(::core::marker::PhantomData).namespaced();
    }
};
impl ::kubeplex::Controller for Placer {
    type Resource = Placement;
    type Context = <Fleet as ::kubeplex::__private::Fleet>::Itself;
    fn plan() -> ::kubeplex::Plan<Self::Context> {
        ::kubeplex::Plan::new("placer")
            .with_namespaces(["crds"])
            .ignore_readiness_flips()
            .watches(
                ::kubeplex::plan::Watch::of::<Node>()
                    .members()
                    .with_label_selector("tier=web")
                    .with_contexts([Fleet::ClusterA]),
            )
            .watches(
                ::kubeplex::plan::Watch::mapped::<
                    Secret,
                    <Self as ::kubeplex::Controller>::Resource,
                >(placements_of)
                    .members()
                    .with_namespaces(["apps"]),
            )
            .with_contexts([Fleet::Control])
    }
}
