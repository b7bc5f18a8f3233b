# CI's block runner (sourced by .ci/run; tests/test_ci_runner.py drives it on fake blocks).
#
#   run_block NAME COMMAND [ARGS...]   run one block: COMMAND (usually a shell function)
#                                      in a subshell under `set -euo pipefail`, so the
#                                      block stops at its own first failing command, but
#                                      the run goes on with the next block.
#   ci_summary                         print every block's name, PASS/FAIL and seconds;
#                                      returns 1 when any block failed, else 0.
#
# run_block works under the caller's `set -e` too (it suspends it around the block).

CI_BLOCK_NAMES=()
CI_BLOCK_RCS=()
CI_BLOCK_SECS=()

run_block() {
    local name=$1
    shift
    local t0=$SECONDS rc errexit=0
    echo "=== block: $name"
    # Not `( ... ) || rc=$?`: a subshell in a tested context ignores its own `set -e`.
    case $- in *e*) errexit=1; set +e ;; esac
    ( set -euo pipefail; "$@" )
    rc=$?
    [ "$errexit" -eq 0 ] || set -e
    CI_BLOCK_NAMES+=("$name")
    CI_BLOCK_RCS+=("$rc")
    CI_BLOCK_SECS+=("$((SECONDS - t0))")
    if [ "$rc" -eq 0 ]; then
        echo "=== block $name: PASS ($((SECONDS - t0)) s)"
    else
        echo "=== block $name: FAIL (exit $rc, $((SECONDS - t0)) s)"
    fi
    return 0
}

ci_summary() {
    local i failed=0 status
    echo "=== summary"
    printf '%-28s %-6s %8s\n' "block" "result" "seconds"
    for i in "${!CI_BLOCK_NAMES[@]}"; do
        if [ "${CI_BLOCK_RCS[$i]}" -eq 0 ]; then
            status=PASS
        else
            status=FAIL
            failed=$((failed + 1))
        fi
        printf '%-28s %-6s %8s\n' "${CI_BLOCK_NAMES[$i]}" "$status" "${CI_BLOCK_SECS[$i]}"
    done
    if [ "$failed" -ne 0 ]; then
        echo "=== $failed of ${#CI_BLOCK_NAMES[@]} blocks FAILED"
        return 1
    fi
    echo "=== all ${#CI_BLOCK_NAMES[@]} blocks passed"
    return 0
}
