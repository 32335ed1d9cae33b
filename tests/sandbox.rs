//! Tests of the embedded reference sandbox (`src/sandbox`), in-process on loopback only.
//! Every response body and every event is also checked against the spec's schemas.

use axum::extract::State;
use axum::http::StatusCode as AxStatus;
use axum::routing::post;
use axum::{Json, Router};
use bankconf::internal::schemas::{validate, Schema};
use bankconf::internal::spec::{prefix, ACCOUNTS_UPDATED, ACCOUNT_TYPES, TRANSACTION_DELETED};
use bankconf::sandbox::{ActionArgs, ControlError, Sandbox, SandboxConfig, Variant, DEFAULT_LIMIT, MAX_LIMIT};
use bankconf::{Action, ConnectionState};
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

// ---------------------------------------------------------------------------------------------
// Helpers

fn check(schema: Schema, value: &Value) {
    if let Err(violations) = validate(schema, value) {
        let list: Vec<String> = violations.iter().map(|v| v.to_string()).collect();
        panic!("{schema:?} violated: {list:?}\n{value:#}");
    }
}

fn is_id(s: &str, prefix: &str) -> bool {
    s.strip_prefix(prefix)
        .is_some_and(|rest| rest.len() == 26 && rest.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit()))
}

/// RFC 3339 UTC with `Z`; with `millis`, exactly three fractional digits.
fn is_utc(s: &str, millis: bool) -> bool {
    let parses = chrono::DateTime::parse_from_rfc3339(s).is_ok() && s.ends_with('Z');
    let frac = s.get(19..s.len() - 1).map(|f| f.strip_prefix('.').map_or(0, |d| d.len()));
    parses && (!millis || frac == Some(3))
}

fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(10)).build().unwrap()
}

async fn start() -> Sandbox {
    Sandbox::start(SandboxConfig::default()).await.unwrap()
}

struct Api {
    http: reqwest::Client,
    base: String,
}

impl Api {
    fn new(sb: &Sandbox) -> Self {
        Self { http: http(), base: sb.base_url.clone() }
    }

    async fn get(&self, key: &str, path: &str) -> (StatusCode, Value) {
        let resp = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(key)
            .header("Accept", "application/json")
            .send()
            .await
            .unwrap();
        let status = resp.status();
        (status, resp.json().await.unwrap())
    }

    async fn create(&self, key: &str) -> Value {
        let resp = self
            .http
            .post(format!("{}/v1/connections", self.base))
            .bearer_auth(key)
            .header("Content-Type", "application/json")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::CREATED);
        let body: Value = resp.json().await.unwrap();
        check(Schema::ConnectionCreated, &body);
        assert!(is_id(body["connectionId"].as_str().unwrap(), prefix::CONNECTION));
        assert_eq!(body["status"], "CREATED");
        assert!(body["widgetToken"].as_str().unwrap().starts_with(prefix::WIDGET_TOKEN));
        body
    }

    async fn control(&self, conn: &str, action: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut req = self.http.post(format!("{}/sandbox/connections/{conn}/{action}", self.base));
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        (status, resp.json().await.unwrap())
    }

    async fn accounts(&self, key: &str, conn: &str) -> Vec<Value> {
        let (status, body) = self.get(key, &format!("/v1/connections/{conn}/accounts")).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        check(Schema::Accounts, &body);
        body.as_array().unwrap().clone()
    }

    async fn account(&self, key: &str, account: &str) -> Value {
        let (status, body) = self.get(key, &format!("/v1/accounts/{account}")).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        check(Schema::Account, &body);
        body
    }

    /// Every transaction of an account, following cursors; checks every page.
    async fn all_transactions(&self, key: &str, account: &str, limit: Option<usize>) -> Vec<Value> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        let page_size = limit.map_or(DEFAULT_LIMIT, |l| l.min(MAX_LIMIT));
        for _ in 0..1000 {
            let mut path = format!("/v1/accounts/{account}/transactions?");
            if let Some(l) = limit {
                path.push_str(&format!("limit={l}&"));
            }
            if let Some(c) = &cursor {
                path.push_str(&format!("starting_after={c}"));
            }
            let (status, page) = self.get(key, &path).await;
            assert_eq!(status, StatusCode::OK, "{page}");
            check(Schema::TransactionsPage, &page);
            let data = page["data"].as_array().unwrap();
            assert!(data.len() <= page_size);
            for t in data {
                check(Schema::Transaction, t);
                assert_eq!(t["accountId"], account);
            }
            out.extend(data.iter().cloned());
            if page["has_more"] == json!(true) {
                assert_eq!(data.len(), page_size, "a page before the last is full");
                let next = page["next_cursor"].as_str().expect("next_cursor with has_more");
                assert_eq!(next, data.last().unwrap()["id"].as_str().unwrap());
                cursor = Some(next.to_string());
            } else {
                assert_eq!(page["has_more"], json!(false));
                assert!(page.get("next_cursor").is_none(), "no next_cursor on the last page");
                return out;
            }
        }
        panic!("pagination does not end");
    }
}

/// A webhook receiver on 127.0.0.1:0 collecting the deliveries. The first `fail_first`
/// deliveries are answered 500 (to exercise retries).
#[derive(Clone)]
struct Receiver {
    events: Arc<Mutex<Vec<Value>>>,
    notify: Arc<Notify>,
    fail_first: Arc<AtomicUsize>,
    url: String,
}

impl Receiver {
    async fn start(fail_first: usize) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let rx = Receiver {
            events: Arc::default(),
            notify: Arc::default(),
            fail_first: Arc::new(AtomicUsize::new(fail_first)),
            url,
        };
        async fn hook(State(rx): State<Receiver>, Json(event): Json<Value>) -> AxStatus {
            let fail = rx.fail_first.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
            if fail {
                return AxStatus::INTERNAL_SERVER_ERROR;
            }
            rx.events.lock().unwrap().push(event);
            rx.notify.notify_waiters();
            AxStatus::NO_CONTENT
        }
        let app = Router::new().route("/hook", post(hook)).with_state(rx.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        rx
    }

    /// The events received for a connection once `n` of them arrived (bounded wait).
    async fn wait_for(&self, connection_id: &str, n: usize) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let notified = self.notify.notified();
            // Each event once: a retry (the sandbox's 2 s timeout met on a loaded machine) is
            // the same event again.
            let mut ids = std::collections::HashSet::new();
            let got: Vec<Value> = self
                .events
                .lock()
                .unwrap()
                .iter()
                .filter(|e| e["data"]["connectionId"] == connection_id && ids.insert(e["id"].to_string()))
                .cloned()
                .collect();
            if got.len() >= n {
                return got;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!("only {} of {n} events arrived: {got:#?}", got.len());
            }
        }
    }
}

/// Checks an event envelope (§6.1, §6.2) and returns its type.
fn check_event(e: &Value, client_id: &str, connection_id: &str) -> String {
    check(Schema::WebhookEvent, e);
    let data = &e["data"];
    assert!(is_id(e["id"].as_str().unwrap(), prefix::EVENT));
    assert_eq!(data["eventId"], e["id"]);
    assert_eq!(data["type"], e["type"]);
    assert_eq!(data["clientId"], client_id, "{e}");
    assert_eq!(data["connectionId"], connection_id);
    assert!(is_utc(e["created_at"].as_str().unwrap(), true), "{e}");
    assert!(is_utc(data["occurredAt"].as_str().unwrap(), true), "{e}");
    let kind = e["type"].as_str().unwrap().to_string();
    if let Some(state) = ConnectionState::from_event_type(&kind) {
        assert!(data.get("previousStatus").is_some() && data.get("error").is_some());
        if state == ConnectionState::Error {
            assert!(data["error"]["code"].is_string() && data["error"]["message"].is_string());
        } else {
            assert!(data["error"].is_null());
        }
    } else {
        assert!(data.get("previousStatus").is_none());
        assert!(data["accountId"].as_str().unwrap().starts_with(prefix::ACCOUNT));
    }
    kind
}

/// `(type, previousStatus)` of the events of a connection, from the sandbox's own log.
fn chain(sb: &Sandbox, connection_id: &str) -> Vec<(String, Value)> {
    sb.control
        .events()
        .iter()
        .filter(|e| e["data"]["connectionId"] == connection_id)
        .map(|e| {
            check_event(e, e["data"]["clientId"].as_str().unwrap(), connection_id);
            (e["type"].as_str().unwrap().to_string(), e["data"].get("previousStatus").cloned().unwrap_or(Value::Null))
        })
        .collect()
}

fn conn_chain(steps: &[(ConnectionState, Option<ConnectionState>)]) -> Vec<(String, Value)> {
    steps.iter().map(|(to, from)| (to.event_type().to_string(), json!(from.map(|f| f.lower())))).collect()
}

async fn connected(sb: &Sandbox, api: &Api) -> (String, Vec<Value>) {
    let key = &sb.clients[0].api_key;
    let conn = api.create(key).await["connectionId"].as_str().unwrap().to_string();
    let (status, body) = api.control(&conn, "connect", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let accounts = api.accounts(key, &conn).await;
    (conn, accounts)
}

fn by_type<'a>(accounts: &'a [Value], kind: &str) -> &'a Value {
    accounts.iter().find(|a| a["type"] == kind).unwrap()
}

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

// ---------------------------------------------------------------------------------------------
// Tests

#[tokio::test]
async fn full_lifecycle_through_control_routes_with_webhooks() {
    let sb = start().await;
    let api = Api::new(&sb);
    let rx = Receiver::start(0).await;
    let resp = api
        .http
        .post(format!("{}/sandbox/webhooks", sb.base_url))
        .json(&json!({ "url": rx.url }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    assert_eq!(sb.control.webhook_urls(), vec![rx.url.clone()]);

    let client = &sb.clients[0];
    let key = &client.api_key;
    assert!(key.starts_with("bankconf_test_") && key.len() > "bankconf_test_".len());
    assert!(is_id(&client.client_id, prefix::CLIENT));
    let conn = api.create(key).await["connectionId"].as_str().unwrap().to_string();

    // Not CONNECTED yet: no accounts.
    let (status, body) = api.get(key, &format!("/v1/connections/{conn}/accounts")).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body["error"]["code"], "connection_not_connected");

    let (status, outcome) = api.control(&conn, "connect", None).await;
    assert_eq!(status, StatusCode::OK, "{outcome}");
    assert_eq!(outcome["status"], "CONNECTED");
    assert_eq!(outcome["eventIds"].as_array().unwrap().len(), 3);

    // Accounts of every type, with the type-specific fields only where they belong.
    let accounts = api.accounts(key, &conn).await;
    let types: HashSet<&str> = accounts.iter().map(|a| a["type"].as_str().unwrap()).collect();
    assert_eq!(types, ACCOUNT_TYPES.into_iter().collect());
    for a in &accounts {
        check(Schema::Account, a);
        let kind = a["type"].as_str().unwrap();
        assert!(is_id(a["id"].as_str().unwrap(), prefix::ACCOUNT));
        assert_eq!(a["connectionId"], conn.as_str());
        let currency = a["currency"].as_str().unwrap();
        assert!(currency.len() == 3 && currency.bytes().all(|b| b.is_ascii_uppercase()));
        let number = a["accountNumber"].as_str().unwrap();
        assert!(number.starts_with("****") && number.len() == 8, "{number}");
        assert!(is_utc(a["createdAt"].as_str().unwrap(), false));
        assert!(is_utc(a["lastSyncedAt"].as_str().unwrap(), false));
        assert!(a["institution"]["id"].is_string() && a["institution"]["name"].is_string());
        assert!(a["institution"]["logo"].is_null());
        assert!(a["balance"].is_number() && a["availableBalance"].is_number());
        assert_eq!(a.get("creditLimit").is_some(), kind == "credit_card", "{a}");
        assert_eq!(a.get("currencyBalances").is_some(), kind == "credit_card", "{a}");
        let invest = kind == "brokerage" || kind == "pension";
        assert_eq!(a.get("positions").is_some(), invest, "{a}");
        assert_eq!(&api.account(key, a["id"].as_str().unwrap()).await, a);
    }
    let card = by_type(&accounts, "credit_card");
    assert!(card["creditLimit"]["amount"].is_number());
    assert!(card["currencyBalances"][0]["currency"].is_string());
    assert!(card["currencyBalances"][0]["balance"].is_number());
    let broker = by_type(&accounts, "brokerage");
    assert!(broker["positions"][0]["symbol"].is_string());

    // Transactions: shapes, signs, dates.
    let checking = by_type(&accounts, "checking");
    let checking_id = id(checking);
    let txns = api.all_transactions(key, &checking_id, None).await;
    assert_eq!(txns.len(), 57);
    assert!(txns.iter().any(|t| t["amount"].as_f64().unwrap() < 0.0));
    assert!(txns.iter().any(|t| t["amount"].as_f64().unwrap() > 0.0));
    for t in &txns {
        assert!(is_id(t["id"].as_str().unwrap(), prefix::TRANSACTION));
        assert_eq!(t["status"], "posted");
        assert_eq!(t["currency"], checking["currency"]);
        assert!(t["category"].as_str().is_some_and(|c| !c.is_empty()));
        let date = t["transactionDate"].as_str().unwrap();
        assert!(chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").is_ok() && date.len() == 10);
        assert!(is_utc(t["createdAt"].as_str().unwrap(), false));
    }

    // update_accounts: the balance moves by the new transaction, listed first.
    let (status, outcome) = api.control(&conn, "update_accounts", Some(json!({ "accountId": checking_id }))).await;
    assert_eq!(status, StatusCode::OK, "{outcome}");
    assert_eq!(outcome["accountId"], checking_id.as_str());
    let new_txn = outcome["transactionId"].as_str().unwrap().to_string();
    let after = api.account(key, &checking_id).await;
    let txns = api.all_transactions(key, &checking_id, None).await;
    assert_eq!(txns.len(), 58);
    assert_eq!(txns[0]["id"], new_txn.as_str());
    let delta = after["balance"].as_f64().unwrap() - checking["balance"].as_f64().unwrap();
    assert!((delta - txns[0]["amount"].as_f64().unwrap()).abs() < 0.005);
    assert_ne!(after["balance"], checking["balance"]);

    // delete_transaction: the given transaction disappears.
    let victim = id(&txns[30]);
    let (status, outcome) = api.control(&conn, "delete_transaction", Some(json!({ "transactionId": victim }))).await;
    assert_eq!(status, StatusCode::OK, "{outcome}");
    assert_eq!(outcome["transactionId"], victim.as_str());
    let txns = api.all_transactions(key, &checking_id, Some(10)).await;
    assert_eq!(txns.len(), 57);
    assert!(txns.iter().all(|t| t["id"] != victim.as_str()));

    let (status, outcome) = api.control(&conn, "disconnect", Some(json!({}))).await;
    assert_eq!(status, StatusCode::OK, "{outcome}");
    assert_eq!(outcome["status"], "DISCONNECTED");
    let (status, _) = api.get(key, &format!("/v1/connections/{conn}/accounts")).await;
    assert_eq!(status, StatusCode::CONFLICT);

    // The deliveries: in order, right client, right chain of previous statuses.
    let events = rx.wait_for(&conn, 7).await;
    let kinds: Vec<String> = events.iter().map(|e| check_event(e, &client.client_id, &conn)).collect();
    use ConnectionState::*;
    let expected = [
        Created.event_type(),
        CredentialsSubmitted.event_type(),
        Verifying.event_type(),
        Connected.event_type(),
        ACCOUNTS_UPDATED,
        TRANSACTION_DELETED,
        Disconnected.event_type(),
    ];
    assert_eq!(kinds, expected);
    let previous: Vec<Value> =
        events.iter().map(|e| e["data"].get("previousStatus").cloned().unwrap_or(json!("-"))).collect();
    assert_eq!(
        previous,
        [
            json!(null),
            json!("created"),
            json!("credentials_submitted"),
            json!("verifying"),
            json!("-"),
            json!("-"),
            json!("connected")
        ]
    );
    assert_eq!(events[4]["data"]["accountId"], checking_id.as_str());
    assert_eq!(events[5]["data"]["accountId"], checking_id.as_str());
    assert_eq!(events[5]["data"]["transactionId"], victim.as_str());
    // The same events as the sandbox's log, which also checks them.
    assert_eq!(chain(&sb, &conn).len(), 7);
    let logged: Vec<Value> =
        sb.control.events().into_iter().filter(|e| e["data"]["connectionId"] == conn.as_str()).collect();
    assert_eq!(logged, events);
    sb.stop().await;
}

#[tokio::test]
async fn every_path_of_the_transition_table() {
    use ConnectionState::*;
    let sb = start().await;
    let api = Api::new(&sb);
    let key = &sb.clients[1].api_key;
    let ctl = &sb.control;
    let none = ActionArgs::default;

    // created → mfa_required → connected → error → connected → disconnected.
    let c = api.create(key).await["connectionId"].as_str().unwrap().to_string();
    ctl.apply(&c, Action::RequireMfa, none()).await.unwrap();
    assert!(matches!(ctl.apply(&c, Action::RequireMfa, none()).await, Err(ControlError::NotPossible(_))));
    ctl.apply(&c, Action::Connect, none()).await.unwrap();
    assert!(matches!(ctl.apply(&c, Action::Connect, none()).await, Err(ControlError::NotPossible(_))));
    let accounts = api.accounts(key, &c).await;
    ctl.apply(&c, Action::Error, none()).await.unwrap();
    let (status, _) = api.get(key, &format!("/v1/connections/{c}/accounts")).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(matches!(ctl.apply(&c, Action::UpdateAccounts, none()).await, Err(ControlError::NotPossible(_))));
    let outcome = ctl.apply_outcome(&c, Action::Connect, none()).await.unwrap();
    assert_eq!(outcome.status, Connected);
    // Reconnecting keeps the same accounts.
    let again = api.accounts(key, &c).await;
    assert_eq!(accounts.iter().map(id).collect::<Vec<_>>(), again.iter().map(id).collect::<Vec<_>>());
    ctl.apply(&c, Action::Disconnect, none()).await.unwrap();
    for action in Action::ALL {
        assert!(
            matches!(ctl.apply(&c, action, none()).await, Err(ControlError::NotPossible(_))),
            "{action} after disconnect"
        );
    }
    assert_eq!(
        chain(&sb, &c),
        conn_chain(&[
            (Created, None),
            (CredentialsSubmitted, Some(Created)),
            (Verifying, Some(CredentialsSubmitted)),
            (MfaRequired, Some(Verifying)),
            (Verifying, Some(MfaRequired)),
            (Connected, Some(Verifying)),
            (Error, Some(Connected)),
            (CredentialsSubmitted, Some(Error)),
            (Verifying, Some(CredentialsSubmitted)),
            (Connected, Some(Verifying)),
            (Disconnected, Some(Connected)),
        ])
    );

    // created → failed_auth → failed_auth → error → disconnected; mfa then fail_auth.
    let c = api.create(key).await["connectionId"].as_str().unwrap().to_string();
    ctl.apply(&c, Action::FailAuth, none()).await.unwrap();
    ctl.apply(&c, Action::FailAuth, none()).await.unwrap();
    ctl.apply(&c, Action::Error, none()).await.unwrap();
    assert!(matches!(ctl.apply(&c, Action::Error, none()).await, Err(ControlError::NotPossible(_))));
    ctl.apply(&c, Action::Disconnect, none()).await.unwrap();
    assert_eq!(
        chain(&sb, &c),
        conn_chain(&[
            (Created, None),
            (CredentialsSubmitted, Some(Created)),
            (Verifying, Some(CredentialsSubmitted)),
            (FailedAuth, Some(Verifying)),
            (CredentialsSubmitted, Some(FailedAuth)),
            (Verifying, Some(CredentialsSubmitted)),
            (FailedAuth, Some(Verifying)),
            (Error, Some(FailedAuth)),
            (Disconnected, Some(Error)),
        ])
    );
    let c = api.create(key).await["connectionId"].as_str().unwrap().to_string();
    ctl.apply(&c, Action::RequireMfa, none()).await.unwrap();
    ctl.apply(&c, Action::FailAuth, none()).await.unwrap();
    let tail: Vec<_> = chain(&sb, &c).split_off(4);
    assert_eq!(tail, conn_chain(&[(Verifying, Some(MfaRequired)), (FailedAuth, Some(Verifying))]));
    // The error event carries an error object.
    ctl.apply(&c, Action::Error, none()).await.unwrap();
    let last = ctl.events().pop().unwrap();
    assert_eq!(last["type"], "connection.error");
    assert!(last["data"]["error"]["code"].is_string());

    // Unknown ids.
    assert!(matches!(ctl.apply("conn_NOPE", Action::Connect, none()).await, Err(ControlError::NotFound(_))));
    let c = api.create(key).await["connectionId"].as_str().unwrap().to_string();
    ctl.apply(&c, Action::Connect, none()).await.unwrap();
    for (account_id, transaction_id) in [(Some("acc_NOPE"), None), (None, Some("txn_NOPE"))] {
        let target =
            ActionArgs { account_id: account_id.map(Into::into), transaction_id: transaction_id.map(Into::into) };
        assert!(matches!(ctl.apply(&c, Action::DeleteTransaction, target).await, Err(ControlError::NotFound(_))));
    }
    // Another connection's account is not a target.
    let other = &accounts[0]["id"];
    let target = ActionArgs { account_id: other.as_str().map(Into::into), transaction_id: None };
    assert!(matches!(ctl.apply(&c, Action::UpdateAccounts, target).await, Err(ControlError::NotFound(_))));
    // The pension account has no transactions to delete.
    let fresh = api.accounts(key, &c).await;
    let pension = ActionArgs { account_id: Some(id(by_type(&fresh, "pension"))), transaction_id: None };
    assert!(matches!(ctl.apply(&c, Action::DeleteTransaction, pension).await, Err(ControlError::NotPossible(_))));
    // Without a target: the newest transaction of the first account.
    let checking = id(by_type(&fresh, "checking"));
    let newest = api.all_transactions(key, &checking, Some(1)).await[0]["id"].clone();
    let outcome = ctl.apply_outcome(&c, Action::DeleteTransaction, none()).await.unwrap();
    assert_eq!(outcome.account_id.as_deref(), Some(checking.as_str()));
    assert_eq!(json!(outcome.transaction_id), newest);
    sb.stop().await;
}

#[path = "sandbox/behaviours.rs"]
mod behaviours;
