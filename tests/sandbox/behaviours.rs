//! Pagination, error choices, the widget script, concurrency, webhook retries, keys and the driver
//! script of the sandbox (split from sandbox.rs to keep files under 600 lines).

use super::*;

#[tokio::test]
async fn pagination_returns_each_transaction_exactly_once() {
    let sb = start().await;
    let api = Api::new(&sb);
    let key = &sb.clients[0].api_key;
    let (conn, accounts) = connected(&sb, &api).await;
    let mut counts = HashMap::new();
    for a in &accounts {
        let aid = id(a);
        let reference = api.all_transactions(key, &aid, Some(100)).await;
        counts.insert(a["type"].as_str().unwrap().to_string(), reference.len());
        // Documented order: transactionDate descending, then id descending.
        for pair in reference.windows(2) {
            let k =
                |t: &Value| (t["transactionDate"].as_str().unwrap().to_string(), t["id"].as_str().unwrap().to_string());
            assert!(k(&pair[0]) > k(&pair[1]), "order: {pair:?}");
        }
        for limit in [None, Some(1), Some(2), Some(7), Some(24), Some(25), Some(26), Some(56), Some(57), Some(1000)] {
            let got = api.all_transactions(key, &aid, limit).await;
            assert_eq!(got, reference, "limit {limit:?}");
            let ids: HashSet<String> = got.iter().map(id).collect();
            assert_eq!(ids.len(), got.len());
        }
    }
    // 0, 1, exactly one default page, many.
    assert_eq!(counts["pension"], 0);
    assert_eq!(counts["brokerage"], 1);
    assert_eq!(counts["savings"], DEFAULT_LIMIT);
    assert_eq!(counts["checking"], 57);
    let savings = id(by_type(&accounts, "savings"));
    let (_, page) = api.get(key, &format!("/v1/accounts/{savings}/transactions")).await;
    assert_eq!(page["data"].as_array().unwrap().len(), DEFAULT_LIMIT);
    assert_eq!(page["has_more"], false);

    // Past the maximum: limit is clamped to 100.
    let checking = id(by_type(&accounts, "checking"));
    for _ in 0..50 {
        let target = ActionArgs { account_id: Some(checking.clone()), transaction_id: None };
        sb.control.apply(&conn, Action::UpdateAccounts, target).await.unwrap();
    }
    let (status, page) = api.get(key, &format!("/v1/accounts/{checking}/transactions?limit=1000")).await;
    assert_eq!(status, StatusCode::OK);
    check(Schema::TransactionsPage, &page);
    assert_eq!(page["data"].as_array().unwrap().len(), MAX_LIMIT);
    assert_eq!(page["has_more"], true);
    let all = api.all_transactions(key, &checking, Some(1000)).await;
    assert_eq!(all.len(), 107);

    // A cursor naming a transaction deleted since continues after its place.
    let (_, first) = api.get(key, &format!("/v1/accounts/{checking}/transactions?limit=10")).await;
    let cursor = first["next_cursor"].as_str().unwrap().to_string();
    let (_, expected) =
        api.get(key, &format!("/v1/accounts/{checking}/transactions?limit=10&starting_after={cursor}")).await;
    let (status, _) =
        api.control(&conn, "delete_transaction", Some(json!({ "accountId": checking, "transactionId": cursor }))).await;
    assert_eq!(status, StatusCode::OK);
    let (status, next) =
        api.get(key, &format!("/v1/accounts/{checking}/transactions?limit=10&starting_after={cursor}")).await;
    assert_eq!(status, StatusCode::OK, "{next}");
    assert_eq!(next, expected);
    sb.stop().await;
}

#[tokio::test]
async fn error_choices() {
    let sb = start().await;
    let api = Api::new(&sb);
    let (a, b) = (&sb.clients[0].api_key, &sb.clients[1].api_key);
    let (conn, accounts) = connected(&sb, &api).await;
    let account = id(&accounts[0]);
    let other_account = id(&accounts[1]);
    let error_code = |body: &Value| body["error"]["code"].as_str().unwrap().to_string();

    // 401: missing, malformed, unknown.
    let url = format!("{}/v1/connections/{conn}/accounts", sb.base_url);
    for auth in [None, Some("Basic abc"), Some("Bearer"), Some("Bearer "), Some(a.as_str()), Some("Bearer nope_key")] {
        let mut req = api.http.get(&url);
        if let Some(auth) = auth {
            req = req.header("Authorization", auth);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "{auth:?}");
        assert_eq!(resp.headers()["www-authenticate"], "Bearer");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(error_code(&body), "unauthorized");
        assert!(body["error"]["message"].is_string());
    }
    let resp = api.http.post(format!("{}/v1/connections", sb.base_url)).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);

    // 404: another client's connection and account, unknown ids, unknown paths.
    for path in [
        format!("/v1/connections/{conn}/accounts"),
        format!("/v1/accounts/{account}"),
        format!("/v1/accounts/{account}/transactions"),
    ] {
        let (status, body) = api.get(b, &path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(error_code(&body), "not_found");
    }
    for path in [
        "/v1/connections/conn_UNKNOWN/accounts",
        "/v1/accounts/acc_UNKNOWN",
        "/v1/accounts/acc_UNKNOWN/transactions",
        "/v1/nothing",
    ] {
        let (status, body) = api.get(a, path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(error_code(&body), "not_found");
    }

    // 409: accounts of a connection not CONNECTED.
    let fresh = api.create(a).await["connectionId"].as_str().unwrap().to_string();
    let (status, body) = api.get(a, &format!("/v1/connections/{fresh}/accounts")).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(error_code(&body), "connection_not_connected");

    // 400: bad limit, unknown cursor, another account's transaction as cursor.
    for limit in ["0", "-1", "abc", "1.5", "", "+3", "%20"] {
        let (status, body) = api.get(a, &format!("/v1/accounts/{account}/transactions?limit={limit}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "limit={limit}");
        assert_eq!(error_code(&body), "invalid_limit");
    }
    for limit in ["1", "007", "100", "101", "99999999999999999999999"] {
        let (status, _) = api.get(a, &format!("/v1/accounts/{account}/transactions?limit={limit}")).await;
        assert_eq!(status, StatusCode::OK, "limit={limit}");
    }
    let foreign = api.all_transactions(a, &other_account, None).await;
    let foreign_txn = foreign.first().map(id).unwrap();
    for cursor in ["txn_UNKNOWN", "", foreign_txn.as_str()] {
        let (status, body) = api.get(a, &format!("/v1/accounts/{account}/transactions?starting_after={cursor}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "cursor {cursor:?}");
        assert_eq!(error_code(&body), "invalid_cursor");
    }

    // Control routes.
    let (status, body) = api.control(&conn, "fly", None).await;
    assert_eq!((status, error_code(&body).as_str()), (StatusCode::BAD_REQUEST, "unknown_action"));
    let (status, _) = api.control("conn_UNKNOWN", "connect", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = api.control(&conn, "connect", None).await;
    assert_eq!((status, error_code(&body).as_str()), (StatusCode::CONFLICT, "not_possible"));
    let (status, _) = api.control(&conn, "update_accounts", Some(json!([1]))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = api.control(&conn, "update_accounts", Some(json!({ "accountId": "acc_UNKNOWN" }))).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    for body in [json!({}), json!({ "url": "ftp://x" }), json!({ "url": 3 })] {
        let resp = api.http.post(format!("{}/sandbox/webhooks", sb.base_url)).json(&body).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST, "{body}");
    }
    let resp = api.http.delete(&url).bearer_auth(a).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);
    sb.stop().await;
}

#[tokio::test]
async fn widget_script() {
    let sb = start().await;
    let http = http();
    let resp = http.get(format!("{}/widget/bankconf-connect.js", sb.base_url)).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["content-type"], "application/javascript");
    let script = resp.text().await.unwrap();
    assert!(script.contains("BankconfConnect"));
    for other in ["other-connect.js", "bankconf-connect.jsx", "bankconf.js"] {
        let resp = http.get(format!("{}/widget/{other}", sb.base_url)).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::NOT_FOUND, "{other}");
    }

    // Run it if node is available: argument checks and the onSuccess call.
    let probe = r#"
const api = globalThis.BankconfConnect;
const throws = (opts) => { try { api.open(opts); return false; } catch (e) { return e instanceof TypeError; } };
const ok = (x) => {};
const cases = [
  undefined, {}, { token: 1, connectionId: "conn_A", onSuccess: ok },
  { token: "tok_A", connectionId: "conn_A", onSuccess: ok },
  { token: "sess_A", connectionId: 5, onSuccess: ok },
  { token: "sess_A", connectionId: "acc_A", onSuccess: ok },
  { token: "sess_A", connectionId: "conn_A" },
  { token: "sess_A", connectionId: "conn_A", onSuccess: "no" },
];
if (!cases.every(throws)) { throw new Error("a bad call did not throw TypeError"); }
let meta = null;
api.open({ token: "sess_A", connectionId: "conn_A", onSuccess: (m) => { meta = m; } });
if (!meta || meta.connectionId !== "conn_A" || typeof meta.institution.name !== "string") {
  throw new Error("onSuccess not called with metadata");
}
console.log("widget ok");
"#;
    let node = tokio::process::Command::new("node").arg("-e").arg(format!("{script}\n{probe}")).output().await;
    match node {
        Ok(out) => assert!(
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains("widget ok"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(_) => eprintln!("node not available: widget script not executed"),
    }
    sb.stop().await;
}

#[tokio::test]
async fn two_hundred_concurrent_requests() {
    let sb = start().await;
    let api = Arc::new(Api::new(&sb));
    let key = sb.clients[0].api_key.clone();
    let (conn, accounts) = connected(&sb, &api).await;
    let account = id(&accounts[0]);
    let mut tasks = Vec::new();
    for i in 0..200 {
        let (api, key, conn, account) = (api.clone(), key.clone(), conn.clone(), account.clone());
        tasks.push(tokio::spawn(async move {
            match i % 4 {
                0 => Some(api.create(&key).await["connectionId"].as_str().unwrap().to_string()),
                1 => {
                    assert_eq!(api.accounts(&key, &conn).await.len(), 5);
                    None
                }
                2 => {
                    assert_eq!(id(&api.account(&key, &account).await), account);
                    None
                }
                _ => {
                    let (status, page) = api.get(&key, &format!("/v1/accounts/{account}/transactions?limit=5")).await;
                    assert_eq!(status, StatusCode::OK);
                    check(Schema::TransactionsPage, &page);
                    None
                }
            }
        }));
    }
    let mut created = HashSet::new();
    for t in tasks {
        if let Some(c) = t.await.unwrap() {
            assert!(created.insert(c));
        }
    }
    assert_eq!(created.len(), 50);
    let created_events = sb.control.events().into_iter().filter(|e| e["type"] == "connection.created").count();
    assert_eq!(created_events, 51);
    sb.stop().await;
}

#[tokio::test]
async fn webhooks_are_retried_and_ordered() {
    let sb = start().await;
    let api = Api::new(&sb);
    let rx = Receiver::start(2).await; // the first two deliveries fail
    sb.control.register_webhook(&rx.url).await;
    sb.control.register_webhook(&rx.url).await; // no duplicate deliveries
    let key = &sb.clients[1].api_key;
    let conn = api.create(key).await["connectionId"].as_str().unwrap().to_string();
    sb.control.apply(&conn, Action::FailAuth, ActionArgs::default()).await.unwrap();
    let events = rx.wait_for(&conn, 4).await;
    let kinds: Vec<String> = events.iter().map(|e| check_event(e, &sb.clients[1].client_id, &conn)).collect();
    assert_eq!(
        kinds,
        ["connection.created", "connection.credentials_submitted", "connection.verifying", "connection.failed_auth"]
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(rx.events.lock().unwrap().len(), 4);
    sb.stop().await;
}

#[tokio::test]
async fn configured_keys_and_stop() {
    let config =
        SandboxConfig { api_keys: vec!["acme_live_123".into(), "acme_live_456".into()], ..SandboxConfig::default() };
    let sb = Sandbox::start(config).await.unwrap();
    assert_eq!(sb.clients.len(), 2);
    assert_ne!(sb.clients[0].client_id, sb.clients[1].client_id);
    assert!(sb.base_url.starts_with("http://127.0.0.1:"));
    let api = Api::new(&sb);
    api.create("acme_live_456").await;
    let base = sb.base_url.clone();
    sb.stop().await;
    let result = http().post(format!("{base}/v1/connections")).send().await;
    assert!(result.is_err(), "still serving after stop");
}

#[tokio::test]
async fn driver_script() {
    if std::process::Command::new("curl").arg("--version").output().is_err() {
        eprintln!("curl not available: driver script not tested");
        return;
    }
    let sb = start().await;
    let api = Api::new(&sb);
    let key = &sb.clients[0].api_key;
    let conn = api.create(key).await["connectionId"].as_str().unwrap().to_string();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sandbox-driver.sh");
    let run = |vars: Vec<(&'static str, String)>| {
        let mut cmd = tokio::process::Command::new("sh");
        cmd.arg("-c").arg(format!("sh '{script}'"));
        for (k, _) in std::env::vars() {
            if k.starts_with("BANKCONF_") {
                cmd.env_remove(k);
            }
        }
        for (k, v) in vars {
            cmd.env(k, v);
        }
        async move {
            let out = cmd.output().await.unwrap();
            (out.status.code(), String::from_utf8_lossy(&out.stderr).to_string())
        }
    };
    let base = || ("BANKCONF_BASE_URL", sb.base_url.clone());
    let c = || ("BANKCONF_CONNECTION_ID", conn.clone());

    let rx = Receiver::start(0).await;
    let (code, err) =
        run(vec![("BANKCONF_ACTION", "register_webhook".into()), base(), ("BANKCONF_WEBHOOK_URL", rx.url.clone())])
            .await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(sb.control.webhook_urls(), vec![rx.url.clone()]);
    let (code, err) =
        run(vec![("BANKCONF_ACTION", "connect".into()), base(), c(), ("BANKCONF_WIDGET_TOKEN", "sess_X".into())]).await;
    assert_eq!(code, Some(0), "{err}");
    let (code, _) = run(vec![("BANKCONF_ACTION", "connect".into()), base(), c()]).await;
    assert_eq!(code, Some(4));
    let (code, _) = run(vec![("BANKCONF_ACTION", "fly".into()), base(), c()]).await;
    assert_eq!(code, Some(3));
    let (code, _) = run(vec![base(), c()]).await;
    assert_eq!(code, Some(3));

    let accounts = api.accounts(key, &conn).await;
    let savings = id(by_type(&accounts, "savings"));
    let (code, err) =
        run(vec![("BANKCONF_ACTION", "update_accounts".into()), base(), c(), ("BANKCONF_ACCOUNT_ID", savings.clone())])
            .await;
    assert_eq!(code, Some(0), "{err}");
    let victim = id(&api.all_transactions(key, &savings, None).await[3]);
    let (code, err) = run(vec![
        ("BANKCONF_ACTION", "delete_transaction".into()),
        base(),
        c(),
        ("BANKCONF_ACCOUNT_ID", savings.clone()),
        ("BANKCONF_TRANSACTION_ID", victim.clone()),
    ])
    .await;
    assert_eq!(code, Some(0), "{err}");
    assert!(api.all_transactions(key, &savings, None).await.iter().all(|t| t["id"] != victim.as_str()));
    let events = rx.wait_for(&conn, 5).await;
    assert_eq!(events[3]["type"], ACCOUNTS_UPDATED);
    assert_eq!(events[3]["data"]["accountId"], savings.as_str());
    assert_eq!(events[4]["data"]["transactionId"], victim.as_str());

    // Other failures: exit 1 with a message.
    let (code, err) =
        run(vec![("BANKCONF_ACTION", "error".into()), base(), ("BANKCONF_CONNECTION_ID", "conn_UNKNOWN".into())]).await;
    assert_eq!(code, Some(1));
    assert!(err.contains("404"), "{err}");
    let (code, err) = run(vec![("BANKCONF_ACTION", "disconnect".into()), c()]).await;
    assert_eq!(code, Some(1));
    assert!(!err.is_empty());
    let (code, _) = run(vec![("BANKCONF_ACTION", "disconnect".into()), base(), c()]).await;
    assert_eq!(code, Some(0));
    sb.stop().await;
}

/// Variant `background-sync`: 0.4 s after a connection connects, with no action of anyone's,
/// one of its accounts gains a transaction and `accounts.updated` names it, 5 times (§1 item 5).
#[tokio::test]
async fn a_background_sync_adds_a_transaction_and_announces_it() {
    let sb = Sandbox::start(SandboxConfig { variant: Some(Variant::BackgroundSync), ..SandboxConfig::default() })
        .await
        .unwrap();
    let api = Api::new(&sb);
    let key = &sb.clients[0].api_key;
    let (conn, accounts) = connected(&sb, &api).await;
    let account = id(&accounts[0]);
    let before = api.all_transactions(key, &account, None).await.len();
    let updated = |sb: &Sandbox| sb.control.events().iter().filter(|e| e["type"] == ACCOUNTS_UPDATED).count();
    assert_eq!(updated(&sb), 0, "nothing synced yet");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let after = api.all_transactions(key, &account, None).await.len();
    assert_eq!(after, before + 5, "the syncs added five transactions to {account} of {conn}");
    assert_eq!(updated(&sb), 5, "and announced each");
}
