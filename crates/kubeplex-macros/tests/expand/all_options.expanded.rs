pub struct DeploymentAuditor {
    client_timeout: std::time::Duration,
}
const _: () = {
    fn kind(
        _: ::kubeplex::__private::Namespaced<
            <k8s_openapi::api::apps::v1::Deployment as ::kubeplex::__private::Resource>::Itself,
        >,
    ) {}
};
const _: () = {
    fn kind(_: <ConfigMap as ::kubeplex::__private::Resource>::Itself) {}
};
const _: () = {
    fn kind(
        _: ::kubeplex::__private::Namespaced<
            <Secret as ::kubeplex::__private::Resource>::Itself,
        >,
    ) {}
};
impl ::kubeplex::Controller for DeploymentAuditor {
    type Resource = k8s_openapi::api::apps::v1::Deployment;
    type Context = <Fleet as ::kubeplex::__private::Fleet>::Itself;
    fn plan() -> ::kubeplex::Plan<Self::Context> {
        ::kubeplex::Plan::new("deployment-auditor")
            .contexts([Fleet::ClusterA, Fleet::ClusterB])
            .namespaces(["team-a", "team-b"])
            .label_selector("app.kubernetes.io/managed-by=kubeplex,tier in (web, api)")
            .field_selector("metadata.namespace!=kube-system")
            .concurrency(16)
            .debounce(::core::time::Duration::from_millis(500))
            .requeue_after(::core::time::Duration::from_millis(5400000))
            .error_requeue(::core::time::Duration::from_millis(30000))
            .abandon_unreachable_after(::core::time::Duration::from_millis(7200000))
            .finalizer("audit.example.com/report")
            .owns(::kubeplex::Child::of::<ConfigMap>().contexts([Fleet::Control]))
            .owns(
                ::kubeplex::Child::of::<Secret>()
                    .contexts([Fleet::Control])
                    .namespaces(["audit"]),
            )
    }
}
