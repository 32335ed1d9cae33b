//! The widget script served at `/widget/<service>-connect.js` (§1 step 2).
//!
//! It defines one global, named after the service: the service name split at every
//! non-alphanumeric character, each part capitalised, joined, then `Connect` appended
//! (`bankconf` → `BankconfConnect`, `my-bank` → `MyBankConnect`). Its `open({token,
//! connectionId, onSuccess})` (§1) throws a `TypeError` unless `token` is a string starting
//! with `sess_` (§2.1), `connectionId` a string starting with `conn_` (§2) and `onSuccess` a
//! function. In the sandbox there is no bank to log in to: `open` calls `onSuccess` at once
//! (synchronously) with the metadata `{connectionId, institution: {id, name}}` (§1 leaves the
//! shape open) and returns `{close()}`. It does not change the connection's state: drive the
//! lifecycle with the control routes.

use crate::spec::prefix;

/// The file name under `/widget/` for a service.
pub(crate) fn file_name(service: &str) -> String {
    format!("{service}-connect.js")
}

/// The global the script defines for a service, e.g. `BankconfConnect`.
pub(crate) fn global_name(service: &str) -> String {
    let mut name: String = service
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            let first = chars.next().expect("non-empty").to_ascii_uppercase();
            std::iter::once(first).chain(chars).collect::<String>()
        })
        .collect();
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert_str(0, "Service");
    }
    name.push_str("Connect");
    name
}

/// The template's call of `onSuccess`.
pub(crate) const SUCCESS: &str = "options.onSuccess(metadata);";

/// The frame page and the session a widget like real ones loads (`faults::widget`).
pub(crate) const FRAME_FILE: &str = "frame.html";
pub(crate) const SESSION_FILE: &str = "session";

/// The conforming script text.
pub(crate) fn conforming(service: &str) -> String {
    const TEMPLATE: &str = r#"/* @SERVICE@ sandbox connect widget. */
(function (root) {
  "use strict";
  var script = typeof document !== "undefined" && document.currentScript;
  var origin = script && script.src ? new URL(script.src).origin : "";

  function requirePrefixed(options, field, prefix) {
    var value = options[field];
    if (typeof value !== "string") {
      throw new TypeError("@GLOBAL@.open: " + field + " must be a string");
    }
    if (value.indexOf(prefix) !== 0 || value.length === prefix.length) {
      throw new TypeError("@GLOBAL@.open: " + field + " must start with " + prefix);
    }
    return value;
  }

  function open(options) {
    if (options === null || typeof options !== "object") {
      throw new TypeError("@GLOBAL@.open: expected an options object");
    }
    requirePrefixed(options, "token", "@TOKEN@");
    var connectionId = requirePrefixed(options, "connectionId", "@CONN@");
    if (typeof options.onSuccess !== "function") {
      throw new TypeError("@GLOBAL@.open: onSuccess must be a function");
    }
    var metadata = {
      connectionId: connectionId,
      institution: { id: "ins_sandbox_bank", name: "Sandbox Bank" }
    };
    options.onSuccess(metadata);
    return { close: function () {} };
  }

  var api = { open: open, version: "1" };
  root["@GLOBAL@"] = api;
  if (typeof module === "object" && module && typeof module.exports === "object") {
    module.exports = api;
  }
})(typeof window !== "undefined" ? window : typeof globalThis !== "undefined" ? globalThis : this);
"#;
    TEMPLATE
        .replace("@GLOBAL@", &global_name(service))
        .replace("@SERVICE@", &service.replace("*/", ""))
        .replace("@TOKEN@", prefix::WIDGET_TOKEN)
        .replace("@CONN@", prefix::CONNECTION)
}

#[cfg(test)]
mod tests {
    use super::global_name;

    #[test]
    fn global_names() {
        assert_eq!(global_name("bankconf"), "BankconfConnect");
        assert_eq!(global_name("my-bank"), "MyBankConnect");
        assert_eq!(global_name("9bank"), "Service9bankConnect");
        assert_eq!(global_name(""), "ServiceConnect");
    }
}
