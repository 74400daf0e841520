#!/usr/bin/env bash
# Instructions per call of each bench case, counted by callgrind: repeatable where the times on
# this shared machine are not. Needs valgrind (`apt-get install valgrind`) and cargo.
#
#   scripts/instructions.sh                           # every case (about 15 s here)
#   scripts/instructions.sh breaker_direct recloser   # only these cases
#
# Builds benches/src/bin/instructions.rs in release, runs each case under
# `valgrind --tool=callgrind` twice, with N = 0 and N = 100000 calls (setup, and 1 000 warm-up
# calls, are the same in both), and prints (total(N) - total(0)) / N per case, for a case that
# guards a call the same less `bare`'s (the loop and the unguarded call), and the ratio to the
# case's peer (below 1.00: ours runs fewer instructions); for a case that extends another, the
# increment over it: the three-gate macro call, the five-aspect plans and the four-aspect sync
# macro call over the two-gate ones, and the five-aspect macro call over the three-gate one (what
# the retry and the time limiter add to the gates). A ratio needs the peer among the cases run, an increment the case it extends;
# "over bare" needs `bare`.
#
# What it counts: user-space instructions, nothing else: not the kernel's work in a syscall, nor
# cache misses, the latency of locked instructions or contention. An instruction count is not a
# time. Clock reads: natively `clock_gettime` is a vDSO read done in user space, whose
# instructions would count; valgrind does not give the program the vDSO, so under callgrind each
# read is a real syscall and counts only as glibc's wrapper (about 10 instructions). The open
# rejections read the clock once per call (ours and recloser's alike); the closed-path cases
# measured here read none. The rate limiter cases read a clock once per call: ours the coarse
# clock (`clock_gettime`, so only its wrapper counts), governor the TSC through quanta (`rdtsc`
# in user space: every instruction of it counts). `tokio_timeout` reads tokio's clock once per
# call (`clock_gettime`, only its wrapper counts); ours, retry and time limiter, read none for a
# call whose first attempt succeeds at its first poll.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v valgrind >/dev/null 2>&1; then
    echo "scripts/instructions.sh needs valgrind (callgrind), which is not installed:" >&2
    echo "  apt-get install valgrind   (or your system's package of it)" >&2
    exit 1
fi

# The cases in table order, each with its peer ("-": none), whether it guards a call (then
# "over bare" is printed: the case less `bare`, the loop and the unguarded call), and the case
# it extends ("-": none; then "increment" is printed: the case less that one, e.g. what a third
# gate adds to two).
cases=(
    bare - no -
    breaker_direct recloser no -
    recloser - no -
    breaker_plan recloser yes -
    breaker_macro_sync recloser yes -
    breaker_macro_async recloser yes -
    breaker_plan_traced recloser yes breaker_plan
    breaker_plan_subscribed recloser yes breaker_plan
    two_gates_plan semaphore_recloser yes -
    two_gates_plan_async semaphore_async_recloser yes -
    two_gates_macro_sync semaphore_recloser yes -
    two_gates_macro_async semaphore_async_recloser yes -
    three_gates_macro_async semaphore_async_recloser yes two_gates_macro_async
    five_aspects_macro_async - yes three_gates_macro_async
    five_aspects_plan_async - yes two_gates_plan_async
    five_aspects_plan_sync - yes two_gates_plan
    four_aspects_macro_sync - yes two_gates_macro_sync
    retry_plan_async - yes -
    retry_plan_sync - yes -
    time_limiter_plan_async tokio_timeout yes -
    tokio_timeout - yes -
    semaphore_recloser - yes -
    semaphore_async_recloser - yes -
    two_gates_layer limit_loadshed_layer yes -
    limit_loadshed_layer - yes -
    tokio_semaphore - no -
    bulkhead tokio_semaphore no -
    open_rejection_ours open_rejection_recloser no -
    open_rejection_plan open_rejection_recloser no -
    open_rejection_macro open_rejection_recloser no -
    open_rejection_recloser - no -
    rate_limiter_ours rate_limiter_governor no -
    rate_limiter_governor - no -
    rate_limiter_refusal_ours rate_limiter_refusal_governor no -
    rate_limiter_refusal_governor - no -
)
declare -A peer_of=() guards_call=() extends=()
order=()
for ((i = 0; i < ${#cases[@]}; i += 4)); do
    order+=("${cases[i]}")
    peer_of[${cases[i]}]=${cases[i + 1]}
    guards_call[${cases[i]}]=${cases[i + 2]}
    extends[${cases[i]}]=${cases[i + 3]}
done

selected=("${order[@]}")
if (($# > 0)); then
    for case in "$@"; do
        if [[ -z ${peer_of[$case]+x} ]]; then
            echo "unknown case '$case'; cases: ${order[*]}" >&2
            exit 2
        fi
    done
    # Table order, whatever the order of the arguments.
    selected=()
    for case in "${order[@]}"; do
        for arg in "$@"; do
            if [[ $arg == "$case" ]]; then
                selected+=("$case")
                break
            fi
        done
    done
fi

cargo build --quiet --release -p resilience-benches --features peers --bin instructions
target_dir=${CARGO_TARGET_DIR:-target}
bin="$target_dir/release/instructions"

n=100000
# N = 0 written with as many digits as N, so that both runs start from the same argument bytes.
zero=$(printf "%0${#n}d" 0)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The "Collected" total of one run of `instructions CASE CALLS` under callgrind.
collected() {
    local case=$1 calls=$2 total
    # Only what runs inside `run` (the warm-up and the counted calls) is collected: setup can
    # vary between the two runs (governor's quanta clock calibrates itself against the system
    # clock for as long as it takes, a different count of instructions every time).
    if ! valgrind --tool=callgrind --toggle-collect='instructions::run*' \
        --callgrind-out-file=/dev/null "$bin" "$case" "$calls" \
        >"$tmp/stdout" 2>"$tmp/stderr"; then
        echo "valgrind $bin $case $calls failed:" >&2
        cat "$tmp/stderr" >&2
        exit 1
    fi
    total=$(sed -n 's/^==[0-9]*== Collected : \([0-9]*\)$/\1/p' "$tmp/stderr")
    if [[ -z $total ]]; then
        echo "no 'Collected' total in valgrind's output for $case $calls:" >&2
        cat "$tmp/stderr" >&2
        exit 1
    fi
    echo "$total"
}

declare -A per_call=()
for case in "${selected[@]}"; do
    base=$(collected "$case" "$zero")
    total=$(collected "$case" "$n")
    per_call[$case]=$((total - base))
done

# Tenths of an instruction, rounded half up, as "123.4".
tenths() {
    local diff=$1 q
    q=$(((diff * 20 + n) / (2 * n)))
    if ((q < 0)); then
        printf -- "-"
        q=$((-q))
    fi
    printf "%d.%d" $((q / 10)) $((q % 10))
}

commit=$(git rev-parse --short HEAD)
# What was built is the working tree: say so when the measured code differs from the commit.
if [[ -n $(git status --porcelain -- resilience-runtime resilience-macros benches Cargo.lock) ]]; then
    commit="$commit with uncommitted changes"
fi
echo "instructions per call (callgrind, $n calls less 0), $(date +%F), commit $commit"
echo
echo "| case | instructions per call | over bare | ours / peer | increment |"
echo "|---|---:|---:|---:|---:|"
for case in "${selected[@]}"; do
    diff=${per_call[$case]}
    over=""
    if [[ -n ${per_call[bare]+x} && ${guards_call[$case]} == yes ]]; then
        over=$(tenths $((diff - per_call[bare])))
    fi
    ratio=""
    peer=${peer_of[$case]}
    if [[ $peer != - ]]; then
        if [[ -n ${per_call[$peer]+x} ]]; then
            ratio="$(awk -v a="$diff" -v b="${per_call[$peer]}" 'BEGIN { printf "%.2f", a / b }')× ($peer)"
        else
            ratio="($peer not run)"
        fi
    fi
    increment=""
    base_case=${extends[$case]}
    if [[ $base_case != - ]]; then
        if [[ -n ${per_call[$base_case]+x} ]]; then
            step=$((diff - per_call[$base_case]))
            increment="$( ((step >= 0)) && printf +)$(tenths "$step") (over $base_case)"
        else
            increment="($base_case not run)"
        fi
    fi
    echo "| $case | $(tenths "$diff") | $over | $ratio | $increment |"
done
