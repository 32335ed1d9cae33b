//! Generated perturbations (issue 49): edits of the sandbox's answers and events derived from
//! its own model, not written one by one. Every field the renderers give an object
//! ([`super::render`]: the connection created, an account, a transaction, a page, an event's
//! envelope and data, a refusal) meets every family of edits ([`Family`]); each edit names the
//! cell of the clause matrix (`cases/clauses.toml`) it tests, or says in one line why the
//! family does not apply. Whether a perturbation is a mutant (its cell is judged) or a legal
//! variant (its cell is ruled) is the matrix's to say: `crate::generated` decides, the sandbox
//! only generates and applies ([`super::perturb_apply`]).

use super::flavor::Flavor;
use super::model::{Connection, Event, EventDetail};
use super::render;
use super::seed;
use crate::spec::ConnectionState;
use chrono::{DateTime, NaiveDate, Utc};
use rand::SeedableRng;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::LazyLock;

/// Where an edit applies: an object in every view that carries it, or one answer's body.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Site {
    /// The answer to POST /v1/connections (§2.1).
    Creation,
    /// An account, in the accounts list and in GET /v1/accounts/{id} alike (§2.2).
    Account,
    /// The accounts list body (§4.2).
    AccountsList,
    /// The single account read body (§4.4).
    SingleAccount,
    /// A transaction, in every page (§2.3).
    Transaction,
    /// A transactions page body (§4.3).
    Page,
    /// An event's envelope (§6.1).
    Envelope,
    /// An event's data (§6.2).
    EventData,
    /// The answer to a refused request (§7).
    Refused,
    /// What an action does: its events (§6) and objects.
    Effect,
}

impl Site {
    pub fn name(self) -> &'static str {
        match self {
            Self::Creation => "creation",
            Self::Account => "account",
            Self::AccountsList => "accounts-list",
            Self::SingleAccount => "single-account",
            Self::Transaction => "transaction",
            Self::Page => "page",
            Self::Envelope => "envelope",
            Self::EventData => "data",
            Self::Refused => "refused",
            Self::Effect => "effect",
        }
    }
}

/// A family of edits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    ShiftSmallEarlier,
    ShiftSmallLater,
    ShiftLargeEarlier,
    ShiftLargeLater,
    SiblingId,
    OtherParentId,
    OtherClientId,
    SiblingValue,
    OneViewOnly,
    OneReadOnly,
    SecondClientOnly,
    MissingEvent,
    ExtraEvent,
    MissingObject,
    ExtraObject,
    RefusedEffect,
    WrapField,
    RenameField,
    RetypeField,
    WrapBody,
}

impl Family {
    pub const ALL: [Family; 20] = [
        Self::ShiftSmallEarlier,
        Self::ShiftSmallLater,
        Self::ShiftLargeEarlier,
        Self::ShiftLargeLater,
        Self::SiblingId,
        Self::OtherParentId,
        Self::OtherClientId,
        Self::SiblingValue,
        Self::OneViewOnly,
        Self::OneReadOnly,
        Self::SecondClientOnly,
        Self::MissingEvent,
        Self::ExtraEvent,
        Self::MissingObject,
        Self::ExtraObject,
        Self::RefusedEffect,
        Self::WrapField,
        Self::RenameField,
        Self::RetypeField,
        Self::WrapBody,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::ShiftSmallEarlier => "earlier-1s",
            Self::ShiftSmallLater => "later-1s",
            Self::ShiftLargeEarlier => "earlier-400d",
            Self::ShiftLargeLater => "later-400d",
            Self::SiblingId => "sibling-id",
            Self::OtherParentId => "other-parent-id",
            Self::OtherClientId => "other-client-id",
            Self::SiblingValue => "sibling-value",
            Self::OneViewOnly => "one-view-only",
            Self::OneReadOnly => "one-read-only",
            Self::SecondClientOnly => "second-client-only",
            Self::MissingEvent => "missing-event",
            Self::ExtraEvent => "extra-event",
            Self::MissingObject => "missing-object",
            Self::ExtraObject => "extra-object",
            Self::RefusedEffect => "refused-creates",
            Self::WrapField => "wrapped",
            Self::RenameField => "renamed",
            Self::RetypeField => "retyped",
            Self::WrapBody => "wrapped-body",
        }
    }

    /// The part of its cell the edit falls in (`cases/clauses.toml` keys `view/part`, where a
    /// cell is split by the direction, size or kind of a difference): its name.
    pub fn part(self) -> Option<&'static str> {
        Some(self.name())
    }

    /// The view of the matrix that sees this family's edit.
    fn view(self, site: Site, role: Role) -> &'static str {
        match self {
            Self::ShiftSmallEarlier | Self::ShiftSmallLater | Self::ShiftLargeEarlier | Self::ShiftLargeLater => {
                "fields-clock"
            }
            Self::SiblingValue => "fields-clock",
            Self::SiblingId | Self::WrapField | Self::RenameField | Self::RetypeField | Self::WrapBody => {
                if site == Site::Refused {
                    "refused"
                } else {
                    "one-answer"
                }
            }
            Self::OtherParentId => match (site, role) {
                (Site::EventData, _) => "reads-events",
                (_, Role::SelfId) => "over-time",
                _ => "one-answer",
            },
            Self::OtherClientId | Self::SecondClientOnly => "other-client",
            Self::OneViewOnly | Self::MissingObject | Self::ExtraObject => "two-answers",
            Self::OneReadOnly => "over-time",
            Self::MissingEvent | Self::ExtraEvent => "events-action",
            Self::RefusedEffect => "refused",
        }
    }

    /// Whether which objects it hits depends on the seeded data (the full matrix then runs it
    /// under five seeds).
    fn seeded(self, site: Site) -> bool {
        site == Site::Transaction || matches!(self, Self::SiblingValue | Self::SiblingId | Self::OneReadOnly)
    }
}

/// What a field is, read from its sample value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
    /// The object's own id (`id`, `eventId`).
    SelfId,
    /// The id of another object: its parent, its client (`connectionId`, `accountId`, ...).
    Ref,
    /// An ISO 8601 date-time.
    Time,
    /// A date (`YYYY-MM-DD`).
    Date,
    /// Anything else.
    Value,
}

/// One generated perturbation: a family of edits on one field of one site.
#[derive(Clone, Debug)]
pub struct Perturbation {
    /// `site.field:family`, e.g. `account.balance:retyped`.
    pub name: String,
    pub site: Site,
    /// The field (top level of the object; empty for a whole body; an event type for effects).
    pub field: String,
    pub family: Family,
    /// The clause of `cases/clauses.toml` whose cell it tests, and the view.
    pub clause: String,
    pub view: &'static str,
    /// Its outcome can depend on the seed.
    pub seeded: bool,
    pub(super) role: Role,
    /// Other legal values of the field, from the model's siblings (for the value families).
    pub(super) pool: Vec<Value>,
}

/// A family that does not apply to a field, and why.
#[derive(Clone, Debug)]
pub struct NotApplicable {
    pub site: Site,
    pub field: String,
    pub family: Family,
    pub why: &'static str,
}

/// Everything the generator produced.
#[derive(Debug)]
pub struct Generated {
    pub perturbations: Vec<Perturbation>,
    pub not_applicable: Vec<NotApplicable>,
}

static GENERATED: LazyLock<Generated> = LazyLock::new(build);

/// The generated perturbations, in a stable order.
pub fn generated() -> &'static Generated {
    &GENERATED
}

/// The perturbation called `name`.
pub(super) fn find(name: &str) -> Option<&'static Perturbation> {
    GENERATED.perturbations.iter().find(|p| p.name == name)
}

/// The clause an object's field belongs to (for a renamed field, the clause of its presence).
fn clause(site: Site, field: &str, family: Family) -> String {
    match (site, field) {
        // A transaction without its `id` cannot be named by a cursor (§4.3) nor by
        // transaction.deleted (§6.2): judged as the id.
        (Site::Transaction, "id") if family == Family::RenameField => "2.3.id".into(),
        // Any other renamed field is absent: which transaction fields are required is not shown (§2.3).
        (Site::Transaction, _) if family == Family::RenameField => "2.3.required-open".into(),
        (Site::Creation, "") => "4.1.create".into(),
        (Site::AccountsList, _) => "2.2.array".into(),
        (Site::SingleAccount, _) => "4.4.shape-open".into(),
        (Site::Page, "" | "data") => "4.3.data".into(),
        (Site::Page, "has_more") => "4.3.has-more".into(),
        (Site::Page, _) => "4.3.next-cursor".into(),
        (Site::Envelope, "") => "6.1.id".into(),
        (Site::Refused, _) => "7.errors-open".into(),
        (Site::Creation, f) => format!("2.1.{f}"),
        (Site::Account, f) => format!("2.2.{f}"),
        (Site::Transaction, f) => format!("2.3.{f}"),
        (Site::Envelope, f) => format!("6.1.{f}"),
        (Site::EventData, f) => format!("6.2.{f}"),
        (Site::Effect, f) => effect_clause(f),
    }
}

/// The clause of an action's effect: an event type's state, or the objects of a list.
fn effect_clause(what: &str) -> String {
    match what {
        crate::spec::ACCOUNTS_UPDATED => "6.type-accounts-updated".into(),
        crate::spec::TRANSACTION_DELETED => "6.type-transaction-deleted".into(),
        "accounts" => "4.2.all-accounts".into(),
        "transactions" => "4.3.data".into(),
        "creation" => "4.1.create".into(),
        event => format!("3.1.state-{}", event.trim_start_matches("connection.").replace('_', "-")),
    }
}

/// What a field is, from its key and sample value.
fn role(key: &str, value: &Value) -> Role {
    let text = value.as_str().unwrap_or_default();
    if key == "id" || key == "eventId" {
        Role::SelfId
    } else if key.ends_with("Id") && value.is_string() {
        Role::Ref
    } else if DateTime::parse_from_rfc3339(text).is_ok() {
        Role::Time
    } else if NaiveDate::parse_from_str(text, "%Y-%m-%d").is_ok() {
        Role::Date
    } else {
        Role::Value
    }
}

/// The required fields of an account (§2.2, marked *).
const ACCOUNT_REQUIRED: [&str; 9] =
    ["id", "connectionId", "name", "type", "currency", "balance", "availableBalance", "accountNumber", "createdAt"];

/// Why `family` does not apply to `field` of `site` (of role `role`, whose siblings show
/// `pool`), if it does not.
fn not_applicable(
    site: Site,
    field: &str,
    role: Role,
    family: Family,
    sample: &Value,
    pool: &[Value],
) -> Option<&'static str> {
    use Family as F;
    use Site as S;
    let body = matches!(site, S::AccountsList | S::SingleAccount) || field.is_empty();
    if site == S::Effect {
        return match family {
            F::MissingEvent if field.contains('.') => None,
            F::ExtraEvent if field.contains('.') => {
                Some("a copy under a new id is a retry that re-stamps (variant retry-new-id): §6.3 leaves retries open")
            }
            F::MissingObject | F::ExtraObject if !field.contains('.') && field != "creation" => None,
            F::RefusedEffect if field == "creation" => None,
            _ => Some("an effect is an event or an object: field edits apply to the objects' own sites"),
        };
    }
    if matches!(family, F::MissingEvent | F::ExtraEvent | F::MissingObject | F::ExtraObject | F::RefusedEffect) {
        return Some("an effect of an action, generated at the effect site");
    }
    if body != (family == F::WrapBody) {
        return Some(if body {
            "a whole body is wrapped, its fields are edited at the object's site"
        } else {
            "applies to whole bodies"
        });
    }
    let shift = matches!(family, F::ShiftSmallEarlier | F::ShiftSmallLater | F::ShiftLargeEarlier | F::ShiftLargeLater);
    match family {
        _ if shift && !matches!(role, Role::Time | Role::Date) => Some("not a timestamp"),
        F::SiblingId if role != Role::SelfId => Some("not the object's own id"),
        F::SiblingId if !matches!(site, S::Account | S::Transaction) => {
            Some("one object per answer: an event sharing another's id is a redelivery (§6.3 leaves copies open)")
        }
        F::OtherParentId if !matches!(role, Role::SelfId | Role::Ref) => Some("not an id"),
        F::OtherParentId if field == "clientId" || site == S::Creation || site == S::Envelope => {
            Some("its object has no parent of the same client to borrow from")
        }
        F::OtherParentId if site == S::EventData && role == Role::SelfId => Some("an event has no parent object"),
        F::OtherClientId if !matches!(role, Role::SelfId | Role::Ref) => Some("not an id"),
        F::OtherClientId if site == S::Envelope || (site == S::EventData && role == Role::SelfId) => {
            Some("event ids are not judged across clients (§2 leaves uniqueness across clients open)")
        }
        F::SiblingValue | F::OneViewOnly | F::OneReadOnly | F::SecondClientOnly
            if matches!(role, Role::SelfId | Role::Ref) =>
        {
            Some("an id: the id families edit it")
        }
        F::SiblingValue if !matches!(site, S::Account | S::Transaction) => Some("one object per answer: no sibling"),
        F::SiblingValue | F::OneViewOnly | F::OneReadOnly | F::SecondClientOnly if pool.iter().all(|v| v == sample) => {
            Some("every sibling in the model shows the same value: no other legal value to give it")
        }
        F::OneViewOnly if site != S::Account => Some("one view carries it (the single read is the account's second view)"),
        F::OneReadOnly if !matches!(site, S::Account | S::Transaction) => Some("an event is read once (copies are one delivery)"),
        F::SecondClientOnly if !matches!(site, S::Account | S::Transaction | S::EventData) => {
            Some("its values are the same kind for each client: nothing to change per client")
        }
        F::RenameField if site == S::Account && !ACCOUNT_REQUIRED.contains(&field) => {
            Some("optional (§2.2, unmarked): renamed is absent plus an extra field, which the minimal-fields and extra-fields variants cover")
        }
        F::RenameField if site == S::Page && field == "next_cursor" => Some("optional (§4.3): absent is legal"),
        F::RetypeField | F::WrapField if sample.is_null() => {
            Some("null in the model: its shape when set is not shown (§6.2 error), so any other is legal")
        }
        _ => None,
    }
}

/// A sample of every object the renderers make, from the sandbox's own model: a seeded
/// connection's accounts and transactions, one event of each detail, a page, a creation, a refusal.
fn samples() -> Vec<(Site, Vec<Value>)> {
    let f = Flavor::default();
    let now = Utc::now();
    let mut conn = Connection {
        id: "conn_SAMPLE".into(),
        client_id: "cli_SAMPLE".into(),
        status: ConnectionState::Connected,
        widget_token: "sess_SAMPLE".into(),
        account_ids: Vec::new(),
        institution: seed::INSTITUTIONS[0].clone(),
        rng: rand::rngs::StdRng::seed_from_u64(1),
        stored_from: None,
    };
    let accounts = seed::accounts(&mut conn, now, f);
    let txns: Vec<&super::model::Transaction> = accounts.iter().flat_map(|a| a.transactions.iter()).collect();
    let event = |kind, detail| Event {
        id: "evt_SAMPLE".into(),
        kind,
        at: now,
        client_id: conn.client_id.clone(),
        connection_id: conn.id.clone(),
        detail,
    };
    let events = [
        event("connection.created", EventDetail::Connection { previous: None, error: None }),
        event(
            "connection.connected",
            EventDetail::Connection { previous: Some(ConnectionState::Verifying), error: None },
        ),
        event(crate::spec::ACCOUNTS_UPDATED, EventDetail::AccountsUpdated { account_id: "acc_SAMPLE".into() }),
        event(
            crate::spec::TRANSACTION_DELETED,
            EventDetail::TransactionDeleted { account_id: "acc_SAMPLE".into(), transaction_id: "txn_SAMPLE".into() },
        ),
    ];
    let envelopes: Vec<Value> = events.iter().map(|e| render::event(f, e)).collect();
    vec![
        (Site::Creation, vec![render::connection_created(f, &conn.id, ConnectionState::Created, &conn.widget_token)]),
        (Site::Account, accounts.iter().map(|a| render::account(f, a)).collect()),
        (Site::Transaction, txns.iter().map(|t| render::transaction(f, t)).collect()),
        (Site::Page, vec![render::page(f, &txns[..2], true, Some(&txns[1].id))]),
        (Site::Envelope, envelopes.clone()),
        (Site::EventData, envelopes.iter().map(|e| e["data"].clone()).collect()),
        (Site::Refused, vec![render::error("not_found", "no such resource")]),
    ]
}

/// Every field of each sample, with its first value and every value the siblings show.
fn fields(objects: &[Value]) -> BTreeMap<String, (Value, Vec<Value>)> {
    let mut out: BTreeMap<String, (Value, Vec<Value>)> = BTreeMap::new();
    for object in objects {
        for (key, value) in object.as_object().into_iter().flatten() {
            let entry = out.entry(key.clone()).or_insert_with(|| (value.clone(), Vec::new()));
            if !entry.1.contains(value) {
                entry.1.push(value.clone());
            }
        }
    }
    out
}

fn build() -> Generated {
    let mut targets: Vec<(Site, String, Role, Value, Vec<Value>)> = Vec::new();
    for (site, objects) in samples() {
        for (field, (sample, pool)) in fields(&objects) {
            targets.push((site, field.clone(), role(&field, &sample), sample, pool));
        }
    }
    for body in [Site::Creation, Site::AccountsList, Site::SingleAccount, Site::Page, Site::Envelope, Site::Refused] {
        targets.push((body, String::new(), Role::Value, Value::Null, Vec::new()));
    }
    let effects = ConnectionState::ALL.iter().map(|s| format!("connection.{}", s.lower())).chain(
        [crate::spec::ACCOUNTS_UPDATED, crate::spec::TRANSACTION_DELETED, "accounts", "transactions", "creation"]
            .map(String::from),
    );
    for what in effects {
        targets.push((Site::Effect, what, Role::Value, Value::Null, Vec::new()));
    }
    let mut generated = Generated { perturbations: Vec::new(), not_applicable: Vec::new() };
    for (site, field, role, sample, pool) in targets {
        for family in Family::ALL {
            if let Some(why) = not_applicable(site, &field, role, family, &sample, &pool) {
                // Only the reasons a reader learns from: every field is no effect, and so on.
                if !matches!(why, "an effect of an action, generated at the effect site" | "applies to whole bodies")
                    && !why.starts_with("a whole body is wrapped")
                    && !why.starts_with("an effect is an event")
                {
                    generated.not_applicable.push(NotApplicable { site, field: field.clone(), family, why });
                }
                continue;
            }
            let at = if field.is_empty() { site.name().to_string() } else { format!("{}.{field}", site.name()) };
            generated.perturbations.push(Perturbation {
                name: format!("{at}:{}", family.name()),
                site,
                field: field.clone(),
                family,
                clause: clause(site, &field, family),
                view: family.view(site, role),
                seeded: family.seeded(site),
                role,
                pool: pool.iter().filter(|v| **v != sample).cloned().collect(),
            });
        }
    }
    generated
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_of_the_model_meets_every_family() {
        let g = generated();
        let names: std::collections::HashSet<&str> = g.perturbations.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names.len(), g.perturbations.len(), "names are unique");
        for name in ["account.balance:retyped", "transaction.createdAt:earlier-400d", "data.occurredAt:earlier-1s"] {
            assert!(names.contains(name), "{name} is generated");
        }
        assert!(g.perturbations.len() > 150, "{}", g.perturbations.len());
        assert!(g.not_applicable.iter().any(|n| n.field == "connectionId" && n.family == Family::SiblingValue));
    }
}
