#!/bin/sh
# tests/containerfile.sh — container/Containerfile builds the kernel image
# that container/build.sh and container/image.sh make offline: from a
# Debian bookworm base, with the recipe's packages and the same hook, the
# labels, user, working directory and environment of kbox-engine import;
# the build refuses a KBOX_RECIPE or a PACKAGES its labels would get
# wrong; and a kbox session runs on the image.  TAP.
#
# The engine: KBOX_TEST_DOCKER_HOST (unix:///PATH; default: DOCKER_HOST,
# else /var/run/docker.sock), driven by the docker CLI.  The base is made
# here, not pulled (no registry needed): mmdebstrap --variant=minbase
# bookworm, as a tarball cached in $KBOX_IMAGE_CACHE (else
# ~/.cache/kbox/image) as build.sh caches its own, imported as
# kbox-test-bookworm-base:HASH (HASH: its recipe's SHA-256); an image or
# tarball of that recipe is used as it is.  The build reaches Debian's
# mirror through apt alone (--network host: an engine without a bridge
# gives a build container no other way).  The base and the built image,
# kbox-test-containerfile, stay: they are the next run's cache, with
# which a build takes seconds; the first takes minutes (the packages).
# Without the docker CLI, an engine, or a base and mmdebstrap to make one,
# every test is skipped, saying why; with KBOX_TEST_ENGINE_REQUIRED=1
# (CI) that is a failure instead.
# shellcheck disable=SC2016 # eval strings expand later, on purpose
set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
ROOT_TAG=kc
# (the hang guard's patience: a first build, its packages unpacked and
# compiled, takes three to five minutes here; docker has 30 of its own)
KBOX_TEST_STALL=${KBOX_TEST_STALL:-1800}
# shellcheck source=tests/lib.sh
. "$top_srcdir/tests/lib.sh"

export DOCKER_HOST="${KBOX_TEST_DOCKER_HOST:-${DOCKER_HOST:-unix:///var/run/docker.sock}}"
IMAGE=kbox-test-containerfile
ENGINE=$top_builddir/kbox-engine
CACHE=${KBOX_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kbox/image}
BUILD=$top_srcdir/container/build.sh

# The base's recipe: what the tarball is made of, and its name.
base_recipe() {
	echo "kbox-test-base 1"
	echo "suite bookworm"
	echo "variant minbase"
	echo "customize-hook rm -f \$1/etc/resolv.conf \$1/etc/hostname"
}
BASE_HASH=$(base_recipe | sha256sum | cut -d' ' -f1)
BASE_IMAGE=kbox-test-bookworm-base:$BASE_HASH
BASE_TAR=$CACHE/base-$BASE_HASH.tar
RECIPE=$("$BUILD" --print-recipe | sha256sum | cut -d' ' -f1)

# Why the tests cannot run here, or nothing.
skip_reason() {
	[ -x "$ENGINE" ] || { echo "$ENGINE is not built"; return; }
	command -v docker >/dev/null 2>&1 || { echo "the docker CLI is not installed"; return; }
	if ! docker version --format '{{.Server.Version}}' >"$ROOT/version" 2>&1; then
		echo "no engine at $DOCKER_HOST: $(tail -n 1 "$ROOT/version")"
		return
	fi
	docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 || [ -f "$BASE_TAR" ] ||
		command -v mmdebstrap >/dev/null 2>&1 ||
		echo "no image $BASE_IMAGE, no $BASE_TAR, and no mmdebstrap to make them"
}
why_not=$(skip_reason)
if [ -n "$why_not" ] && [ "${KBOX_TEST_ENGINE_REQUIRED-}" = 1 ]; then
	echo "Bail out! KBOX_TEST_ENGINE_REQUIRED=1, and $why_not"
	exit 1
fi
SKIPPING=$why_not

# dk NAME ARGS...: docker ARGS (at most 30 minutes), kept as NAME
# ($W/NAME.out, .err, .rc; diag NAME shows them).  Nothing while skipping.
dk() {
	[ -z "$SKIPPING" ] || return 0
	dk_name=$1
	shift
	timeout -k 10 1800 docker "$@" >"$W/$dk_name.out" 2>"$W/$dk_name.err"
	echo $? >"$W/$dk_name.rc"
}
# build NAME ARGS...: the Containerfile built with ARGS (build args, -t),
# from the base made here (BASE_ID, once known), kept as NAME.  A failed
# build leaves no container (--force-rm).
build() {
	b_name=$1
	shift
	dk "$b_name" build --network host --force-rm --build-arg "BASE=${BASE_ID:-$BASE_IMAGE}" "$@" \
		-f "$top_srcdir/container/Containerfile" "$top_srcdir/container"
}
# in_image NAME CMD...: CMD in a container of the image, as its user, with
# no network, removed after; kept as NAME.  (Not run --rm: the docker CLI
# loses the exit status of one Podman removes; limits of its own, as kbox
# gives its containers: Podman's defaults may exceed the host's.)
in_image() {
	i_name=$1
	shift
	dk "$i_name" run --name "kbox-test-cf-$$-$i_name" --network none --label "kbox.test=$ROOT" \
		--ulimit nofile=1024:1024 --ulimit nproc=1024:1024 "$IMAGE" "$@"
	[ -n "$SKIPPING" ] || docker rm "kbox-test-cf-$$-$i_name" >/dev/null 2>&1
}
# inspect FORMAT: the built image's configuration, by a Go template.
inspect() { docker image inspect --format "$1" "$IMAGE"; }
# refused_saying NAME TEXT: build NAME failed, and TEXT is a line of its
# output (Docker's classic builder colours a step's stderr: not a part).
refused_saying() {
	! rc_is "$1" 0 >/dev/null && cat "$W/$1.out" "$W/$1.err" |
		sed 's/\x1b\[[0-9;]*m//g' | grep -qxF -- "$2"
}

cleanup_more() {
	# (the containers of a run ended half-way)
	[ -n "$why_not" ] || docker ps -aq --filter "label=kbox.test=$ROOT" 2>/dev/null |
		xargs -r docker rm -f >/dev/null 2>&1
}

fresh

# ---- the base: made once, then the image or the tarball is used ----

setup_for a_bookworm_base_is_made_once_and_kept -- \
	a_wrong_recipe_hash_is_refused_naming_the_right_one \
	packages_are_part_of_the_recipe_the_build_wants \
	packages_spelt_unlike_the_label_are_refused_naming_the_spelling \
	a_refused_build_makes_no_image the_containerfile_builds_from_the_local_base \
	a_second_build_is_the_same_image_from_the_cache the_recipe_label_is_build_shs_recipe_hash \
	the_labels_are_the_imports_but_built_by the_user_is_kbox_and_the_working_directory_workspace \
	the_environment_is_the_imports no_compiler_and_the_user_kbox_in_the_workspace \
	the_kernels_modules_import_in_silence the_image_keeps_build_shs_recipe \
	the_manifest_lists_python3_ipykernel kbox_starts_a_session_on_the_image \
	its_kernel_runs_pandas stop_ends_the_session
if [ -z "$SKIPPING" ] && ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
	# (a cache this user cannot write, as CI's shared one: the tarball is
	# made for this run only, and the image is what stays)
	mkdir -p "$CACHE" 2>/dev/null && [ -w "$CACHE" ] || [ -f "$BASE_TAR" ] ||
		BASE_TAR=$ROOT/base-$BASE_HASH.tar
	if [ ! -f "$BASE_TAR" ]; then
		# (a registry's base has neither: the engine gives them)
		SOURCE_DATE_EPOCH=1700000000 timeout -k 10 1200 mmdebstrap --variant=minbase \
			--format=tar --customize-hook='rm -f "$1/etc/resolv.conf" "$1/etc/hostname"' \
			bookworm "$BASE_TAR.$$.part" >"$W/base.out" 2>"$W/base.err" &&
			mv "$BASE_TAR.$$.part" "$BASE_TAR"
		echo $? >"$W/base.rc"
		rm -f "$BASE_TAR.$$.part"
	fi
	[ ! -f "$BASE_TAR" ] || dk base import "$BASE_TAR" "$BASE_IMAGE"
fi
DIAG=base
check a_bookworm_base_is_made_once_and_kept eval 'docker image inspect "$BASE_IMAGE" >/dev/null'
DIAG=
# the builds take the base by its id: another run that imports the base
# meanwhile (CI's lanes, on the engine's first day) moves the tag, not
# this run's base
[ -n "$SKIPPING" ] || BASE_ID=$(docker image inspect --format '{{.Id}}' "$BASE_IMAGE" 2>/dev/null)

# ---- what the build refuses, before it installs anything ----

setup_for a_wrong_recipe_hash_is_refused_naming_the_right_one
build wrong-recipe --build-arg "KBOX_RECIPE=$(printf '%064d' 0)" -t kbox-test-containerfile-refused
DIAG=wrong-recipe
check a_wrong_recipe_hash_is_refused_naming_the_right_one refused_saying wrong-recipe \
	"Containerfile: the build arg KBOX_RECIPE is \"$(printf '%064d' 0)\", and the recipe's SHA-256 is $RECIPE: build with --build-arg KBOX_RECIPE=$RECIPE (container/build.sh --print-recipe | sha256sum)"

setup_for packages_are_part_of_the_recipe_the_build_wants
sk=$("$BUILD" --print-recipe --packages python3-sklearn | sha256sum | cut -d' ' -f1)
build packages-recipe --build-arg PACKAGES=python3-sklearn --build-arg "KBOX_RECIPE=$RECIPE" \
	-t kbox-test-containerfile-refused
DIAG=packages-recipe
check packages_are_part_of_the_recipe_the_build_wants refused_saying packages-recipe \
	"Containerfile: the build arg KBOX_RECIPE is \"$RECIPE\", and the recipe's SHA-256 is $sk: build with --build-arg KBOX_RECIPE=$sk (container/build.sh --print-recipe --packages python3-sklearn | sha256sum)"

setup_for packages_spelt_unlike_the_label_are_refused_naming_the_spelling \
	a_refused_build_makes_no_image
two=$("$BUILD" --print-recipe --packages 'python3-sklearn python3-scipy' | sha256sum | cut -d' ' -f1)
build packages-spelling --build-arg 'PACKAGES=python3-sklearn python3-scipy' \
	--build-arg "KBOX_RECIPE=$two" -t kbox-test-containerfile-refused
DIAG=packages-spelling
check packages_spelt_unlike_the_label_are_refused_naming_the_spelling refused_saying packages-spelling \
	'Containerfile: the build arg PACKAGES is "python3-sklearn python3-scipy": spell it as the label kbox.packages has it: --build-arg PACKAGES=python3-scipy,python3-sklearn'
check a_refused_build_makes_no_image eval '! docker image inspect kbox-test-containerfile-refused >/dev/null 2>&1'

# ---- the image ----

setup_for the_containerfile_builds_from_the_local_base \
	a_second_build_is_the_same_image_from_the_cache the_recipe_label_is_build_shs_recipe_hash \
	the_labels_are_the_imports_but_built_by the_user_is_kbox_and_the_working_directory_workspace \
	the_environment_is_the_imports no_compiler_and_the_user_kbox_in_the_workspace \
	the_kernels_modules_import_in_silence the_image_keeps_build_shs_recipe \
	the_manifest_lists_python3_ipykernel kbox_starts_a_session_on_the_image \
	its_kernel_runs_pandas stop_ends_the_session
build first --build-arg "KBOX_RECIPE=$RECIPE" -t "$IMAGE" --iidfile "$W/first.id"
DIAG=first
check the_containerfile_builds_from_the_local_base eval 'rc_is first 0 && [ -s "$W/first.id" ]'

build second --build-arg "KBOX_RECIPE=$RECIPE" -t "$IMAGE" --iidfile "$W/second.id"
DIAG=second
check a_second_build_is_the_same_image_from_the_cache eval 'rc_is second 0 &&
	eq "$(cat "$W/second.id")" "$(cat "$W/first.id")"'
DIAG=

check the_recipe_label_is_build_shs_recipe_hash eval \
	'eq "$(inspect "{{index .Config.Labels \"kbox.recipe\"}}")" "sha256:$RECIPE"'
# (and the builder's own: Buildah adds io.buildah.version)
check the_labels_are_the_imports_but_built_by eval \
	'eq "$(inspect "{{range \$k, \$v := .Config.Labels}}{{\$k}}={{\$v}}{{println}}{{end}}" | grep "^kbox\.")" \
	"$(printf "%s\n" kbox.built-by=container/Containerfile kbox.packages= "kbox.recipe=sha256:$RECIPE")"'
check the_user_is_kbox_and_the_working_directory_workspace eval \
	'eq "$(inspect "{{.Config.User}} {{.Config.WorkingDir}}")" "1000:1000 /workspace"'
# (and PATH, when the base sets it)
check the_environment_is_the_imports eval \
	'eq "$(inspect "{{range .Config.Env}}{{println .}}{{end}}" | grep -v "^PATH=")" "$(printf "LANG=C.UTF-8\nMPLCONFIGDIR=/tmp/matplotlib")"'

in_image compilers sh -c 'for t in gcc g++ cc c++ cpp as ld; do command -v "$t"; done; id -u; pwd'
DIAG=compilers
check no_compiler_and_the_user_kbox_in_the_workspace eval 'rc_is compilers 0 &&
	out_is compilers "$(printf "1000\n/workspace")" && [ ! -s "$W/compilers.err" ]'

in_image imports python3 -c 'import ipykernel, pandas, scipy.stats, matplotlib.pyplot'
DIAG=imports
check the_kernels_modules_import_in_silence eval 'rc_is imports 0 &&
	[ ! -s "$W/imports.out" ] && [ ! -s "$W/imports.err" ]'

in_image recipe cat /usr/share/kbox/recipe
DIAG=recipe
check the_image_keeps_build_shs_recipe eval 'rc_is recipe 0 && out_is recipe "$("$BUILD" --print-recipe)"'
in_image manifest cat /usr/share/kbox/manifest
DIAG=manifest
check the_manifest_lists_python3_ipykernel eval 'rc_is manifest 0 &&
	grep -q "^python3-ipykernel [^ ][^ ]*$" "$W/manifest.out"'
DIAG=

# ---- a kbox session on it ----

kbox start -s c --backend docker --image "$IMAGE"
check kbox_starts_a_session_on_the_image eval 'status_is 0 && stderr_empty &&
	stdout_is "session c started (backend docker, kernel python3, supervisor pid $(cat "$S/c/supervisor.pid"))"'
kbox exec -s c 'import pandas as pd; print(pd.Series([1,2,3]).sum())'
check its_kernel_runs_pandas eval 'status_is 0 && stdout_is 6 && stderr_empty'
kbox stop -s c
check stop_ends_the_session eval 'status_is 0 && stdout_is "session c stopped"'
setup_for

tests_done
