//! A hostile or broken target gets failing cases with clear messages: never a crash, a hang or
//! an unbounded loop. Each test serves one kind of bad behaviour on 127.0.0.1 and runs the
//! `bankconf` binary against it with short timeouts.

use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::any;
use axum::Router;
use serde_json::json;
use std::process::{Command, Output};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_bankconf");

/// Runs `serve` on a free loopback port in a background thread; returns its base URL.
fn background<F, Fut>(serve: F) -> String
where
    F: FnOnce(tokio::net::TcpListener) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            serve(listener).await;
        });
    });
    format!("http://{}", rx.recv().unwrap())
}

/// Serves `app` on a free loopback port.
fn serve(app: Router) -> String {
    background(|listener| async move {
        let _ = axum::serve(listener, app).await;
    })
}

/// Runs the whole catalogue against `url` with a driver that accepts everything and short
/// timeouts, so that every waiting case gives up quickly.
fn run_against(url: &str) -> (Option<i32>, String) {
    let Output { status, stdout, stderr } = Command::new(BIN)
        .args(["run", "--base-url", url, "--api-key", "hostile_key_secret", "--second-api-key", "hostile_key_other"])
        .args(["--service", "bankconf", "--driver", "exit 0", "--cases", "4"])
        .args(["--request-timeout", "0.5", "--event-timeout", "0.3", "--driver-timeout", "2"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .output()
        .expect("run bankconf");
    let text = format!("{}{}", String::from_utf8_lossy(&stdout), String::from_utf8_lossy(&stderr));
    assert!(!text.contains("panicked"), "the harness panicked:\n{text}");
    assert!(!text.contains("hostile_key_secret") && !text.contains("hostile_key_other"), "a key was printed:\n{text}");
    (status.code(), text)
}

fn assert_fails_cleanly(app: Router, expect_in_output: &str) {
    let url = serve(app);
    let (code, text) = run_against(&url);
    assert_eq!(code, Some(1), "expected exit 1 (cases failed):\n{text}");
    assert!(text.contains(expect_in_output), "expected {expect_in_output:?} in:\n{text}");
}

#[test]
fn html_everywhere() {
    let app = Router::new().fallback(any(|| async { ([(header::CONTENT_TYPE, "text/html")], "<html>oops</html>") }));
    assert_fails_cleanly(app, "expected a JSON body");
}

#[test]
fn json_null_everywhere() {
    let app = Router::new().fallback(any(|| async { axum::Json(serde_json::Value::Null) }));
    assert_fails_cleanly(app, "no connectionId");
}

#[test]
fn a_server_that_never_answers() {
    let app = Router::new().fallback(any(|| async {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        StatusCode::OK
    }));
    let url = serve(app);
    let (code, text) = run_against(&url);
    // The first request (the reachability probe) times out: the run cannot start.
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("timed out"), "{text}");
}

#[test]
fn an_endless_body() {
    // A raw server: answers every request with a JSON content type and a body that never ends.
    let url = background(|listener| async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { continue };
            tokio::spawn(async move {
                let mut request = [0u8; 8192];
                let _ = socket.read(&mut request).await;
                let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n";
                if socket.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let chunk = vec![b'['; 64 * 1024];
                while socket.write_all(&chunk).await.is_ok() {}
            });
        }
    });
    let (code, text) = run_against(&url);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("response body exceeds"), "{text}");
}

#[test]
fn a_cursor_that_loops_and_pages_that_never_end() {
    let app = Router::new()
        .route(
            "/v1/connections",
            any(|| async {
                (
                    StatusCode::CREATED,
                    axum::Json(json!({"connectionId": "conn_1", "status": "CREATED", "widgetToken": "sess_1"})),
                )
            }),
        )
        .route(
            "/v1/connections/{id}/accounts",
            any(|| async { axum::Json(json!([{"id": "acc_1", "connectionId": "conn_1", "type": "checking"}])) }),
        )
        .route(
            "/v1/accounts/{id}/transactions",
            any(|| async { axum::Json(json!({"data": [{"id": "txn_1"}], "has_more": true, "next_cursor": "txn_1"})) }),
        )
        .fallback(any(|| async { StatusCode::NOT_FOUND.into_response() }));
    assert_fails_cleanly(app, "the walk loops");
}
