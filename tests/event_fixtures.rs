//! `check-events`'s rules over every capture in `tests/fixtures/events/`, judged in-process and
//! pinned with insta's `glob!`: one snapshot per fixture in `snapshots/event-fixtures/`, so a
//! new fixture is a new file and a change in a verdict shows in `cargo insta review`.

use bankconf::internal::check_events::{judge_capture, parse};
use serde_json::{json, Map, Value};

#[test]
fn every_capture_fixture_is_judged_as_pinned() {
    insta::glob!("fixtures/events/*", |path| {
        let text = std::fs::read_to_string(path).expect("read the fixture");
        let deliveries = parse(&text).expect("the fixture is a capture");
        let (results, notes) = judge_capture(&deliveries);
        let cases: Map<String, Value> = results
            .iter()
            .map(|r| {
                let said = match &r.outcome {
                    bankconf::Outcome::Failed(f) => {
                        json!({ "problems": f.problems.iter().map(|p| p.text()).collect::<Vec<_>>() })
                    }
                    other => json!({ "message": other.message() }),
                };
                let mut case = json!({ "outcome": r.outcome.label() });
                case.as_object_mut().expect("an object").extend(said.as_object().expect("an object").clone());
                (r.case.id.clone(), case)
            })
            .collect();
        insta::with_settings!({
            snapshot_path => "../snapshots/event-fixtures",
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            insta::assert_json_snapshot!(json!({ "notes": notes, "cases": cases }));
        });
    });
}
