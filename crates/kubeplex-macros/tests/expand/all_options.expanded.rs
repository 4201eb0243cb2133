pub struct DeploymentAuditor {
    client_timeout: std::time::Duration,
}
const _: () = {
    fn kind(
        _: <k8s_openapi::api::apps::v1::Deployment as ::kubeplex::__private::Resource>::Itself,
    ) {}
};
const _: () = {
    fn kind(_: <ConfigMap as ::kubeplex::__private::Resource>::Itself) {}
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
        Kind::<k8s_openapi::api::apps::v1::Deployment>(::core::marker::PhantomData)
            .namespaced();
        Kind::<Secret>(::core::marker::PhantomData).namespaced();
    }
};
impl ::kubeplex::Controller for DeploymentAuditor {
    type Resource = k8s_openapi::api::apps::v1::Deployment;
    type Context = <Fleet as ::kubeplex::__private::Fleet>::Itself;
    fn plan() -> ::kubeplex::Plan<Self::Context> {
        ::kubeplex::Plan::new("deployment-auditor")
            .namespaces(["team-a", "team-b"])
            .label_selector("app.kubernetes.io/managed-by=kubeplex,tier in (web, api)")
            .field_selector("metadata.namespace!=kube-system")
            .concurrency(16)
            .debounce(::core::time::Duration::from_millis(500))
            .requeue_after(::core::time::Duration::from_millis(5400000))
            .error_requeue(::core::time::Duration::from_millis(30000))
            .abandon_unreachable_after(::core::time::Duration::from_millis(7200000))
            .abandon_terminating_after(::core::time::Duration::from_millis(1800000))
            .finalizer("audit.example.com/report")
            .owns(::kubeplex::Child::of::<ConfigMap>().contexts([Fleet::Control]))
            .owns(
                ::kubeplex::Child::of::<Secret>()
                    .namespaces(["audit"])
                    .keep_on_prune()
                    .orphan_on_delete()
                    .contexts([Fleet::Control]),
            )
            .contexts([Fleet::ClusterA, Fleet::ClusterB])
    }
}
