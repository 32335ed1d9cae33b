//! The four invariants judge whatever the record holds: observations added here come from no
//! case's flow, and each invariant finds what they break.

use super::*;
use serde_json::json;

fn at(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(1_700_000_000_000 + ms).expect("a time")
}

fn stamp(ms: i64) -> String {
    at(ms).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn segments(path: &str) -> Vec<String> {
    path.split('/').map(str::to_string).collect()
}

/// Adds one exchange: `method path`, sent at `ms`, answered 50 ms later.
fn add(record: &mut Record, method: &str, path: &str, credential: Credential, status: u16, ms: i64, body: Value) {
    let seq = record.answers.len() as u64;
    let request = format!("{method} /{path}");
    let segments = segments(path);
    record.answer(Exchange {
        seq,
        request: &request,
        method,
        segments: &segments,
        credential,
        status,
        sent: at(ms),
        answered: at(ms + 50),
        body: Some(&body),
    });
}

fn created_event(seq: u64, connection: &str, ms: i64) -> Delivery {
    Delivery::new(
        seq,
        json!({"id": format!("evt_{seq}"), "type": "connection.created", "created_at": stamp(ms),
               "data": {"eventId": format!("evt_{seq}"), "type": "connection.created", "occurredAt": stamp(ms),
                        "clientId": "cli_1", "connectionId": connection, "previousStatus": null, "error": null}}),
    )
}

/// A run as the cases make it: the first client creates conn_1 (announced), lists its account
/// and pages its transactions; the second client the same with its own ids.
fn a_run() -> Record {
    let mut r = Record::default();
    let first = Credential::Key(Client::First);
    let second = Credential::Key(Client::Second);
    add(
        &mut r,
        "POST",
        "v1/connections",
        first.clone(),
        201,
        0,
        json!({"connectionId": "conn_1", "status": "CREATED", "widgetToken": "sess_1"}),
    );
    r.delivery(at(200), created_event(0, "conn_1", 30));
    let account = |id: &str, conn: &str, name: &str, balance: f64, created: i64| {
        json!({"id": id, "connectionId": conn,
        "name": name, "type": "checking", "currency": "EUR", "balance": balance, "createdAt": stamp(created)})
    };
    let mine = json!([account("acc_1", "conn_1", "Mine", 10.5, 500)]);
    add(&mut r, "GET", "v1/connections/conn_1/accounts", first.clone(), 200, 1000, mine);
    add(
        &mut r,
        "GET",
        "v1/accounts/acc_1/transactions",
        first,
        200,
        1100,
        json!({"data": [{"id": "txn_1", "accountId": "acc_1", "amount": -3, "createdAt": stamp(600)}], "has_more": false}),
    );
    add(
        &mut r,
        "POST",
        "v1/connections",
        second.clone(),
        201,
        2000,
        json!({"connectionId": "conn_2", "status": "CREATED", "widgetToken": "sess_2"}),
    );
    add(
        &mut r,
        "GET",
        "v1/connections/conn_2/accounts",
        second,
        200,
        3000,
        json!([account("acc_2", "conn_2", "Theirs", 99.25, 2500)]),
    );
    r
}

fn failures(record: &Record) -> [usize; 4] {
    [identity::judge, clock::judge, reach::judge, cause::judge].map(|rule| rule(record).found.len())
}

#[test]
fn a_conforming_run_breaks_no_invariant() {
    assert_eq!(failures(&a_run()), [0, 0, 0, 0]);
}

#[test]
fn observations_no_case_names_are_judged_by_all_four_invariants() {
    let mut r = a_run();
    // A read no case makes: the widget token of conn_1 as the Bearer key on its own account,
    // answered with another account, created an hour after the read.
    let mut other = json!({"id": "acc_7", "connectionId": "conn_1", "type": "checking", "currency": "EUR"});
    other["createdAt"] = json!(stamp(3_600_000));
    add(&mut r, "GET", "v1/accounts/acc_1", Credential::Header("Bearer sess_1".into()), 200, 5000, other);
    // The first client reads the second's account: the name blanked, the rest as the second saw it.
    add(
        &mut r,
        "GET",
        "v1/connections/conn_2/accounts",
        Credential::Key(Client::First),
        200,
        5200,
        json!([{"id": "acc_2", "connectionId": "conn_2", "name": "", "balance": 99.25, "createdAt": stamp(2500)}]),
    );
    // Two refused creations, each followed by a connection the run never made.
    for (i, ms) in [(1u64, 8000), (2, 12000)] {
        add(&mut r, "POST", "v1/connections", Credential::Missing, 401, ms, json!(null));
        r.delivery(at(ms + 300), created_event(i, &format!("conn_x{i}"), ms + 40));
    }
    let [identity, clock, reach, cause] = failures(&r);
    assert!(identity >= 1, "identity judged the read answered under another id");
    assert!(clock >= 1, "clock judged its createdAt");
    assert!(reach >= 2, "reach judged the widget token and the blanked leak: {reach}");
    assert_eq!(cause, 1, "cause judged the refusals and their effects");
    let found = reach::judge(&r).found;
    assert!(found.iter().any(|f| f.to_string().contains("its own connection")), "{found:?}");
    assert!(found.iter().any(|f| f.to_string().contains("balance, createdAt")), "{found:?}");
    assert!(found.iter().all(|f| !f.to_string().contains("sess_1")), "a token is never shown");
}

#[test]
fn a_clock_ahead_and_ids_repeated_across_clients_are_legal() {
    let mut r = Record::default();
    let skew = 90_000;
    for (client, ms) in [(Client::First, 0), (Client::Second, 1000)] {
        let key = Credential::Key(client);
        add(
            &mut r,
            "POST",
            "v1/connections",
            key.clone(),
            201,
            ms,
            json!({"connectionId": format!("conn_{ms}"), "status": "CREATED"}),
        );
        r.delivery(at(ms + 100), created_event(ms as u64, &format!("conn_{ms}"), ms + skew + 20));
        let account = json!([{"id": "acc_1", "connectionId": format!("conn_{ms}"), "name": format!("n{ms}"),
            "type": "savings", "currency": "USD", "createdAt": stamp(ms + skew + 40)}]);
        add(&mut r, "GET", &format!("v1/connections/conn_{ms}/accounts"), key, 200, ms + 100, account);
    }
    assert_eq!(failures(&r), [0, 0, 0, 0]);
    // A refusal on its own, with a steady background of other connections: no effect proven.
    add(&mut r, "POST", "v1/connections", Credential::NearKey, 401, 5000, json!(null));
    for i in 0..3 {
        r.delivery(at(20_000 + i * 5000), created_event(10 + i as u64, &format!("conn_bg{i}"), 20_000 + i * 5000));
    }
    assert_eq!(failures(&r), [0, 0, 0, 0]);
}

fn connected_event(seq: u64, connection: &str, ms: i64) -> Delivery {
    let mut event = created_event(seq, connection, ms);
    event.body["type"] = json!("connection.connected");
    event.body["data"]["type"] = json!("connection.connected");
    event.body["data"]["previousStatus"] = json!("verifying");
    Delivery::new(seq, event.body)
}

fn call(action: &'static str, connection: &str, ms: i64) -> Call {
    Call { action, connection: Some(connection.into()), started: at(ms), done: true }
}

#[test]
fn a_clock_hours_ahead_is_not_skew() {
    let mut r = a_run();
    let hours = 2 * 3_600_000;
    r.deliveries.clear();
    r.delivery(at(200), created_event(0, "conn_1", hours + 30));
    let found = clock::judge(&r).found;
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].to_string().contains("this machine"), "both causes named: {found:?}");
    // Stamped two hours before the POST: the other direction.
    r.deliveries.clear();
    r.delivery(at(200), created_event(0, "conn_1", 30 - hours));
    let found = clock::judge(&r).found;
    assert!(found.iter().any(|f| f.to_string().contains("before the POST")), "{found:?}");
}

#[test]
fn accounts_listed_after_only_connect_were_created_by_connected() {
    let mut r = a_run();
    r.calls.push(call("connect", "conn_1", 300));
    // Connected at 400; the account's createdAt (500) is within the slack.
    r.delivery(at(450), connected_event(5, "conn_1", 400));
    assert_eq!(failures(&r), [0, 0, 0, 0]);
    // Read 3 s later, stamped at the read: created after "accounts available".
    let late = json!([{"id": "acc_1", "connectionId": "conn_1", "name": "Mine", "type": "checking",
        "currency": "EUR", "balance": 10.5, "createdAt": stamp(3400)}]);
    let mut stamped = r;
    stamped.answers.retain(|a| a.request != "GET /v1/connections/conn_1/accounts");
    add(&mut stamped, "GET", "v1/connections/conn_1/accounts", Credential::Key(Client::First), 200, 3400, late);
    let found = clock::judge(&stamped).found;
    assert!(found.iter().any(|f| f.to_string().contains("after the connection.connected")), "{found:?}");
    // After another action (a sync may add accounts), the same read is open.
    stamped.calls.push(call("update_accounts", "conn_1", 1000));
    assert!(clock::judge(&stamped).found.is_empty());
    // A server whose event times contradict its chain anywhere (a connected stamped before the
    // verifying it follows, on another connection) says by them no moment any connection became
    // CONNECTED: not weighed, and said.
    stamped.calls.pop();
    let contradicted = &mut stamped;
    let mut verifying = created_event(20, "conn_2", 900);
    verifying.body["type"] = json!("connection.verifying");
    verifying.body["data"]["type"] = json!("connection.verifying");
    verifying.body["data"]["previousStatus"] = json!("credentials_submitted");
    contradicted.delivery(at(950), Delivery::new(20, verifying.body));
    contradicted.delivery(at(960), connected_event(21, "conn_2", 800));
    let v = clock::judge(contradicted);
    assert!(v.found.is_empty(), "{:?}", v.found);
    assert!(v.unweighed.iter().any(|w| w.contains("contradict its own chain on 1 connection ")), "{:?}", v.unweighed);
}

/// An event stamped to the whole second may read up to 1 s early: an account created 1.8 s
/// after it is open, 2.5 s is not.
#[test]
fn a_whole_second_connected_widens_the_slack_by_a_second() {
    let read = |ms: i64| {
        let mut r = a_run();
        r.calls.push(call("connect", "conn_1", 300));
        r.delivery(at(1050), connected_event(5, "conn_1", 1000));
        let listed = json!([{"id": "acc_1", "connectionId": "conn_1", "name": "Mine", "type": "checking",
            "currency": "EUR", "balance": 10.5, "createdAt": stamp(ms)}]);
        r.answers.retain(|a| a.request != "GET /v1/connections/conn_1/accounts");
        add(&mut r, "GET", "v1/connections/conn_1/accounts", Credential::Key(Client::First), 200, 4000, listed);
        clock::judge(&r).found
    };
    assert!(read(2800).is_empty(), "{:?}", read(2800));
    assert!(!read(3500).is_empty());
}

/// The refused creations weighed are those an effect could be told apart from the run's own
/// creations, and an unmatched one only once a later creation's event arrived (issue 51): which
/// refusals ran next to a creation, or were made last, does not decide the verdict.
#[test]
fn cause_weighs_clear_settled_refusals_only() {
    let mut r = a_run();
    let first = Credential::Key(Client::First);
    // Three refusals apart from any creation, each followed by an orphan connection.
    for (i, ms) in [(1u64, 8000), (2, 9000), (3, 10_000)] {
        add(&mut r, "POST", "v1/connections", Credential::Missing, 401, ms, json!(null));
        r.delivery(at(ms + 300), created_event(i, &format!("conn_x{i}"), ms + 20));
    }
    // Four refusals during creations of the run, their effects lost among them: not weighed.
    for (i, ms) in [(4u64, 12_000), (5, 13_000), (6, 14_000), (7, 15_000)] {
        let created = json!({"connectionId": format!("conn_own{i}"), "status": "CREATED"});
        add(&mut r, "POST", "v1/connections", first.clone(), 201, ms, created);
        r.delivery(at(ms + 100), created_event(10 + i, &format!("conn_own{i}"), ms + 20));
        add(&mut r, "POST", "v1/connections", Credential::Missing, 401, ms + 10, json!(null));
    }
    // Four refusals at the run's end, whose effects had no time to arrive: not weighed either.
    for ms in [20_000, 20_100, 20_200, 20_300] {
        add(&mut r, "POST", "v1/connections", Credential::Missing, 401, ms, json!(null));
    }
    let Verdict { judged, found, .. } = cause::judge(&r);
    assert_eq!((judged, found.len()), (11, 1), "{found:?}");
    assert!(found[0].to_string().contains("in 3 of the 3"), "{}", found[0]);
    // Settled by a later creation whose event arrived, the four unmatched ones now weigh.
    add(&mut r, "POST", "v1/connections", first, 201, 22_000, json!({"connectionId": "conn_late"}));
    r.delivery(at(22_100), created_event(30, "conn_late", 22_020));
    assert_eq!(cause::judge(&r).found.len(), 0, "3 of 7 weighed refusals followed: no finding");
}

/// A refusal weighed by nothing is not a silent pass (issue 51): refusals made only beside the
/// run's own creations, or with no creation after them, leave the experiment unweighed, and
/// the verdict says why.
#[test]
fn cause_says_when_it_weighed_nothing() {
    let mut r = a_run();
    let first = Credential::Key(Client::First);
    let created = json!({"connectionId": "conn_own", "status": "CREATED"});
    add(&mut r, "POST", "v1/connections", first, 201, 12_000, created);
    r.delivery(at(12_100), created_event(10, "conn_own", 12_020));
    add(&mut r, "POST", "v1/connections", Credential::Missing, 401, 12_010, json!(null));
    let v = cause::judge(&r);
    assert_eq!((v.judged, v.found.len()), (1, 0));
    assert!(v.unweighed.iter().any(|w| w.contains("none was clear")), "{:?}", v.unweighed);
    // Clear, but made last: nothing showed that its effect had the time to arrive.
    add(&mut r, "POST", "v1/connections", Credential::Missing, 401, 20_000, json!(null));
    let v = cause::judge(&r);
    assert!(v.unweighed.iter().any(|w| w.contains("had the time to arrive")), "{:?}", v.unweighed);
    // Settled by a later creation: weighed, and nothing to say.
    settle_at_22_s(&mut r);
    assert!(cause::judge(&r).unweighed.is_empty());
}

/// A creation of the run at 22 s whose event arrives: every refusal before it is settled.
fn settle_at_22_s(r: &mut Record) {
    let created = json!({"connectionId": "conn_late"});
    add(r, "POST", "v1/connections", Credential::Key(Client::First), 201, 22_000, created);
    r.delivery(at(22_100), created_event(30, "conn_late", 22_020));
}

/// Each kind of credential is an experiment of its own: refusals of one kind followed one for
/// one fail, though those of the other kinds, more of them, had no effect (a widget token taken
/// for its client's key, `tests/foreign/python-identity`'s `sess-token-create-leak`).
#[test]
fn cause_judges_each_kind_of_credential_on_its_own() {
    let mut r = a_run();
    let token = "Bearer sess_of_conn_1".to_string();
    r.answers
        .iter_mut()
        .filter(|a| a.created.is_some())
        .for_each(|a| a.created = Some(("conn_1".into(), Some("sess_of_conn_1".into()))));
    for (i, ms) in [(1u64, 8000), (2, 11_000)] {
        add(&mut r, "POST", "v1/connections", Credential::Header(token.clone()), 401, ms, json!(null));
        r.delivery(at(ms + 300), created_event(i, &format!("conn_x{i}"), ms + 20));
    }
    for ms in [14_000, 15_000, 16_000, 17_000, 18_000] {
        add(&mut r, "POST", "v1/connections", Credential::Missing, 401, ms, json!(null));
    }
    settle_at_22_s(&mut r);
    let found = cause::judge(&r).found;
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].to_string().contains("with a widget token were"), "{}", found[0]);
    assert!(!found[0].to_string().contains("sess_of"), "a token is never printed: {}", found[0]);
}

#[test]
fn accounts_served_before_their_connection_connected_fail_and_only_they() {
    let mut r = a_run();
    // conn_1 was read (200) at 1000 ms; its connection.connected occurred later.
    r.delivery(at(3000), connected_event(5, "conn_1", 2000));
    let Verdict { judged, found, .. } = available::judge(&r);
    assert_eq!((judged, found.len()), (2, 1), "{found:?}");
    assert!(found[0].to_string().contains("before its first connection.connected"), "{found:?}");
    // Within the slack (a state stored a moment before its event is stamped): not judged a fault.
    let mut r = a_run();
    r.delivery(at(1300), connected_event(5, "conn_1", 1050 + available::SLACK.num_milliseconds()));
    assert_eq!(available::judge(&r).found.len(), 0);
    // An event that left CONNECTED before: an earlier connected period was not seen.
    let mut r = a_run();
    let mut left = connected_event(6, "conn_1", 1500);
    left.body["type"] = json!("connection.error");
    left.body["data"]["type"] = json!("connection.error");
    left.body["data"]["previousStatus"] = json!("connected");
    r.delivery(at(1600), Delivery::new(6, left.body));
    r.delivery(at(3000), connected_event(5, "conn_1", 2000));
    assert_eq!(available::judge(&r).found.len(), 0);
}

/// An event of `state` on `connection`, occurred at `ms`.
fn state_event(seq: u64, connection: &str, state: &str, previous: &str, ms: i64) -> Delivery {
    let mut event = connected_event(seq, connection, ms);
    event.body["type"] = json!(format!("connection.{state}"));
    event.body["data"]["type"] = json!(format!("connection.{state}"));
    event.body["data"]["previousStatus"] = json!(previous);
    Delivery::new(seq, event.body)
}

/// conn_1 connected (at 900), then `disconnect` driven at 4000 and announced at 4200 (arrived
/// 4300); its accounts read with a 2xx at `read`.
fn disconnected_then_read(read: i64) -> Record {
    let mut r = a_run();
    r.delivery(at(950), connected_event(5, "conn_1", 900));
    r.calls.push(call("connect", "conn_1", 300));
    r.calls.push(call("disconnect", "conn_1", 4000));
    r.delivery(at(4300), state_event(6, "conn_1", "disconnected", "connected", 4200));
    add(&mut r, "GET", "v1/connections/conn_1/accounts", Credential::Key(Client::First), 200, read, json!([]));
    r
}

#[test]
fn accounts_served_after_an_announced_disconnect_fail_by_local_order() {
    let Verdict { found, .. } = available::judge(&disconnected_then_read(4500));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].to_string().contains("after connection.disconnected arrived"), "{}", found[0]);
    // Sent before the event arrived: the state may not have been stored yet.
    assert_eq!(available::judge(&disconnected_then_read(4250)).found.len(), 0);
    // A later event before the next action (the target moved on, here back to CONNECTED).
    let mut r = disconnected_then_read(4500);
    r.delivery(at(4700), state_event(7, "conn_1", "connected", "disconnected", 4600));
    assert_eq!(available::judge(&r).found.len(), 0);
    // ... but an event of the next action does not excuse the read before it.
    let mut r = disconnected_then_read(4500);
    r.calls.push(call("connect", "conn_1", 5000));
    r.delivery(at(5300), state_event(7, "conn_1", "connected", "disconnected", 5200));
    assert_eq!(available::judge(&r).found.len(), 1);
    // An older announcement of the state, heard again after the action began: not its own.
    let mut r = disconnected_then_read(4500);
    r.delivery(at(3000), state_event(6, "conn_1", "disconnected", "connected", 4200));
    assert_eq!(available::judge(&r).found.len(), 0);
    // An action the target did not do, or a read by the other client: not judged here.
    let mut r = disconnected_then_read(4500);
    r.calls.last_mut().expect("a call").done = false;
    assert_eq!(available::judge(&r).found.len(), 0);
}

#[test]
fn accounts_refused_after_connected_arrived_fail_the_announcement() {
    let refused_at = |ms: i64, status: u16| {
        let mut r = a_run();
        r.calls.push(call("connect", "conn_1", 300));
        r.delivery(at(950), connected_event(5, "conn_1", 900));
        add(&mut r, "GET", "v1/connections/conn_1/accounts", Credential::Key(Client::First), status, ms, json!({}));
        settled::judge_connected(&r).found
    };
    let found = refused_at(1200, 409);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].to_string().contains("refused (status 409) 250 ms after connection.connected"), "{}", found[0]);
    // Sent before it arrived, or a rate limit (never evidence): not judged.
    assert_eq!(refused_at(940, 409).len(), 0);
    assert_eq!(refused_at(1200, 429).len(), 0);
    // And the served list of a connection its last action left CONNECTED is no finding here.
    assert_eq!(settled::judge_connected(&disconnected_then_read(4500)).found.len(), 0);
}

#[test]
fn accounts_of_a_client_whose_events_are_misnamed_are_not_timed() {
    // conn_1 announced created twice (another connection's events named it): its moment of
    // CONNECTED cannot be told, so its early read is not judged a fault.
    let mut r = a_run();
    r.delivery(at(2500), created_event(4, "conn_1", 2400));
    r.delivery(at(3000), connected_event(5, "conn_1", 2000));
    let Verdict { judged, found, .. } = available::judge(&r);
    assert_eq!((judged, found.len()), (2, 0), "{found:?}");
    // A copy of its one announcement is no second one.
    let mut r = a_run();
    r.delivery(at(2500), created_event(0, "conn_1", 30));
    r.delivery(at(3000), connected_event(5, "conn_1", 2000));
    assert_eq!(available::judge(&r).found.len(), 1);
}

#[test]
fn the_cause_experiment_keeps_as_far_apart_as_the_offset_is_uncertain() {
    assert_eq!(cause::reach_so_far(&Record::default()), None, "no creation announced: no bound");
    // Sent at 0, announced as occurred at 30, arrived at 200: the offset is within 200 ms.
    // Widened by the stamp's unit (1 ms) on either side.
    assert_eq!(cause::reach_so_far(&a_run()), Some(chrono::Duration::milliseconds(202)));
    // A creation whose bounds do not meet the first's (instances whose clocks differ): the loose
    // bounds the judgment then takes may widen with more creations, so none is given.
    let mut r = a_run();
    let created = json!({"connectionId": "conn_9", "status": "CREATED", "widgetToken": "sess_9"});
    add(&mut r, "POST", "v1/connections", Credential::Key(Client::First), 201, 1000, created);
    r.delivery(at(1010), created_event(9, "conn_9", 5000));
    assert_eq!(cause::reach_so_far(&r), None);
}

/// A stamp cut to the millisecond reads up to 1 ms before the request that caused it: two fast
/// creations on one clock then bound the offset in intervals that miss each other, unless each
/// is widened by the unit (issue 51: the cause experiment took the wide bound in some runs
/// only, and judged nothing in them).
#[test]
fn stamps_cut_to_the_millisecond_still_bound_one_clock() {
    let mut r = Record::default();
    let micros = |us: i64| at(0) + chrono::Duration::microseconds(us);
    // (sent, the true moment, arrived) in µs; each stamp is the true moment cut to the ms.
    for (i, (sent, true_at, arrived)) in [(10_600, 10_800, 11_000), (20_100, 20_300, 20_400)].into_iter().enumerate() {
        let (connection, request, segments) = (format!("conn_{i}"), "POST /v1/connections", segments("v1/connections"));
        let body = json!({"connectionId": connection, "status": "CREATED"});
        r.answer(Exchange {
            seq: i as u64,
            request,
            method: "POST",
            segments: &segments,
            credential: Credential::Key(Client::First),
            status: 201,
            sent: micros(sent),
            answered: micros(sent + 50),
            body: Some(&body),
        });
        r.delivery(micros(arrived), created_event(i as u64, &connection, true_at / 1000));
    }
    let reach = cause::reach_so_far(&r).expect("one consistent clock: the bounds meet");
    assert!(reach < chrono::Duration::milliseconds(3), "{reach:?}");
}

fn updated_event(seq: u64, account: &str, ms: i64) -> Delivery {
    Delivery::new(
        seq,
        json!({"id": format!("evt_{seq}"), "type": "accounts.updated", "created_at": stamp(ms),
               "data": {"eventId": format!("evt_{seq}"), "type": "accounts.updated", "occurredAt": stamp(ms),
                        "clientId": "cli_1", "connectionId": "conn_1", "accountId": account}}),
    )
}

/// Refused reads (§5) each followed, inside its window, by a sync of the account they named
/// fail; a background of syncs the client did not start (§1) and the sync a driver call asked
/// for, however late, do not.
#[test]
fn cause_judges_refused_reads_by_what_followed_each() {
    let mut r = a_run();
    r.calls.push(Call { action: "connect", connection: Some("conn_1".into()), started: at(-100), done: true });
    // The sync of connecting (explained by the driver's call) and one every 5 s from 20 s on.
    r.delivery(at(900), updated_event(50, "acc_1", 880));
    for i in 0..8 {
        r.delivery(at(20_030 + i * 5000), updated_event(100 + i as u64, "acc_1", 20_000 + i * 5000));
    }
    // Refusals amid the background, one of them beside a sync: not followed one for one.
    for ms in [21_000, 24_990, 28_000] {
        add(&mut r, "GET", "v1/accounts/acc_1", Credential::Missing, 401, ms, json!(null));
    }
    assert_eq!(cause_read::judge(&r).found.len(), 0, "{:?}", cause_read::judge(&r).found);
    // Three refusals each followed by a sync of the account they read.
    for (i, ms) in [(1u64, 8000), (2, 10_000), (3, 12_000)] {
        add(&mut r, "GET", "v1/accounts/acc_1", Credential::Header("Bearer not a key".into()), 401, ms, json!(null));
        r.delivery(at(ms + 300), updated_event(60 + i, "acc_1", ms + 20));
    }
    let found = cause_read::judge(&r).found;
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].to_string().contains("refused reads") && found[0].to_string().contains("in 3 of the 3"),
        "{}",
        found[0]
    );
}

/// A refusal's body is an answer too (§5): the other client's account beside a 404 leaks as a
/// 2xx answer would; the id asked for alone, echoed in the refusal, does not.
#[test]
fn a_refusal_that_shows_the_other_clients_data_leaks() {
    let mut r = a_run();
    let first = Credential::Key(Client::First);
    let echo = json!({"error": {"code": "not_found", "message": "no account acc_2"}});
    add(&mut r, "GET", "v1/accounts/acc_2", first.clone(), 404, 4000, echo);
    assert_eq!(reach::judge(&r).found.len(), 0);
    let details = json!({"error": {"code": "not_found", "details": {"account": {"id": "acc_2", "name": "Theirs", "balance": 99.25}}}});
    add(&mut r, "GET", "v1/accounts/acc_2", first, 404, 4100, details);
    let found = reach::judge(&r).found;
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].to_string().contains("the refusal shows its account acc_2 with name, balance"), "{}", found[0]);
}

/// A process of the server's own that acts several times inside one slow refusal's window is
/// the background, not the refusals' effect: syncs every 400 ms after connecting, refused reads
/// of 1 s and 0.5 s on a busy machine, each window holding one sync or more (the sandbox's
/// `background-dedup` with late webhooks under two busy loops failed 3 runs of 3).
#[test]
fn a_burst_of_the_servers_own_inside_slow_refusals_is_background() {
    let mut r = a_run();
    r.calls.push(Call { action: "connect", connection: Some("conn_1".into()), started: at(0), done: true });
    for i in 0..6 {
        r.delivery(at(2600 + i * 400), updated_event(70 + i as u64, "acc_1", 1100 + i * 400));
    }
    for (ms, took) in [(1400, 1000), (2500, 500), (3100, 100)] {
        add(&mut r, "GET", "v1/accounts/acc_1", Credential::Missing, 401, ms, json!(null));
        r.answers.last_mut().expect("just added").answered = at(ms + took);
    }
    r.delivery(at(9000), updated_event(90, "acc_9", 8990));
    let found = cause_read::judge(&r).found;
    assert_eq!(found.len(), 0, "{found:?}");
}

/// Refused reads each followed, inside its window, by their connection leaving CONNECTED (a
/// re-verification, §6.2 `previousStatus: connected`) fail, as a third experiment; the
/// connection's return to CONNECTED is no second effect.
#[test]
fn cause_judges_refused_reads_by_the_connection_events_that_followed() {
    let mut r = a_run();
    let event = |seq: u64, kind: &str, previous: &str, ms: i64| {
        let data = json!({"eventId": format!("evt_{seq}"), "type": kind, "occurredAt": stamp(ms), "clientId": "cli_1",
                          "connectionId": "conn_1", "previousStatus": previous, "error": null});
        Delivery::new(seq, json!({"id": format!("evt_{seq}"), "type": kind, "created_at": stamp(ms), "data": data}))
    };
    add(&mut r, "GET", "v1/connections/conn_1/accounts", Credential::Key(Client::First), 200, 500, json!([]));
    for (i, ms) in [(1u64, 8000), (2, 10_000), (3, 12_000)] {
        add(&mut r, "GET", "v1/connections/conn_1/accounts", Credential::Missing, 401, ms, json!(null));
        r.delivery(at(ms + 300), event(60 + i, "connection.verifying", "connected", ms + 20));
        r.delivery(at(ms + 310), event(70 + i, "connection.connected", "verifying", ms + 25));
    }
    let found = cause_read::judge(&r).found;
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].to_string().contains("leaving CONNECTED") && found[0].to_string().contains("in 3 of the 3"));
}

#[test]
fn an_account_synced_over_an_hour_before_it_was_created_fails() {
    let listed = |synced: i64| {
        let mut r = Record::default();
        let account =
            json!({"id": "acc_1", "connectionId": "conn_1", "createdAt": stamp(0), "lastSyncedAt": stamp(synced)});
        add(&mut r, "GET", "v1/connections/conn_1/accounts", Credential::Key(Client::First), 200, 10, json!([account]));
        clock::judge(&r)
    };
    // No creation event: the order needs no clock offset.
    let v = listed(-2 * 3_600_000);
    assert_eq!((v.judged, v.found.len()), (1, 1), "{:?}", v.found);
    assert!(v.found[0].to_string().contains("not synced before it was created"), "{:?}", v.found);
    assert!(listed(-3_000_000).found.is_empty(), "within the hour a sync may last");
    assert!(listed(400 * 86_400_000).found.is_empty(), "synced long after: open");
}
