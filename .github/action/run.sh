#!/usr/bin/env bash
# The run step of action.yml: each INPUT_* (set by the action from its inputs) becomes the
# BANKCONF_* variable of the `bankconf run` flag it mirrors (keys never reach a command line),
# the reports go to INPUT_REPORTS_DIR, and the Markdown summary to the job page. Writes the
# step's outputs `verdict` and `exit-code` to $GITHUB_OUTPUT (the action's outputs), and exits
# with bankconf's exit code (0 passed, 1 failed, 2 setup error, 3 incomplete: docs/running.md "Exit codes").
# Runnable locally: BANKCONF_BIN names the binary (default: bankconf on PATH).
set -uo pipefail

inputs=(BASE_URL API_KEY SECOND_API_KEY SERVICE DRIVER DRIVER_URL GATE EXPECT WEBHOOK_LISTEN
        WEBHOOK_PUBLIC_URL EVENT_TIMEOUT RATE_LIMIT BROWSER CA_CERT INSECURE HEADER)
for name in "${inputs[@]}"; do
    input="INPUT_$name"
    if [ -n "${!input:-}" ]; then
        export "BANKCONF_$name=${!input}"
    fi
done

dir=${INPUT_REPORTS_DIR:-bankconf-reports}
mkdir -p "$dir"
# A report left by an earlier run must not lend this one its verdict.
rm -f "$dir/bankconf-report.json"
read -r -a extra <<< "${INPUT_EXTRA_ARGS:-}"

"${BANKCONF_BIN:-bankconf}" run \
    --report-json "$dir/bankconf-report.json" \
    --report-junit "$dir/bankconf-junit.xml" \
    --report-md "$dir/bankconf-report.md" \
    --report-har "$dir/bankconf.har" \
    --report-html "$dir/bankconf-report.html" \
    "${extra[@]}"
code=$?

if [ -n "${GITHUB_STEP_SUMMARY:-}" ] && [ -f "$dir/bankconf-report.md" ]; then
    cat "$dir/bankconf-report.md" >> "$GITHUB_STEP_SUMMARY"
fi
# The verdict as the JSON report states it (its top-level key); none: the run did not start.
verdict=$(sed -n 's/^  "verdict": "\([A-Z ]*\)",\{0,1\}$/\1/p' "$dir/bankconf-report.json" 2>/dev/null | head -n 1)
if [ -n "${GITHUB_OUTPUT:-}" ]; then
    printf 'verdict=%s\nexit-code=%s\n' "${verdict:-NOT RUN}" "$code" >> "$GITHUB_OUTPUT"
fi
exit "$code"
