#!/bin/bash
# tests/security/quota.sh — threats.md row 28: a cell that prints
# forever (or draws without end) cannot fill the host's disk.  Spill
# files stop at the session's --file-size; a session's outputs/ holds at
# most its outputs quota (kbox start --outputs-quota, default 1G),
# counted afresh before each execution; past it text is not spilled and
# images are not written, each with a note, and a cut spill file is never
# called complete.  Each test is named after its row.  TAP.
#
# Environment (set by `make check`): top_builddir (or KBOX), KERNEL_PYTHON.
# Run by hand:
#   KBOX=/path/to/build/kbox bash tests/security/quota.sh
# shellcheck disable=SC2016,SC2034 # eval strings expand later, using these variables
set -u
[ -n "${BASH_VERSION-}" ] || exec bash "$0" "$@"

# shellcheck source=tests/lib.sh
ROOT_TAG=kso
. "$(dirname "$0")/../lib.sh"

cd "$W" || exit 1
sandbox_or_skip

# the line the text shows in place of what it left out
marker() { grep '^\[\.\.\. ' "$W/$1.out"; }
size_of() { stat -c %s "$1" 2>/dev/null; }

# ---- a quota of 1 MiB ----
kx start -s q --outputs-quota 1M
keep start_q
DIAG=start_q
check "row28_a_session_starts_with_an_outputs_quota" eval 'rc_is start_q 0'
OUT=$S/q/outputs
# what a note says of a quota used up: what the model can do, what sets it
QUOTA="this execution's outputs quota is used up (show or print less in one; kbox start --outputs-quota sets it)"
EARLIER="the session's outputs quota is used up by earlier results (removing files of the session's outputs makes room: kbox prune --older-than DURATION; kbox start --outputs-quota sets it)"

# 6 MB of text: the spill file stops at the quota, and says so
pyx q <<'EOF'
for i in range(200000):
    print("x" * 20, i)
EOF
keep flood1
SPILL1=$OUT/1-1-stdout.txt
DIAG=flood1
check "row28_a_flood_over_the_quota_exits_0" eval 'rc_is flood1 0'
# (a file costs the quota a block at least: the spill file's first block
# is counted when it is made, so its text stops 4096 bytes short)
check "row28_its_spill_file_stops_at_the_quota" eval 'eq "$(size_of "$SPILL1")" 1044480'
check "row28_the_spill_file_holds_the_texts_first_bytes" eval '
	"$PY" -c "
import sys
want = b\"\".join(b\"%s %d\\n\" % (b\"x\" * 20, i) for i in range(200000))[:1044480]
sys.exit(open(sys.argv[1], \"rb\").read() != want)" "$SPILL1"'
check "row28_the_marker_says_only_the_first_bytes_are_saved_never_complete" eval '
	eq "$(marker flood1)" "[... 5483700 bytes in 199800 lines left out; only the first 1044480 bytes of the text are in $SPILL1 ...]"'
check "row28_a_note_says_the_quota_is_used_up" eval '
	grep -qxF "[note: the stdout spill file stopped at 1044480 bytes: $QUOTA]" "$W/flood1.out"'

# the quota is used up: nothing more is written, text or image
pyx q <<'EOF'
for i in range(200000):
    print("y" * 20, i)
import matplotlib.pyplot as plt
plt.plot([1, 2, 3])
plt.show()
EOF
keep flood2
DIAG=flood2
check "row28_over_the_quota_no_spill_file_is_made" eval '
	rc_is flood2 0 && [ ! -e "$OUT/1-2-stdout.txt" ] &&
	eq "$(marker flood2)" "[... 5483700 bytes in 199800 lines left out ...]" &&
	grep -qxF "[note: the complete stdout was not saved: $EARLIER]" "$W/flood2.out"'
check "row28_over_the_quota_an_image_is_not_written" eval '
	! ls "$OUT"/1-2-*.png >/dev/null 2>&1 &&
	sed -E "s/^\[note: image 1 \(image\/png, [0-9]+ bytes\) not written: //" "$W/flood2.out" | grep -qxF "$EARLIER]"'
check "row28_outputs_hold_no_more_than_the_quota" eval '
	eq "$(cat "$OUT"/* | wc -c)" 1044480 && le "$(du -B1 -c "$OUT"/* | tail -n 1 | cut -f1)" 1048576'

# what is removed from outputs/ is room again (counted before each execution)
[ -n "$SKIPPING" ] || rm -f "$SPILL1"
pyx q <<'EOF'
for i in range(100000):
    print("z" * 20, i)
EOF
keep flood3
DIAG=flood3
check "row28_room_made_in_outputs_is_used_again" eval '
	rc_is flood3 0 && eq "$(size_of "$OUT/1-3-stdout.txt")" 1044480'
kx stop -s q

# ---- a spill file stops at --file-size, whatever the quota ----
kx start -s f --file-size 1M
keep start_f
pyx f <<'EOF'
for i in range(200000):
    print("x" * 20, i)
EOF
keep flood4
DIAG="start_f flood4"
check "row28_a_spill_file_stops_at_the_sessions_file_size" eval '
	rc_is flood4 0 && eq "$(size_of "$S/f/outputs/1-1-stdout.txt")" 1048576 &&
	grep -qx "\[note: the stdout spill file stopped at 1 MiB (the largest file the session may write)\]" "$W/flood4.out"'
kx stop -s f

# ---- bad input ----
# Files, not only bytes: empty images (cleared, so that the display limit
# never stops them) cost a block each, and one execution makes at most
# 1000 files.
kx start -s many --outputs-quota 100M
pyx many <<'EOF'
import base64
from IPython.display import display, clear_output
for i in range(3000):
    # each its own (the same bytes twice are one file)
    display({"image/png": base64.b64encode(i.to_bytes(4, "big")).decode()}, raw=True)
    if i % 50 == 49:
        clear_output()
EOF
keep many
DIAG=many
check "row28_one_execution_makes_at_most_1000_files" eval '
	rc_is many 0 && le "$(ls "$S/many/outputs" | wc -l)" 1000 &&
	grep -Eq "not written: this execution made 1000 files already\]$" "$W/many.out"'
kx stop -s many

kx start -s bad --outputs-quota 10
keep bad
DIAG=bad
check "row28_outputs_quota_below_1M_is_a_usage_error" eval '
	rc_is bad 2 && eq "$(cat "$W/bad.err")" "kbox start: invalid --outputs-quota \"10\": expected a size of at least 1M, a number of bytes or one with a suffix K, M, G or T (e.g. 256M, 4G)"'

tests_done
