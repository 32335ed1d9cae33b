//! The flags of a run written back as a command line that pastes: what a rerun line and a
//! reproduction repeat, secrets as `$BANKCONF_*` variables, defaults left out.

use crate::harness::setup::config::{RunConfig, SandboxConditions};
use crate::harness::vocab::sanitize::shell_word;

impl RunConfig {
    /// The target settings a rerun command repeats, secrets as `$BANKCONF_*` variables; empty
    /// for the embedded sandbox (but for its mutant or variant).
    pub(crate) fn rerun_settings(&self) -> String {
        let mut words = Vec::new();
        if let Some(url) = &self.base_url {
            words.push(format!("--base-url {}", shell_word(url)));
            words.push("--api-key \"$BANKCONF_API_KEY\"".to_string());
        }
        if self.second_api_key.is_some() {
            words.push("--second-api-key \"$BANKCONF_SECOND_API_KEY\"".to_string());
        }
        let plain = [
            ("--service", &self.service),
            ("--driver", &self.driver),
            ("--driver-url", &self.driver_url),
            ("--connection-id", &self.connection_id),
            ("--webhook-public-url", &self.webhook_public_url),
        ];
        for (flag, value) in plain {
            if let Some(v) = value {
                words.push(format!("{flag} {}", shell_word(v)));
            }
        }
        if let Some(m) = self.sandbox_mutant {
            words.push(format!("--sandbox-mutant {m}"));
        }
        if let Some(v) = self.sandbox_variant {
            words.push(format!("--sandbox-variant {v}"));
        }
        for p in &self.sandbox_perturb {
            words.push(format!("--sandbox-perturb {}", shell_word(p)));
        }
        words.extend(crate::harness::transport::reach::rerun_words(
            &crate::harness::transport::reach::header_names(&self.headers),
            self.ca_cert.as_ref(),
            self.insecure,
        ));
        words.extend(self.sandbox_conditions.flags());
        if self.rate_limit > 0.0 {
            words.push(format!("--rate-limit {}", self.rate_limit));
        }
        // What else changes a case's inputs or its chances: the same values, when not defaults.
        let defaults = Self::embedded();
        if self.webhook_listen != defaults.webhook_listen {
            words.push(format!("--webhook-listen {}", self.webhook_listen));
        }
        if let Some(browser) = &self.browser {
            words.push(format!("--browser {}", shell_word(&browser.display().to_string())));
        }
        if self.skip_browser {
            words.push("--skip-browser".to_string());
        }
        if self.gate != defaults.gate {
            let gate: Vec<&str> = self.gate.iter().map(|l| l.as_str()).collect();
            words.push(format!("--gate {}", gate.join(",")));
        }
        let numbers = [
            ("--cases", f64::from(self.cases), f64::from(defaults.cases)),
            ("--event-timeout", self.event_timeout, defaults.event_timeout),
            ("--request-timeout", self.request_timeout, defaults.request_timeout),
            ("--driver-timeout", self.driver_timeout, defaults.driver_timeout),
        ];
        for (flag, value, default) in numbers {
            if value != default {
                words.push(format!("{flag} {value}"));
            }
        }
        words.join(" ")
    }
}

impl SandboxConditions {
    /// The flags that set them, for rerun commands.
    pub(crate) fn flags(&self) -> Vec<String> {
        let switches = [
            ("--sandbox-connection-close", self.sandbox_connection_close),
            ("--sandbox-delivery-unreachable", self.sandbox_delivery_unreachable),
            ("--sandbox-stall-transactions", self.sandbox_stall_transactions),
            ("--sandbox-trickle-transactions", self.sandbox_trickle_transactions),
        ];
        [
            ("--sandbox-latency-ms", self.sandbox_latency_ms),
            ("--sandbox-delivery-delay-ms", self.sandbox_delivery_delay_ms),
            ("--sandbox-delivery-serial-ms", self.sandbox_delivery_serial_ms),
            ("--sandbox-rate-limit", u64::from(self.sandbox_rate_limit)),
            ("--sandbox-backlog", u64::from(self.sandbox_backlog)),
            ("--sandbox-delivery-copies", u64::from(self.sandbox_delivery_copies)),
            ("--sandbox-delivery-copy-late-ms", self.sandbox_delivery_copy_late_ms),
            ("--sandbox-delivery-shuffle-ms", self.sandbox_delivery_shuffle_ms),
            ("--sandbox-idle-close-ms", self.sandbox_idle_close_ms),
        ]
        .into_iter()
        .filter(|(_, v)| *v > 0)
        .map(|(flag, v)| format!("{flag} {v}"))
        .chain(switches.into_iter().filter(|(_, on)| *on).map(|(flag, _)| flag.to_string()))
        .collect()
    }
}
