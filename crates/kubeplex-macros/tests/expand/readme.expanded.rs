pub struct AppDeployer;
const _: () = {
    fn kind(_: <AppDeployment as ::kubeplex::__private::Resource>::Itself) {}
};
const _: () = {
    fn kind(_: <Deployment as ::kubeplex::__private::Resource>::Itself) {}
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
        Kind::<AppDeployment>(::core::marker::PhantomData).namespaced();
        Kind::<Deployment>(::core::marker::PhantomData).namespaced();
    }
};
impl ::kubeplex::Controller for AppDeployer {
    type Resource = AppDeployment;
    type Context = <Fleet as ::kubeplex::__private::Fleet>::Itself;
    fn plan() -> ::kubeplex::Plan<Self::Context> {
        ::kubeplex::Plan::new("app-deployer")
            .with_namespaces(["crds"])
            .with_finalizer("demo.kubeplex.dev/cleanup")
            .owns(
                ::kubeplex::Child::of::<Deployment>()
                    .with_namespaces(["namespace-a", "namespace-b"])
                    .with_contexts([Fleet::ClusterA, Fleet::ClusterB]),
            )
            .with_contexts([Fleet::Control])
    }
}
