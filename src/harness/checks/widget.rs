//! §1 The widget script served at `/widget/<service>-connect.js`.

use crate::harness::context::RunContext;
use crate::harness::http::{Auth, Exchange};
use crate::harness::outcome::{ensure, Stop};
use reqwest::Method;
use std::sync::Arc;

/// Media types that name JavaScript (RFC 9239 and the historical ones).
const JS_TYPES: [&str; 5] = [
    "text/javascript",
    "application/javascript",
    "application/x-javascript",
    "application/ecmascript",
    "text/ecmascript",
];

async fn fetch(ctx: &RunContext) -> Result<Exchange, Stop> {
    let service = ctx.service.as_deref().ok_or_else(|| Stop::ignore("needs the service name (--service)"))?;
    // A browser loads the script: no API key is sent (§5.2 keeps keys out of frontends).
    let exchange = ctx.api.send(Method::GET, &["widget", &format!("{service}-connect.js")], &[], Auth::Missing).await?;
    ensure(exchange.is_success(), || format!("{}: expected 2xx, got {}", exchange.request, exchange.summary()))?;
    Ok(exchange)
}

pub async fn served(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let exchange = fetch(&ctx).await?;
    let media =
        exchange.content_type.as_deref().unwrap_or("").split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    ensure(JS_TYPES.contains(&media.as_str()), || {
        format!(
            "{}: expected a JavaScript content type, got {:?}",
            exchange.request,
            exchange.content_type.as_deref().unwrap_or("none")
        )
    })
}

/// Advisory: §1 says the global's `open` function takes the token; we only look for the name.
pub async fn defines_open(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let exchange = fetch(&ctx).await?;
    ensure(exchange.body.contains("open"), || format!("{}: the script never mentions `open`", exchange.request))
}
