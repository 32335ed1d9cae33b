//! The HTTP driver: one JSON `POST` per action to an admin endpoint
//! (`docs/driver-over-http.md`), its status the answer.

use super::{tail, Answer, DriveArgs, DriveFuture, Driver, DriverAction, MAX_SAID};
use crate::harness::transport::reach::Transport;
use crate::harness::vocab::errors::SetupError;
use std::time::Duration;

/// One JSON `POST` per action to an admin endpoint (`--driver-url`; `docs/driver-over-http.md`):
/// 2xx done, 409 refused, 404 or 501 not supported, anything else or no answer within the
/// driver timeout a broken driver. Keys go by reference (`"apiKey": "primary"`), never by value:
/// the endpoint holds its own keys, and nothing secret but the widget token crosses to it.
pub struct HttpDriver {
    url: String,
    client: reqwest::Client,
    second_key: bool,
    /// What the answer to `register_webhook` said it registered ([`super::said_addresses`]).
    addresses: std::sync::Mutex<Option<bool>>,
}

impl HttpDriver {
    /// A driver posting to `url`; each call bounded by `timeout`. `second_key`: the run has a
    /// second client (`"secondApiKey": "second"` is sent).
    pub fn new(url: &str, timeout: Duration, second_key: bool) -> Result<Self, SetupError> {
        Self::with_transport(url, timeout, second_key, &Transport::default())
    }

    /// [`HttpDriver::new`] with the run's TLS settings (`--ca-cert`, `--insecure`); the
    /// `--header` pairs are the target API's, not sent here.
    pub(crate) fn with_transport(
        url: &str,
        timeout: Duration,
        second_key: bool,
        transport: &Transport,
    ) -> Result<Self, SetupError> {
        Self::check_url(url)?;
        let client = transport
            .apply(reqwest::Client::builder(), false)
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(5)))
            // An admin endpoint that redirects is misconfigured: a broken driver, not a hop.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| SetupError::DriverClient(SetupError::cause(&e)))?;
        Ok(Self { url: url.to_string(), client, second_key, addresses: Default::default() })
    }

    /// Whether `url` can be a driver's endpoint: an http(s) URL with a host. Checked with the
    /// other flags ([`RunConfig::validate`](crate::harness::setup::config::RunConfig::validate)) and again here.
    pub fn check_url(url: &str) -> Result<(), SetupError> {
        match reqwest::Url::parse(url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(()),
            _ => Err(SetupError::BadDriverUrl { url: url.to_string() }),
        }
    }

    /// The body of one action: its name and the arguments that apply.
    pub fn body(&self, action: DriverAction, args: &DriveArgs) -> serde_json::Value {
        let mut body = serde_json::Map::new();
        body.insert("action".into(), action.as_str().into());
        let fields = [
            ("connectionId", &args.connection_id),
            ("widgetToken", &args.widget_token),
            ("accountId", &args.account_id),
            ("transactionId", &args.transaction_id),
            ("webhookUrl", &args.webhook_url),
            ("secondWebhookUrl", &args.second_webhook_url),
        ];
        for (name, value) in fields {
            if let Some(v) = value {
                body.insert(name.into(), v.as_str().into());
            }
        }
        body.insert("apiKey".into(), "primary".into());
        if self.second_key {
            body.insert("secondApiKey".into(), "second".into());
        }
        serde_json::Value::Object(body)
    }

    async fn post(&self, action: DriverAction, args: &DriveArgs) -> Answer {
        let name = action.as_str();
        let sent = self.client.post(&self.url).json(&self.body(action, args)).send().await;
        let mut response = match sent {
            Ok(r) => r,
            Err(e) if e.is_timeout() => {
                return Answer::Error(format!("driver {name}: no answer from --driver-url {}: timed out", self.url))
            }
            Err(e) => {
                return Answer::Error(format!(
                    "driver {name}: --driver-url {} could not be reached: {}",
                    self.url,
                    crate::harness::transport::reach::network_error(&e)
                ))
            }
        };
        let status = response.status().as_u16();
        // A bounded piece of the answer, for the message: the endpoint's text is not trusted.
        let mut said = Vec::new();
        while said.len() < MAX_SAID {
            match response.chunk().await {
                Ok(Some(chunk)) => said.extend_from_slice(&chunk[..chunk.len().min(MAX_SAID - said.len())]),
                _ => break,
            }
        }
        if action == DriverAction::RegisterWebhook && (200..300).contains(&status) {
            *self.addresses.lock().unwrap_or_else(|e| e.into_inner()) =
                super::said_addresses(&String::from_utf8_lossy(&said));
        }
        let said = tail(&String::from_utf8_lossy(&said));
        match status {
            200..=299 => Answer::Done,
            409 => Answer::Refused(format!("target refused {name} (HTTP 409){said}")),
            404 | 501 => Answer::NotSupported(format!("driver cannot {name} (HTTP {status}){said}")),
            _ => Answer::Error(format!("driver {name}: HTTP {status} from --driver-url{said}")),
        }
    }
}

impl Driver for HttpDriver {
    fn act<'a>(&'a self, action: DriverAction, args: &'a DriveArgs) -> DriveFuture<'a> {
        Box::pin(self.post(action, args))
    }

    fn per_client_addresses(&self) -> Option<bool> {
        *self.addresses.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::transport::driver::tests::args;
    use crate::spec::Action;

    #[test]
    fn http_bodies_name_keys_by_reference() {
        let driver = HttpDriver::new("http://127.0.0.1:9/admin", Duration::from_secs(1), true).unwrap();
        let body = driver.body(DriverAction::Act(Action::UpdateAccounts), &args(Some("conn_1")));
        assert_eq!(
            body,
            serde_json::json!({"action": "update_accounts", "connectionId": "conn_1", "widgetToken": "sess_1",
                "accountId": "acc_1", "apiKey": "primary", "secondApiKey": "second"})
        );
        assert!(HttpDriver::new("ftp://example", Duration::from_secs(1), false).is_err());
    }
}
