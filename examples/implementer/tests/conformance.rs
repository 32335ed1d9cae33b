//! bankconf judges this crate's server in its own `cargo test`: one trial per case
//! (`harness = false` in Cargo.toml), with libtest's filters and `--list`.
use bankconf::Conformance;
use implementer_example::{start, StateDriver};

fn main() -> std::process::ExitCode {
    // The server runs on a runtime of its own, for as long as the tests do.
    let runtime = tokio::runtime::Runtime::new().expect("a runtime for the server");
    let server = runtime.block_on(start(None));
    Conformance::new(&server.base_url)
        .api_key(&server.clients[0].api_key)
        .second_api_key(&server.clients[1].api_key)
        .service(&server.service)
        .driver(StateDriver::of(&server))
        .seed(7)
        .tests()
}
