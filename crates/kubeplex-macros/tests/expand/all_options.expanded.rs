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
            .with_namespaces(["team-a", "team-b"])
            .with_label_selector(
                "app.kubernetes.io/managed-by=kubeplex,tier in (web, api)",
            )
            .with_field_selector("metadata.namespace!=kube-system")
            .with_concurrency(16)
            .with_debounce(::core::time::Duration::from_millis(500))
            .with_requeue_after(::core::time::Duration::from_millis(5400000))
            .with_error_requeue(::core::time::Duration::from_millis(30000))
            .with_abandon_unreachable_after(::core::time::Duration::from_millis(7200000))
            .with_abandon_terminating_after(::core::time::Duration::from_millis(1800000))
            .with_finalizer("audit.example.com/report")
            .owns(::kubeplex::Child::of::<ConfigMap>().with_contexts([Fleet::Control]))
            .owns(
                ::kubeplex::Child::of::<Secret>()
                    .with_namespaces(["audit"])
                    .keep_on_prune()
                    .orphan_on_delete()
                    .shared()
                    .with_contexts([Fleet::Control]),
            )
            .with_contexts([Fleet::ClusterA, Fleet::ClusterB])
    }
}
