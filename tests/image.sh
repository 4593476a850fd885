#!/bin/bash
# tests/image.sh — kbox image: what build, ls and rm refuse (no engine
# needed); against a real engine (KBOX_TEST_DOCKER_HOST, as
# tests/docker.sh), build of the recipe the engine has (nothing is
# built), ls, rm of another name of it, of an image kbox did not build and
# of one that is not there; and, as root with mmdebstrap, a root file
# system with a pip requirement from a package index on 127.0.0.1
# (tests/local_index.py) that a bwrap session imports (the tree in
# $ROOT, which the sandbox user can reach).  TAP.
# shellcheck disable=SC2016 # eval strings expand later, on purpose
set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
ROOT_TAG=ki
# (the hang guard's patience: a first build of the requirements' tree
# takes minutes)
KBOX_TEST_STALL=${KBOX_TEST_STALL:-1800}
# shellcheck source=tests/lib.sh
. "$top_srcdir/tests/lib.sh"

export DOCKER_HOST=${KBOX_TEST_DOCKER_HOST:-${DOCKER_HOST:-unix:///var/run/docker.sock}}
ENGINE=$top_builddir/kbox-engine
SOCK=${DOCKER_HOST#unix://}

# ---- bad input: one line, exit status 2, nothing built ----

fresh
kbox image
check no_subcommand_is_refused fails_with 2 \
	"kbox image: a subcommand is needed: build, ls or rm (see kbox image --help)"
kbox image frob
check an_unknown_subcommand_is_refused fails_with 2 \
	'kbox image: unknown subcommand "frob": kbox image build, kbox image ls or kbox image rm'
kbox image ls --packages x
check ls_refuses_an_option_of_build fails_with 2 \
	"kbox image ls: it takes no option but --format"
kbox image ls extra
check ls_refuses_an_operand fails_with 2 \
	'kbox image: unexpected argument "extra" (see kbox image --help)'
kbox image rm
check rm_without_names_is_refused fails_with 2 \
	"kbox image rm: which images? (kbox image rm NAME...)"
kbox image rm --json kbox-kernel
check rm_refuses_an_option eval 'status_is 2 &&
	stderr_is "kbox image rm: it takes no option, only the names of images"'
kbox image rm 'Bad Name'
check rm_refuses_a_bad_name fails_with 2 \
	'kbox image rm: invalid image "Bad Name": not an image reference (NAME, NAME:TAG, NAME@sha256:DIGEST or sha256:ID; NAME in lower case)'
kbox image build --name "$(printf 'Kbox\nx')"
check build_refuses_a_bad_name_in_one_line fails_with 2 \
	'kbox image build: invalid --name "Kbox\nx": not an image name (NAME or NAME:TAG, NAME in lower case)'
kbox image build --name sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
check build_refuses_an_id_as_name fails_with 2 \
	'kbox image build: invalid --name "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef": a digest or an id names no new image'
# KBOX_IMAGE_NAME is --name's default, and checked as it is
KBOX_IMAGE_NAME=Upper kbox image build
check kbox_image_name_is_the_default_name_and_checked fails_with 2 \
	'kbox image build: invalid --name "Upper": not an image name (NAME or NAME:TAG, NAME in lower case)'
kbox image build --mirror ''
check an_empty_mirror_is_refused fails_with 2 \
	"kbox image build: an empty --packages, --mirror, --rootfs, --requirements or --index-url names nothing"
kbox image build --packages ' , '
check an_empty_list_of_packages_is_refused fails_with 2 \
	"kbox image build: an empty --packages, --mirror, --rootfs, --requirements or --index-url names nothing"
kbox image build --nosuch
check an_unknown_option_names_the_subcommand fails_with 2 \
	"kbox image build: unknown option --nosuch (see kbox image build --help)"
kbox image build --index-url http://127.0.0.1:9/simple/
check index_url_without_requirements_is_refused fails_with 2 \
	"kbox image build: --index-url is for --requirements"
kbox image build --format json
check build_refuses_format eval 'status_is 2 &&
	stderr_is "kbox image build: --format is for kbox image ls"'
mkdir r0
kbox image build --rootfs r0 --name x
check rootfs_with_name_is_refused fails_with 2 \
	"kbox image build: --name names an image of the engine: with --rootfs there is none"
# (these are refused before anything is built, so before mmdebstrap runs)
kbox image build --packages 'python3-sklearn,Bad!'
check a_bad_package_name_is_refused fails_with 2 \
	"kbox image build: \"Bad!\" is no Debian package name (lower-case letters, digits, '+', '-', '.')"
kbox image build --requirements "$T/none.txt"
check a_missing_requirements_file_is_refused fails_with 2 \
	"kbox image build: --requirements $T/none.txt: no readable file"
# a link there is never followed, even to an empty directory
mkdir empty && ln -s empty link
kbox image build --rootfs link
check a_rootfs_that_is_a_link_is_refused eval 'fails_with 2 "kbox image build: --rootfs link: exists and is not an empty directory" &&
	[ -L link ] && [ -z "$(ls -A empty)" ]'
# (where the tree cannot go, said before the build)
kbox image build --rootfs "$T/no/such/dir"
check a_rootfs_whose_parent_is_missing_is_refused_at_once fails_with 2 \
	"kbox image build: --rootfs $T/no/such/dir: $T/no/such: No such file or directory"
: >plain
kbox image build --rootfs plain
check a_rootfs_that_is_a_file_is_refused fails_with 2 \
	"kbox image build: --rootfs plain: not a directory"
kbox image build --rootfs plain/x
check a_rootfs_under_a_file_is_refused fails_with 2 \
	"kbox image build: --rootfs plain/x: plain is not a directory"
mkdir full && : >full/x
kbox image build --rootfs full
check a_rootfs_that_holds_something_is_refused eval 'fails_with 2 "kbox image build: --rootfs full: exists and is not an empty directory" &&
	[ "$(ls full)" = x ]'

# ---- against the engine ----

# Why the engine tests cannot run here, or nothing.
engine_skip_reason() {
	[ -x "$ENGINE" ] || { echo "$ENGINE is not built"; return; }
	if ! "$ENGINE" ping >"$ROOT/ping.json" 2>&1; then
		echo "no engine: $(cat "$ROOT/ping.json")"
		return
	fi
	"$ENGINE" image kbox-kernel >"$ROOT/image.json" 2>&1 ||
		echo "no image kbox-kernel (kbox image build): $(cat "$ROOT/image.json")"
}
why_not=$(engine_skip_reason)
if [ -n "$why_not" ] && [ "${KBOX_TEST_ENGINE_REQUIRED-}" = 1 ]; then
	echo "Bail out! KBOX_TEST_ENGINE_REQUIRED=1, and $why_not"
	exit 1
fi
SKIPPING=$why_not

recipe=$("$top_srcdir/container/build.sh" --print-recipe | sha256sum | cut -d" " -f1)
fresh
# (no mmdebstrap on the PATH, an empty cache: a build would fail)
PATH=/nonexistent:$PATH KBOX_IMAGE_CACHE=$ROOT/no-cache kbox image build
check build_of_the_recipe_the_engine_has_builds_nothing eval 'status_is 0 && [ ! -s stderr ] &&
	stdout_is "kbox image build: image kbox-kernel is up to date (recipe sha256:$recipe)" &&
	[ ! -e "$ROOT/no-cache" ]'

kbox image ls --json
check ls_names_the_image_and_its_recipe json_true stdout '(
	[i for i in j["images"] if "kbox-kernel:latest" in i["names"]] == [i for i in j["images"]
	 if i["recipe"] == "sha256:" + a[0] and "kbox-kernel:latest" in i["names"]] and
	len([i for i in j["images"] if "kbox-kernel:latest" in i["names"]]) == 1 and
	[(i["packages"], i["requirements"]) for i in j["images"]
	 if "kbox-kernel:latest" in i["names"]] == [(None, None)] and
	all(i["id"].startswith("sha256:") and i["size"] > 100_000_000 and
	    len(i["created"]) == 20 and i["created"].endswith("Z") for i in j["images"]) and
	j["engine"] in ("docker", "podman"))' "$recipe"

kbox image ls
check ls_as_text_is_a_table_a_line_a_name eval 'status_is 0 &&
	head -n 1 stdout | grep -Eqx "NAME {20,}  ID {12}CREATED {20}SIZE  RECIPE {8}ADDED" &&
	grep -Eq "^kbox-kernel:latest +[0-9a-f]{12}  [0-9T:-]{19}Z +[0-9.]+ MiB  ${recipe:0:12}  -$" stdout'

# another name of the image goes, and the image stays
if [ -z "$SKIPPING" ]; then
	id=$(sed -n 's/.*"id":"\(sha256:[0-9a-f]*\)".*/\1/p' "$ROOT/image.json")
	api POST "/images/$id/tag?repo=kbox-test-alias&tag=x" >tag.out
fi
kbox image rm kbox-test-alias:x
check rm_of_another_name_removes_that_name eval 'status_is 0 && stdout_is "removed image kbox-test-alias:x" &&
	"$ENGINE" image kbox-kernel >/dev/null && ! "$ENGINE" image kbox-test-alias:x >/dev/null'

# an image kbox did not build (an empty file system, imported): refused
if [ -z "$SKIPPING" ]; then
	tar -cf empty.tar -T /dev/null
	api POST "/images/create?fromSrc=-&repo=kbox-test-foreign&tag=latest" empty.tar >import.out
	fid=$(grep -o 'sha256:[0-9a-f]*' import.out | tail -n 1)
	api POST "/images/$fid/tag?repo=kbox-test-foreign&tag=latest" >tag.out
fi
kbox image rm kbox-test-foreign
check rm_refuses_an_image_kbox_did_not_build eval 'fails_with 2 "kbox image rm: image kbox-test-foreign was not built by kbox (it has no label kbox.recipe): remove it with the engine'"'"'s own tools" &&
	"$ENGINE" image kbox-test-foreign >/dev/null'
# nor does build take its name from it
kbox image build --name kbox-test-foreign
check build_does_not_take_the_name_of_an_image_kbox_did_not_build eval 'fails_with 2 "kbox image build: image kbox-test-foreign is in the engine and kbox image build did not make it: choose another --name (or remove it yourself)" &&
	"$ENGINE" image kbox-test-foreign >/dev/null'
[ -n "$SKIPPING" ] || api DELETE "/images/kbox-test-foreign?force=1" >/dev/null

# the engine's message as it is (no JSON escapes), the status as ls's
DOCKER_HOST=tcp://127.0.0.1:9 kbox image build --name kbox-test-x
check build_with_an_engine_kbox_cannot_use_exits_2 fails_with 2 \
	'kbox image build: engine "tcp://127.0.0.1:9": kbox needs the engine on this machine, over its unix socket (unix:///PATH): the kernel'"'"'s sockets are files here'
DOCKER_HOST="unix://$ROOT/a\"b\\c.sock" kbox image build --name kbox-test-x
check build_without_an_engine_shows_its_path_unescaped fails_with 5 \
	"kbox image build: no container engine at $ROOT/a\"b\\c.sock (No such file or directory): start dockerd (or podman system service), or name its socket with DOCKER_HOST=unix:///PATH when the session starts"

kbox image rm kbox-test-no-such-image
check rm_of_a_missing_image_exits_5 fails_with 5 \
	"kbox image rm: image kbox-test-no-such-image not found in the engine at $SOCK"

DOCKER_HOST=unix://$ROOT/no-engine.sock kbox image ls
check ls_without_an_engine_exits_5_saying_so fails_with 5 \
	"kbox image ls: no container engine at $ROOT/no-engine.sock (No such file or directory): start dockerd (or podman system service), or name its socket with DOCKER_HOST=unix:///PATH when the session starts"

# ---- a pip requirement, from a package index on 127.0.0.1 ----

# As root, where mmdebstrap is installed (a first build takes minutes;
# the tarball is cached by its recipe in KBOX_IMAGE_CACHE): the tree
# unpacked for --rootfs, and a bwrap session on it imports the wheel the
# index served, installed in /usr/local; no compiler came with pip.  The
# code pip ran to build a source distribution ran as nobody, could not
# write /etc, and saw only its own processes; a .pth file of a wheel
# never ran as root during the build; what pip installed is root's.
SKIPPING=
needs kernel
if [ -z "$SKIPPING" ] && [ "$(id -u)" != 0 ]; then
	SKIPPING="as root only (mmdebstrap as an ordinary user needs subordinate ids)"
elif [ -z "$SKIPPING" ] && ! command -v mmdebstrap >/dev/null; then
	SKIPPING="mmdebstrap is not installed"
fi
fresh
if [ -z "$SKIPPING" ] && selected a_requirement_from_a_package_index_is_in_the_tree; then
	"$PY" "$top_srcdir/tests/local_index.py" "$T/index" >index.url 2>index.err &
	BG_PIDS="$BG_PIDS $!"
	wait_for test -s index.url
	printf 'kbox-probe==1.0\nkbox-probe-pth==1.0\nkbox-probe-build==1.0\n' >requirements.txt
	# (an abstract unix socket of the host's, which the build must not reach)
	"$PY" -c 'import socket, time
s = socket.socket(socket.AF_UNIX)
s.bind("\0kbox-probe-abstract")
s.listen(8)
time.sleep(3600)' &
	BG_PIDS="$BG_PIDS $!"
	wait_for grep -q "@kbox-probe-abstract" /proc/net/unix
	rhash=$("$top_srcdir/container/build.sh" --print-recipe --requirements requirements.txt | sha256sum | cut -d" " -f1)
	# (a first build takes minutes: longer than kbox's 120 s in tests)
	timeout -k 5 1800 "$KBOX" image build --rootfs "$ROOT/root" --requirements requirements.txt \
		--index-url "$(cat index.url)" >build.stdout 2>build.stderr
	rc=$?
fi
check a_requirement_from_a_package_index_is_in_the_tree eval 'status_is 0 &&
	last_line_is build.stdout "kbox image build: root file system in $ROOT/root (recipe sha256:$rhash): kbox start --rootfs $ROOT/root"'
kbox start -s req --rootfs "$ROOT/root"
check a_session_starts_on_that_tree status_is 0
kbox exec -s req 'import kbox_probe, shutil; print(kbox_probe.VALUE, kbox_probe.SOURCE, kbox_probe.__file__, shutil.which("gcc"), shutil.which("pip3") is not None)'
check a_session_on_that_tree_imports_it eval 'status_is 0 &&
	stdout_is "42 the local index of kbox tests /usr/local/lib/python3.11/dist-packages/kbox_probe/__init__.py None True"'
kbox exec -s req 'import kbox_probe_build as k; print(k.UID, k.WROTE_ETC, k.PID1)
print(k.TTY, k.TTY_FDS, k.REFUSED, k.SHM_BYTES, k.SYS, k.CONSOLE)
print(k.LIMITS, k.UID_MAP)
print(k.XATTR, k.ABSTRACT, repr(k.PROC_KEYS))'
# (no terminal to push input into; no key management at all (keys are
# found by uid: the host's nobody may hold some) and no further user
# namespace; a /dev/shm of its own, not the host's; no /sys; /dev/null,
# 1:3, for the tree's /dev/console, which would be the host's console;
# limits on processes, file size, address space, CPU time, descriptors
# and core files; a user namespace of its own, where only nobody is
# mapped; no key in /proc/keys; no abstract unix socket of the host's
# where Linux has Landlock's scopes, ABI 6)
abstract=$("$PY" -c 'import ctypes; print("EPERM" if ctypes.CDLL(None).syscall(444, None, 0, 1) >= 6 else "ok")')
check the_code_pip_ran_to_build_ran_as_nobody_in_namespaces_of_its_own eval 'status_is 0 &&
	stdout_is "65534 EACCES python3
ENXIO [False, False, False] ['"'"'EPERM'"'"', '"'"'EPERM'"'"', '"'"'EPERM'"'"'] 67108864 [] 1:3
[1024, 4294967296, 8589934592, 3600, 4096, 0] ['"'"'65534'"'"', '"'"'65534'"'"', '"'"'1'"'"']
ok $abstract '"'"''"'"'"'
kbox stop -s req
check no_pth_file_ran_as_root_during_the_build eval '
	[ -f "$ROOT/root/usr/local/lib/python3.11/dist-packages/kbox_probe_pth.pth" ] &&
	[ -z "$(find "$ROOT/root/usr/share" -maxdepth 1 -name "kbox-probe-pth-*")" ] &&
	[ ! -e "$ROOT/root/etc/kbox-probe-build" ] && [ ! -e /etc/kbox-probe-build ]'
check what_pip_installed_is_roots_nothing_is_nobodys_nor_links_out eval '
	[ "$(stat -c %u:%g "$ROOT/root/usr/local/lib/python3.11/dist-packages/kbox_probe_build/__init__.py")" = 0:0 ] &&
	[ -z "$(find "$ROOT/root" -xdev \( -user 65534 -o -group 65534 \) -print -quit)" ] &&
	[ ! -e "$ROOT/root/usr/.kbox-pip" ] &&
	[ ! -L "$ROOT/root/usr/local/kbox-probe-link" ] && [ ! -p "$ROOT/root/usr/local/kbox-probe-fifo" ] &&
	[ "$(stat -c %a "$ROOT/root/usr/local/kbox-probe-dir")" = 755 ] &&
	"$PY" -c "import os, sys; sys.exit(len(os.listxattr(sys.argv[1])))" "$ROOT/root/usr/local/kbox-probe-dir"'

# The hook itself, on that tree (as mmdebstrap runs it, with a /dev of the
# tree's own), installing a wheel the index marks yanked for a reason with
# escape sequences in it: pip prints the reason, and none of its control
# bytes reaches the caller's output (a terminal there would obey them).
if [ -z "$SKIPPING" ] && selected the_requirements_hook_drops_the_control_bytes_pip_prints; then
	printf 'kbox-probe-yanked==1.0\n' >"$ROOT/root/tmp/kbox-requirements.txt"
	unshare --mount sh -c 'r=$1
		mount -t tmpfs -o mode=755 kbox-dev "$r/dev" && mkdir "$r/dev/shm" || exit 1
		for n in null zero full random urandom; do
			touch "$r/dev/$n" && mount --bind "/dev/$n" "$r/dev/$n" || exit 1
		done
		KBOX_INDEX_URL=$2 sh "$3" install "$r"' sh "$ROOT/root" "$(cat index.url)" \
		"$top_srcdir/container/hooks/requirements-kbox.sh" >hook.out 2>&1
	rc=$?
	sh "$top_srcdir/container/hooks/requirements-kbox.sh" restore "$ROOT/root"
fi
check the_requirements_hook_drops_the_control_bytes_pip_prints eval 'status_is 0 &&
	grep -q "^Reason for being yanked: ]0;kbox-probe a test of the control bytes\[2J1m$" hook.out &&
	! LC_ALL=C grep -q "$(printf "[\001-\010\013-\037\177]")" hook.out &&
	! LC_ALL=C grep -q "$(printf "\302\233")" hook.out && ! LC_ALL=C grep -q "$(printf "\342\200\256")" hook.out &&
	[ -f "$ROOT/root/usr/local/lib/python3.11/dist-packages/kbox_probe_yanked/__init__.py" ]'

# An interrupted build (SIGINT to its process group, as ^C gives) says
# so, exits 130, and leaves neither its part of the tarball nor
# mmdebstrap's tree (a recipe no cache has: hello added)
fresh
if [ -z "$SKIPPING" ] && selected an_interrupted_build_says_so_and_leaves_nothing; then
	mkdir cache
	# (a session of its own, SIGINT as a terminal's job has it: a
	# background job of a script ignores it; the shell that says the
	# status outlives it)
	"$PY" -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.setsid()
os.execvp(sys.argv[1], sys.argv[1:])' sh -c 'trap : INT; KBOX_IMAGE_CACHE=$1 "$2" image build \
		--rootfs "$3" --packages hello >int.out 2>int.err; echo $? >int.rc' \
		sh "$T/cache" "$KBOX" "$T/tree" &
	BG_PIDS="$BG_PIDS $!"
	wait_for grep -qs "^I: downloading packages" int.err && kill -INT -- "-$!"
	wait_for test -s int.rc
	tmp=$(sed -n "s/^I: using \(.*\) as tempdir$/\1/p" int.err)
fi
check an_interrupted_build_says_so_and_leaves_nothing eval '[ "$(cat int.rc)" = 130 ] &&
	[ "$(tail -n 1 int.err)" = "kbox image build: interrupted" ] && [ -z "$(ls -A cache)" ] &&
	[ ! -e tree ] && [ -n "$tmp" ] && [ ! -e "$tmp" ] && ! grep -q " $tmp" /proc/mounts ||
	{ say "status $(cat int.rc), its last line: $(tail -n 1 int.err), the cache: $(ls -A cache), mmdebstrap'"'"'s tree: $tmp"; false; }'

tests_done
