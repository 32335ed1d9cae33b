//! `cargo test --test conformance`: the catalogue as libtest trials, so test-name filters,
//! `--list`, `--ignored` and the usual `test result:` line work. Configured by the `BANKCONF_*`
//! environment variables; with no `BANKCONF_BASE_URL`, the embedded sandbox. One run, one
//! trial per case result, read by the rules of `bankconf run`'s exit code
//! (`bankconf::internal::command::conformance_test`).

fn main() -> std::process::ExitCode {
    bankconf::internal::command::conformance_test()
}
