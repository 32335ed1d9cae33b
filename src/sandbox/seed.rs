//! Realistic sandbox data, deterministic per connection (the connection's own seeded RNG).
//!
//! Every connection gets one account of each type of §2.2, with these transaction counts so
//! that clients meet every pagination case (§4.3, default page size 25):
//!
//! | Type          | Transactions | Extras                                            |
//! |---------------|--------------|---------------------------------------------------|
//! | `checking`    | 57 (many)    |                                                   |
//! | `savings`     | 25 (exactly one default page) |                                  |
//! | `credit_card` | 12           | `creditLimit`, `currencyBalances` (one secondary currency) |
//! | `brokerage`   | 1            | `positions`                                       |
//! | `pension`     | 0            | `positions`                                       |
//!
//! Debits are negative, credits positive (§2.3); dates lie in the past 60 days, several
//! transactions share a date (so the id tie-break of the list order matters).

use super::flavor::Flavor;
use super::model::{Account, Connection, Institution, Position, Transaction};
use crate::spec::prefix;
use chrono::{DateTime, Duration, NaiveDate, Utc};
use rand::rngs::StdRng;
use rand::Rng;
use std::collections::HashMap;

pub(crate) const INSTITUTIONS: [Institution; 3] = [
    Institution { id: "ins_sandbox_bank", name: "Sandbox Bank", currency: "EUR" },
    Institution { id: "ins_demo_savings", name: "Demo Savings & Loan", currency: "EUR" },
    Institution { id: "ins_example_credit_union", name: "Example Credit Union", currency: "USD" },
];

/// A transaction template: description, category label, amount range in cents (signed).
type Template = (&'static str, &'static str, i64, i64);

const CHECKING: &[Template] = &[
    ("Salary ACME GmbH", "income", 250_000, 420_000),
    ("REWE Markt", "groceries", -12_000, -1_500),
    ("Lidl", "groceries", -6_000, -800),
    ("Rent", "rent", -120_000, -80_000),
    ("City Transit monthly pass", "transport", -9_000, -4_900),
    ("Cafe Central", "dining", -3_500, -350),
    ("Stadtwerke electricity", "utilities", -11_000, -4_000),
    ("Online shop order", "shopping", -15_000, -999),
    ("Transfer from Jane Doe", "transfer", 1_000, 20_000),
    ("Cinema", "entertainment", -3_000, -900),
    ("Account fee", "fees", -990, -290),
    ("Refund online shop", "refund", 500, 8_000),
];

const SAVINGS: &[Template] = &[
    ("Standing order from checking", "transfer", 10_000, 50_000),
    ("Interest", "interest", 50, 2_500),
    ("Withdrawal to checking", "transfer", -40_000, -5_000),
];

const CREDIT_CARD: &[Template] = &[
    ("Airline tickets", "travel", -60_000, -9_000),
    ("Hotel booking", "travel", -45_000, -8_000),
    ("Restaurant", "dining", -9_000, -1_200),
    ("Electronics store", "shopping", -80_000, -2_000),
    ("Card payment received", "payment", 20_000, 100_000),
];

const BROKERAGE: &[Template] = &[("Buy VWRL", "investment", -250_000, -20_000), ("Dividend", "dividend", 500, 9_000)];

const PENSION: &[Template] = &[("Employer contribution", "pension_contribution", 10_000, 40_000)];

/// The templates used for new transactions of an account type (also by `update_accounts`).
pub(crate) fn templates(kind: &str) -> &'static [Template] {
    match kind {
        "checking" => CHECKING,
        "savings" => SAVINGS,
        "credit_card" => CREDIT_CARD,
        "brokerage" => BROKERAGE,
        _ => PENSION,
    }
}

/// A transaction from one of the account type's templates.
pub(crate) fn transaction(
    rng: &mut StdRng,
    account: &Account,
    date: NaiveDate,
    created_at: DateTime<Utc>,
    f: Flavor,
) -> Transaction {
    let list = templates(account.kind);
    let (description, category, lo, hi) = list[rng.random_range(0..list.len())];
    Transaction {
        id: f.new_id(prefix::TRANSACTION),
        account_id: account.id.clone(),
        amount_cents: rng.random_range(lo..=hi),
        currency: account.currency,
        description,
        category,
        date,
        created_at,
    }
}

fn last4(rng: &mut StdRng) -> String {
    format!("{:04}", rng.random_range(0..10_000))
}

/// The accounts of a connection that just reached CONNECTED for the first time.
pub(crate) fn accounts(conn: &mut Connection, now: DateTime<Utc>, f: Flavor) -> Vec<Account> {
    let inst = conn.institution.clone();
    let currency = inst.currency;
    let secondary = if currency == "USD" { "EUR" } else { "USD" };
    let rng = &mut conn.rng;
    let specs: [(&'static str, &'static str, usize); 5] = [
        ("checking", "Everyday Checking", 57),
        ("savings", "Rainy Day Savings", 25),
        ("credit_card", "Platinum Credit Card", 12),
        ("brokerage", "Investment Account", 1),
        ("pension", "Retirement Plan", 0),
    ];
    let mut out = Vec::with_capacity(specs.len());
    for (kind, name, count) in specs {
        // A legal big account (§8 sets no size): the harness walks it whole.
        let count = if kind == "checking" && f.has(super::faults::Variant::BigAccount) { 3_000 } else { count };
        let mut account = Account {
            id: f.new_id(prefix::ACCOUNT),
            connection_id: conn.id.clone(),
            client_id: conn.client_id.clone(),
            name,
            kind,
            currency,
            balance_cents: 0,
            available_cents: 0,
            first_balance_cents: (0, 0),
            number_last4: last4(rng),
            created_at: now,
            last_synced_at: now,
            updates: 0,
            institution: inst.clone(),
            credit_limit_cents: None,
            currency_balances: Vec::new(),
            positions: Vec::new(),
            transactions: Vec::new(),
            tombstones: HashMap::new(),
        };
        match kind {
            "checking" => {
                account.balance_cents = rng.random_range(50_000..800_000);
                // Some card payments still pending.
                account.available_cents = account.balance_cents - rng.random_range(0..20_000);
            }
            "savings" => {
                account.balance_cents = rng.random_range(500_000..5_000_000);
                account.available_cents = account.balance_cents;
            }
            "credit_card" => {
                let limit = 500_000;
                account.credit_limit_cents = Some(limit);
                account.balance_cents = -rng.random_range(1_000..150_000);
                account.available_cents = limit + account.balance_cents;
                account.currency_balances = vec![(secondary, -rng.random_range(100..20_000))];
            }
            _ => {
                let symbols: &[(&'static str, i64)] = if kind == "brokerage" {
                    &[("VWRL", 11_250), ("AAPL", 19_500), ("MSFT", 41_000)]
                } else {
                    &[("IWDA", 9_800), ("AGGH", 5_100)]
                };
                account.positions = symbols
                    .iter()
                    .map(|&(symbol, price)| {
                        let quantity = rng.random_range(1..200u32);
                        Position { symbol, quantity, value_cents: price * i64::from(quantity) }
                    })
                    .collect();
                account.balance_cents = account.positions.iter().map(|p| p.value_cents).sum();
                account.available_cents = account.balance_cents;
            }
        }
        account.first_balance_cents = (account.balance_cents, account.available_cents);
        let today = now.date_naive();
        for _ in 0..count {
            let date = today - Duration::days(rng.random_range(1..=60));
            let created_at =
                date.and_hms_opt(rng.random_range(6..23), rng.random_range(0..60), 0).expect("valid time").and_utc();
            let txn = transaction(rng, &account, date, created_at, f);
            account.insert_transaction(txn);
        }
        out.push(account);
    }
    out
}
