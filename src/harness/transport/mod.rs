//! Access to the server under test: HTTP paced and logged, TLS, the receiver of webhooks, the driver, the browser.

pub(crate) mod answers;
pub(crate) mod browser;
pub(crate) mod cdp;
pub(crate) mod driver;
pub(crate) mod elsewhere;
pub(crate) mod files;
pub(crate) mod har;
pub(crate) mod http;
pub(crate) mod orphans;
pub(crate) mod pagination;
pub(crate) mod parsed;
pub(crate) mod patience;
pub(crate) mod probe;
pub(crate) mod reach;
pub(crate) mod reads;
pub(crate) mod receiver;
pub(crate) mod throttle;
