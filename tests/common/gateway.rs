//! A target behind TLS and a gateway, on 127.0.0.1: a private CA made with the `openssl` CLI,
//! a TLS front that keeps what the harness sent, and a gateway that refuses (403) any request
//! to `/v1/` or `/widget/` without its header, as an API gateway in front of a staging server
//! does. The sandbox's own `/sandbox/` control passes unguarded (the driver's side).
//! Included by the tests that need it (`#[path]`), not by every test binary.
#![allow(dead_code)]

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A private CA and a certificate for 127.0.0.1 signed by it, made with the `openssl` CLI in
/// `dir`: `(ca.pem, server.pem, server.key)`; `None` without openssl.
pub fn private_ca(dir: &std::path::Path) -> Option<(std::path::PathBuf, std::path::PathBuf, std::path::PathBuf)> {
    std::fs::create_dir_all(dir).unwrap();
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
    let steps: [&[&str]; 3] = [
        &[
            &["req", "-x509"],
            &ec[..],
            &["-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=bankconf test CA"],
        ]
        .concat(),
        &[&["req"], &ec[..], &["-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost"]].concat(),
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ],
    ];
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    for args in steps {
        let status = Command::new("openssl").args(args).current_dir(dir).stderr(std::process::Stdio::null()).status();
        if !status.is_ok_and(|s| s.success()) {
            eprintln!("skipped: the openssl CLI could not make a CA ({args:?})");
            return None;
        }
    }
    Some((dir.join("ca.pem"), dir.join("server.pem"), dir.join("server.key")))
}

/// A TLS front on 127.0.0.1 for a plain-HTTP server, as a staging server behind an internal CA
/// is: it serves `cert` and keeps the bytes the harness sent (decrypted, at most 16 MiB).
pub struct TlsFront {
    pub url: String,
    pub seen: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    _runtime: tokio::runtime::Runtime,
}

pub fn tls_front(upstream: &str, cert: &std::path::Path, key: &std::path::Path) -> TlsFront {
    use std::sync::{Arc, Mutex};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};
    use tokio_rustls::rustls::{self, crypto::aws_lc_rs};
    let certs: Vec<CertificateDer> = CertificateDer::pem_file_iter(cert).unwrap().map(Result::unwrap).collect();
    let key = PrivateKeyDer::from_pem_file(key).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(aws_lc_rs::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let url = format!("https://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (upstream, kept) = (upstream.trim_start_matches("http://").to_string(), seen.clone());
    runtime.spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, upstream, kept) = (acceptor.clone(), upstream.clone(), kept.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else { return };
                let Ok(back) = tokio::net::TcpStream::connect(&upstream).await else { return };
                let (mut from_client, mut to_client) = tokio::io::split(tls);
                let (mut from_server, mut to_server) = back.into_split();
                let up = async {
                    let mut buf = vec![0u8; 16 * 1024];
                    while let Ok(n @ 1..) = from_client.read(&mut buf).await {
                        {
                            let mut kept = kept.lock().unwrap();
                            if kept.len() < 16 << 20 {
                                kept.extend_from_slice(&buf[..n]);
                            }
                        }
                        if to_server.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                    let _ = to_server.shutdown().await;
                };
                let down = async {
                    let _ = tokio::io::copy(&mut from_server, &mut to_client).await;
                    let _ = to_client.shutdown().await;
                };
                tokio::join!(up, down);
            });
        }
    });
    TlsFront { url, seen, _runtime: runtime }
}

/// A gateway on 127.0.0.1 in front of `upstream` (plain HTTP): a request to `/v1/` or
/// `/widget/` without `header: value` is refused with 403 and counted; every other is passed on.
pub struct Gateway {
    pub url: String,
    /// Requests refused for want of the header.
    pub refused: Arc<AtomicUsize>,
    _runtime: tokio::runtime::Runtime,
}

/// The gateway's refusal, as a gateway words it.
pub const REFUSAL: &str = "{\"message\":\"gateway: a valid X-Gateway-Token header is required\"}";

pub fn gateway(upstream: &str, header: &'static str, value: &'static str) -> Gateway {
    use axum::response::IntoResponse;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let refused = Arc::new(AtomicUsize::new(0));
    let (counted, upstream) = (refused.clone(), upstream.trim_end_matches('/').to_string());
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let app = axum::Router::new().fallback(move |request: axum::extract::Request| {
        let (client, upstream, counted) = (client.clone(), upstream.clone(), counted.clone());
        async move {
            let path = request.uri().path_and_query().map_or("/".to_string(), |p| p.as_str().to_string());
            let guarded = path.starts_with("/v1/") || path.starts_with("/widget/");
            let given = request.headers().get(header).and_then(|v| v.to_str().ok());
            if guarded && given != Some(value) {
                counted.fetch_add(1, Ordering::Relaxed);
                let json = [(axum::http::header::CONTENT_TYPE, "application/json")];
                return (axum::http::StatusCode::FORBIDDEN, json, REFUSAL).into_response();
            }
            let (parts, body) = request.into_parts();
            let body = axum::body::to_bytes(body, 16 << 20).await.unwrap_or_default();
            let mut out = client.request(parts.method, format!("{upstream}{path}"));
            for (name, value) in &parts.headers {
                if name != axum::http::header::HOST && name.as_str() != header {
                    out = out.header(name, value);
                }
            }
            let Ok(answer) = out.body(body).send().await else {
                return axum::http::StatusCode::BAD_GATEWAY.into_response();
            };
            let (status, headers) = (answer.status(), answer.headers().clone());
            let bytes = answer.bytes().await.unwrap_or_default();
            let mut response = axum::response::Response::new(axum::body::Body::from(bytes));
            *response.status_mut() = status;
            for (name, value) in &headers {
                if !["transfer-encoding", "content-length", "connection"].contains(&name.as_str()) {
                    response.headers_mut().insert(name, value.clone());
                }
            }
            response
        }
    });
    runtime.spawn(async move { axum::serve(listener, app).await });
    Gateway { url, refused, _runtime: runtime }
}
