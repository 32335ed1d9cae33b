//! §1 The widget script served at `/widget/<service>-connect.js`.

use crate::harness::fixtures::RunContext;
use crate::harness::http::Exchange;
use crate::harness::outcome::{ensure, Stop};
use std::sync::Arc;

crate::cases! {
    "widget.served" => served,
    "widget.defines-open" => defines_open,
    "widget.no-api-key" => no_api_key,
}

/// The JavaScript MIME type essences browsers accept (WHATWG MIME Sniffing, RFC 9239).
const JS_TYPES: [&str; 16] = [
    "application/ecmascript",
    "application/javascript",
    "application/x-ecmascript",
    "application/x-javascript",
    "text/ecmascript",
    "text/javascript",
    "text/javascript1.0",
    "text/javascript1.1",
    "text/javascript1.2",
    "text/javascript1.3",
    "text/javascript1.4",
    "text/javascript1.5",
    "text/jscript",
    "text/livescript",
    "text/x-ecmascript",
    "text/x-javascript",
];

async fn fetch(ctx: &RunContext) -> Result<Exchange, Stop> {
    let service = ctx.service.as_deref().ok_or_else(|| Stop::ignore("needs the service name (--service)"))?;
    // A browser loads the script: no API key (§5.2 keeps keys out of frontends), `Accept: */*`,
    // redirects followed.
    let exchange = ctx.api.fetch_asset(&["widget", &format!("{service}-connect.js")]).await?;
    ensure(exchange.is_success(), || format!("{}: expected 2xx, got {}", exchange.request, exchange.summary()))?;
    Ok(exchange)
}

async fn served(ctx: Arc<RunContext>) -> Result<(), Stop> {
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
async fn defines_open(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let exchange = fetch(&ctx).await?;
    ensure(exchange.body.contains("open"), || format!("{}: the script never mentions `open`", exchange.request))
}

/// §5.2: the key stays on the client's backend and never reaches a frontend, and the widget
/// script is frontend code. The message never shows the key.
async fn no_api_key(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let exchange = fetch(&ctx).await?;
    let mut keys = ctx.api.keys();
    ensure(!keys.any(|k| exchange.body.contains(k)), || {
        format!("{}: the script contains an API key of this run (§5.2: keys never reach a frontend)", exchange.request)
    })
}
