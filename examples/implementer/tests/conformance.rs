//! bankconf judges this crate's server in its own `cargo test`.
use bankconf::conformance::{passed_or_no_browser, summary};
use bankconf::Conformance;
use implementer_example::{start, StateDriver};

#[tokio::test(flavor = "multi_thread")]
async fn the_server_conforms() {
    let server = start(None).await;
    // TODO(lead, issue 22): turn this into one libtest trial per case with the library's trials
    // function (a `harness = false` test); until then, one test asserts on the run's verdict.
    let report = Conformance::new(&server.base_url)
        .api_key(&server.clients[0].api_key)
        .second_api_key(&server.clients[1].api_key)
        .service(&server.service)
        .driver(StateDriver(server.control.clone()))
        .seed(7)
        .run()
        .await;
    assert!(passed_or_no_browser(&report), "{}", summary(&report));
}
