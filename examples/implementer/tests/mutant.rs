//! The same test fails when the server breaks a rule of the spec (here: `status` in lower case
//! on creation, §2.1): a conformance test that cannot fail proves nothing.
use bankconf::sandbox::Mutant;
use bankconf::Conformance;
use implementer_example::{start, StateDriver};

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_server_fails() {
    let server = start(Some(Mutant::StatusLowercase)).await;
    let report = Conformance::new(&server.base_url)
        .api_key(&server.clients[0].api_key)
        .service(&server.service)
        .driver(StateDriver::of(&server))
        .cases(["create."])
        .run()
        .await;
    assert_eq!(report.exit_code(), 1, "{}", bankconf::summary(&report));
}
