struct AppReconciler {
    image_registry: String,
}
const _: () = {
    fn kind(_: <AppDeployment as ::kubeplex::__private::Resource>::Itself) {}
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
    }
};
impl ::kubeplex::Controller for AppReconciler {
    type Resource = AppDeployment;
    type Context = ::kubeplex::ContextName;
    fn plan() -> ::kubeplex::Plan<Self::Context> {
        ::kubeplex::Plan::new("app-reconciler")
            .with_namespaces(["crds"])
            .with_contexts([::kubeplex::ContextName::new("control")])
    }
}
