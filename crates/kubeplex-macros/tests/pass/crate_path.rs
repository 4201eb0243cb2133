//! `crate = path` for a renamed kubeplex dependency.
use ::kubeplex as kp;
use k8s_openapi::api::core::v1::ConfigMap;
use kp::Controller;

#[kp::controller(crate = kp, crd = ConfigMap, contexts = ["prod-eu", "prod-us"], name = "widgets")]
pub struct WidgetController;

#[test]
fn builds_its_plan() {
    assert_eq!(WidgetController::plan().name(), "widgets");
    assert_eq!(WidgetController::plan().contexts().len(), 2);
}
